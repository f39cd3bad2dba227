"""The notebook edits of runs: listed for the widget, reverted by its button and ``%neta undo``.

An edit is reverted after its run may have ended, so its state lives in the store (not the run's
closed event log): ``GET …/notebook/edits?requestId=`` shows each edit with whether it was
reverted, and ``POST …/notebook/revert`` undoes one. ``POST …/notebook/insert`` adds a run's
answer or code as a cell (the side panel's buttons), as one more edit of the run.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..runtime import Runtime, reads
from ..runtime.data.runs import Run
from ..runtime.requests import InsertRequest, RevertRequest
from ..tools.notebook_doc import CellChanged, NotebookEdit, NotebookError, source_hash
from ..tools.notebook_ops import EditOrigin, NotebookEditor, revert
from .base import NetaHandler
from .errors import ApiError
from .notebooks import ServerNotebooks, checked_path


async def _latest_edit(
    runtime: Runtime, principal: str, path: str, notebooks: ServerNotebooks
) -> NotebookEdit:
    """The last edit not yet reverted of the principal's latest run from the notebook ``path``."""
    for run in await runtime.list_runs(principal):
        edits = await _edits_of(runtime, run, path, notebooks)
        if edits is None:
            continue
        pending = [e for e in edits if not e.reverted]
        if not pending:
            break
        return pending[-1]
    raise ApiError(404, "NOTHING_TO_UNDO", f"the latest run of {path} left no edit to revert")


async def _edits_of(
    runtime: Runtime, run: Run, path: str, notebooks: ServerNotebooks
) -> list[NotebookEdit] | None:
    """The run's edits when it is a run from the notebook ``path`` (``None``: it is not).

    An MCP session's run works on the notebooks its calls name: it is from each it edited.
    """
    if run.options.kind == "mcp":
        edits = [e for e in await reads.notebook_edits(runtime, run) if e.path == path]
        return edits or None
    notebook = run.options.notebook_path
    if notebook is None or notebooks.under_root(notebook).replace("\\", "/").strip("/") != path:
        return None
    return await reads.notebook_edits(runtime, run)


async def find_edit(
    runtime: Runtime, principal: str, body: RevertRequest, notebooks: ServerNotebooks
) -> NotebookEdit:
    """The edit the request names (404 when it is not the principal's)."""
    if body.notebook_path is not None:
        try:
            path = checked_path(notebooks.under_root(body.notebook_path))
        except NotebookError as exc:
            raise ApiError(400, "INVALID_FIELDS", str(exc)) from exc
        return await _latest_edit(runtime, principal, path, notebooks)
    assert body.edit_id is not None
    found = await reads.notebook_edit(runtime, principal, body.edit_id)
    if found is None:  # none, or another user's
        raise ApiError(404, "EDIT_NOT_FOUND", f"no notebook edit {body.edit_id!r}")
    return found


async def revert_edit(notebooks: ServerNotebooks, edit: NotebookEdit) -> NotebookEdit:
    """Undo the edit in its notebook; 409 when it cannot be undone as it stands."""
    if edit.reverted:
        raise ApiError(409, "ALREADY_REVERTED", f"edit {edit.edit_id} was already reverted")
    try:
        return await revert(notebooks.host(edit.path), edit)
    except CellChanged as exc:
        now = f" (its source now has hash {source_hash(exc.source)})" if exc.source else ""
        raise ApiError(
            409,
            "CELL_CHANGED",
            f"cell {edit.cell_id} changed after the edit{now}, so it was not reverted",
        ) from exc
    except NotebookError as exc:
        raise ApiError(409, "CELL_CHANGED", str(exc)) from exc


class NotebookHandler(NetaHandler):
    """The notebook factory of the server, for the handlers below."""

    @property
    def notebooks(self) -> ServerNotebooks:
        """Reaches a run's notebook as its tools do."""
        notebooks: ServerNotebooks = self.settings["neta_notebooks"]
        return notebooks


class RevertHandler(NotebookHandler):
    """``POST /neta/api/notebook/revert``: ``{editId}`` or ``{notebookPath}`` (its latest run)."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.parse_body(RevertRequest)
        edit = await find_edit(self.runtime, self.principal, body, self.notebooks)
        done = await revert_edit(self.notebooks, edit)
        self.reply({"edit": done.payload()})


class EditsHandler(NotebookHandler):
    """``GET /neta/api/notebook/edits?requestId=``: a run's edits and whether each is reverted."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        request_id = self.query("requestId") or ""
        run = await self.runtime.get_run(self.principal, request_id)
        edits = await reads.notebook_edits(self.runtime, run)
        self.reply({"edits": [e.payload() for e in edits]})


INSERTED_BY = "neta-panel"
"""The ``toolCallId`` of a cell inserted from the side panel: no call of the run wrote it."""


class InsertHandler(NotebookHandler):
    """``POST /neta/api/notebook/insert``: a run's answer or code as a new cell at the end."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.parse_body(InsertRequest)
        run = await self.runtime.get_run(self.principal, body.request_id)
        try:
            host = self.notebooks.host(checked_path(self.notebooks.under_root(body.notebook_path)))
            origin = EditOrigin(run.request_id, INSERTED_BY, run.prompt)
            edit = await NotebookEditor(host, origin).insert(
                body.source, body.cell_type, None, "end"
            )
        except NotebookError as exc:
            raise ApiError(400, "INVALID_FIELDS", str(exc)) from exc
        self.reply({"edit": edit.payload()})
