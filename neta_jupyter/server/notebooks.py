"""The run's notebook on the server: the live shared document when a room holds it, else the file.

When the collaboration extension (``jupyter_server_ydoc``) is loaded and a room holds the
notebook (someone has it open), the tools change that room's ``YNotebook``: the change reaches
every open view at once, merges with what the user types, and the room saves the file. When no
room holds it (nobody has it open) or the extension is absent, the tools read the ``.ipynb``
through the server's contents manager and save it after each change.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path, PurePath
from typing import Any

from jupyter_core.utils import ensure_async

from ..extras import COLLABORATION
from ..runtime.data.runs import Run
from ..store import RecordStore
from ..tools.notebook_doc import CellList, NotebookEdit, NotebookError, Via, source_text
from ..tools.registry import RunNotebook

YDOC_EXTENSION = "jupyter_server_ydoc"
NOT_OPEN = "the notebook was not open: the file was saved"
WITHOUT_ROOMS = (
    "the file was saved: live edits of open notebooks need the collaboration extension "
    f"({COLLABORATION.install}); a view that has the notebook open shows the change once it "
    "reloads the file"
)


class FileCells:
    """:class:`CellList` over a notebook read through the contents API.

    ``changed`` says whether it must be saved: a read alone leaves the file as it was, unless
    its cells had no ids yet (they are given ids, saved, so the agent can address them).
    """

    def __init__(self, notebook: Any) -> None:
        self._nb = notebook
        self.changed = False
        if (notebook.get("nbformat"), notebook.get("nbformat_minor", 0)) < (4, 5):
            notebook["nbformat"], notebook["nbformat_minor"] = 4, 5  # cells get ids from 4.5
            self.changed = True
        for cell in notebook["cells"]:
            if "id" not in cell:
                cell["id"], self.changed = uuid.uuid4().hex[:8], True

    def __len__(self) -> int:
        return len(self._nb["cells"])

    def cell(self, index: int) -> dict[str, Any]:
        cell: dict[str, Any] = copy.deepcopy(dict(self._nb["cells"][index]))
        return cell | {"source": source_text(cell.get("source"))}

    def insert(self, index: int, cell: dict[str, Any]) -> None:
        self._nb["cells"].insert(index, copy.deepcopy(cell))
        self.changed = True

    def delete(self, index: int) -> None:
        del self._nb["cells"][index]
        self.changed = True

    def set_source(self, index: int, source: str) -> None:
        self._nb["cells"][index]["source"] = source
        self.changed = True

    def set_outputs(self, index: int, outputs: list[dict[str, Any]], count: int | None) -> None:
        cell = self._nb["cells"][index]
        cell["outputs"] = copy.deepcopy(outputs)
        cell["execution_count"] = count
        self.changed = True

    def set_metadata(self, index: int, key: str, value: Any) -> None:
        self._nb["cells"][index].setdefault("metadata", {})[key] = value
        self.changed = True

    def set_running(self, index: int, running: bool) -> None:
        """A file has no running state."""


def ydoc_extension(serverapp: Any) -> Any | None:
    """The collaboration extension of the server, when it is loaded."""
    manager = getattr(serverapp, "extension_manager", None)
    apps = manager.extension_apps.get(YDOC_EXTENSION, set()) if manager is not None else set()
    return next(iter(apps), None)


def checked_path(path: str) -> str:
    """A notebook path under the server root, or a :class:`NotebookError`."""
    clean = path.replace("\\", "/").strip("/")
    parts = clean.split("/")
    if path.startswith(("/", "~")) or ".." in parts or not clean.endswith(".ipynb"):
        raise NotebookError(f"{path!r} is not a notebook path under the server root")
    return clean


class ServerNotebook:
    """:class:`~neta_jupyter.tools.notebook_doc.NotebookHost` for one notebook of the server."""

    def __init__(
        self,
        serverapp: Any,
        path: str,
        records: RecordStore,
        locks: dict[str, asyncio.Lock] | None = None,
    ) -> None:
        self._app = serverapp
        self._path = checked_path(path)
        self._records = records
        self._locks = locks if locks is not None else {}
        self._via: Via = "shared"
        self._note = ""

    @property
    def path(self) -> str:
        """Under the server root."""
        return self._path

    @property
    def via(self) -> Via:
        """How the last opening reached the cells."""
        return self._via

    @property
    def note(self) -> str:
        """Why the last opening went through the file ("" when through a room)."""
        return self._note

    async def _shared(self) -> Any | None:
        extension = ydoc_extension(self._app)
        if extension is None:
            self._note = WITHOUT_ROOMS
            return None
        self._note = NOT_OPEN
        try:
            return await extension.get_document(
                path=self._path, content_type="notebook", file_format="json", copy=False
            )
        except Exception as exc:  # an unindexed or unreadable file: the contents path says why
            logging.getLogger("neta_jupyter").debug("neta: no shared document: %s", exc)
            return None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[CellList]:
        """The cells: the room's document as is, or the file, saved when the body is done."""
        document = await self._shared()
        if document is not None:
            from .notebook_shared import SharedCells  # pycrdt: present, as the room is

            self._via, self._note = "shared", ""
            with document.ydoc.transaction():
                yield SharedCells(document)
            return
        self._via = "file"
        contents = self._app.contents_manager
        # One read-change-save of a file at a time, or one would save over another's change.
        async with self._locks.setdefault(self._path, asyncio.Lock()):
            try:
                model = await ensure_async(contents.get(self._path, content=True, type="notebook"))
            except Exception as exc:
                raise NotebookError(f"cannot read the notebook {self._path}: {exc}") from exc
            cells = FileCells(model["content"])
            yield cells
            if cells.changed:
                body = {"type": "notebook", "format": "json", "content": model["content"]}
                await ensure_async(contents.save(body, self._path))

    async def record(self, edit: NotebookEdit) -> None:
        """Keep the edit (and later its reverted state) in the store."""
        await self._records.put_notebook_edit(edit.edit_id, edit.request_id, edit.to_json())


class ServerNotebooks:
    """The runtime's notebook factory: a run's ``notebookPath`` → its notebook."""

    def __init__(self, serverapp: Any, records: RecordStore) -> None:
        self._app = serverapp
        self._records = records
        self._locks: dict[str, asyncio.Lock] = {}
        """One per notebook file: its read-change-save through the contents API."""

    def host(self, path: str) -> ServerNotebook:
        """The notebook at ``path`` (a :class:`NotebookError` for a path outside the root)."""
        return ServerNotebook(self._app, path, self._records, self._locks)

    def __call__(self, run: Run) -> RunNotebook | None:
        """The run's notebook; None when the run names none (or one outside the root)."""
        if not run.options.notebook_path:
            return None
        try:
            return RunNotebook(self.host(self.under_root(run.options.notebook_path)), run.prompt)
        except NotebookError:
            return None

    def under_root(self, path: str) -> str:
        """``path`` relative to the server root when it is an absolute path inside it.

        A kernel JupyterLab started names its notebook by its absolute path (the session name
        the server gives it); the tools address notebooks under the root.
        """
        if not PurePath(path).is_absolute():
            return path
        root = Path(self._app.root_dir).expanduser().resolve()
        try:
            return Path(path).resolve().relative_to(root).as_posix()
        except ValueError:  # outside the root: checked_path refuses it
            return path
