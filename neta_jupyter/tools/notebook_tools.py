"""The notebook tools: read the run's notebook, and insert, edit, delete and move its cells.

Cells are addressed by id, never by position. ``edit_cell`` and ``delete_cell`` are refused when
the cell is not the version the caller knows: the hash it names (``source_hash``, for clients
that keep them), or else the version the run last saw — in the notebook when the prompt was
sent, read, or written by the run — so a model need not copy hashes. The refusal holds the
current source and says how to retry. Each applied change is published as a ``TOOL_EVENT`` of
category ``notebook_edit`` with a unified diff, and kept in the store so it can be reverted.
``run_cell`` is in :mod:`.notebook_run`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import Annotated, Any, Literal

from pydantic import Field

from ..events import EventType, ToolSideData
from .notebook_call import CellId, notebook_of
from .notebook_doc import (
    CellChanged,
    CellType,
    NotebookEdit,
    NotebookError,
    find,
    shown,
    source_hash,
    unified_diff,
)
from .notebook_ops import EditOrigin, NotebookEditor
from .notebook_read import read_cells
from .notebook_run import CellFailed, run_cell, run_code, run_preview
from .registry import Tool, ToolContext, tool
from .values import ToolError, ToolResult

EDIT_CATEGORY = "notebook_edit"
"""The ``TOOL_EVENT`` category of an applied edit."""
Position = Literal["top", "end"]

Hash = Annotated[
    str | None,
    Field(
        description="optional: the cell's hash as read_notebook showed it; leave it out to "
        "check against the version this run last saw"
    ),
]
After = Annotated[
    str | None, Field(description="put it after the cell with this id (instead of position)")
]
Where = Annotated[Position, Field(description="top or end, when after_cell_id is not given")]
Run = Annotated[
    bool, Field(description="true to also run the code cell now (its output comes back)")
]


def editor(ctx: ToolContext) -> NotebookEditor:
    """The editor of the run's notebook for this call."""
    notebook = notebook_of(ctx)
    origin = EditOrigin(ctx.request_id, ctx.tool_call_id, notebook.prompt)
    return NotebookEditor(notebook.host, origin, notebook.seen)


def publish(ctx: ToolContext, name: str, edit: NotebookEdit) -> str:
    """Announce an applied edit on the run's stream; the model's summary of it."""
    where = f" ({edit.note})" if edit.note else ""
    if ctx.scope is not None:
        ctx.scope.emit(
            EventType.TOOL_EVENT,
            ToolSideData(
                tool_call_id=ctx.tool_call_id,
                tool_name=name,
                category=EDIT_CATEGORY,
                payload=edit.payload(),
                user_message=f"{edit.kind} of cell {edit.cell_id} in {edit.path}{where}",
            ),
        )
    new_hash = f", new hash {edit.after_hash}" if edit.after_hash else ""
    return f"{edit.kind} of cell {edit.cell_id} applied{new_hash}{where}.{_next(edit)}"


def _next(edit: NotebookEdit) -> str:
    """What the model may want to do after the edit."""
    if edit.cell_type != "code" or edit.kind not in ("insert", "edit"):
        return ""
    if edit.kind == "edit":
        # Advised to run it, a 1.5B model ran the cell and then went on adding cells of its own;
        # told nothing, it sent the same edit again (docs/models.md). A fix that should run
        # says "run": true.
        return " Tell the user what you changed."
    return f' Run it with run_cell {{"cell_id": "{edit.cell_id}"}} to see its output.'


def _retry(name: str, exc: CellChanged) -> str:
    """The refusal, and how to try again."""
    if exc.source is None:
        return str(exc)
    # Worded as the next reply, not as advice: a 1.5B model given "call edit_cell again with…"
    # repeated that sentence to the user as its answer; told what its next reply must be, it
    # made the edit (docs/models.md).
    if name == "edit_cell":
        then = (
            f"Your next reply must be the edit_cell call with cell_id {exc.cell_id!r} and the "
            "whole new source: the source above, changed as the user asked"
        )
    else:
        then = (
            f"If it should still be done, your next reply must be the {name} call with cell_id "
            f"{exc.cell_id!r} again"
        )
    return f"{exc}\nNothing was changed yet. {then} (no source_hash needed)."


async def _applied(ctx: ToolContext, name: str, change: Awaitable[NotebookEdit]) -> NotebookEdit:
    """The change made, or a failure that says how to try again."""
    try:
        return await change
    except CellChanged as exc:
        raise ToolError(_retry(name, exc)) from exc
    except NotebookError as exc:
        raise ToolError(str(exc)) from exc


async def _attempt(ctx: ToolContext, name: str, change: Awaitable[NotebookEdit]) -> str:
    return publish(ctx, name, await _applied(ctx, name, change))


@tool(readonly=True, host="notebook")
async def read_notebook(
    ctx: ToolContext,
    cell_id: Annotated[str | None, Field(description="read only this cell")] = None,
    start: Annotated[int | None, Field(description="first cell to read (1-based)", ge=1)] = None,
    end: Annotated[int | None, Field(description="last cell to read (1-based)", ge=1)] = None,
) -> str:
    """Read the user's notebook: each cell's id, type, hash, whole source and outputs.

    Outputs are summarised (text cut, images referenced).
    """
    notebook = notebook_of(ctx)
    ctx.report(f"Reading {notebook.host.path}")
    try:
        async with notebook.host.open() as cells:
            return read_cells(cells, notebook.host.path, cell_id, start, end, notebook.seen)
    except NotebookError as exc:
        raise ToolError(str(exc)) from exc


@tool(host="notebook")
async def insert_cell(
    ctx: ToolContext,
    source: Annotated[str, Field(description="the new cell's source")],
    cell_type: Annotated[CellType, Field(description="code or markdown")] = "code",
    after_cell_id: After = None,
    position: Where = "end",
    run: Run = False,
) -> str | ToolResult:
    """Add a cell to the user's notebook (after a cell, or at the top or the end).

    The answer gives the new cell's id. With run=true a code cell also runs at once, as
    run_cell would run it.
    """
    ctx.report("Inserting a cell")
    try:
        edit = await editor(ctx).insert(source, cell_type, after_cell_id, position)
    except NotebookError as exc:
        raise ToolError(str(exc)) from exc
    if not run or cell_type != "code":
        return publish(ctx, "insert_cell", edit)
    return await _and_run(ctx, "insert_cell", edit, source)


async def _and_run(
    ctx: ToolContext, name: str, edit: NotebookEdit, source: str
) -> str | ToolResult:
    """Publish the applied ``edit`` of a code cell, then run the cell's new ``source``."""
    edit.cell_type = None  # no "run it" advice: it runs now
    applied = publish(ctx, name, edit)
    try:
        result = await run_code(ctx, edit.cell_id, source)
    except CellFailed as exc:
        # The run's own cell failed: what to do next is worded as the next reply, which a
        # 1.5B model followed where it answered after advice (docs/models.md).
        again = (
            f"Your next reply must be the edit_cell call with cell_id {edit.cell_id!r}, its "
            'whole source corrected, and "run": true.'
        )
        failed = f"It ran and failed with {exc.summary}:\n{exc.error}"
        raise ToolError(f"{applied} {failed}\n{again}") from exc
    except ToolError as exc:
        return f"{applied} It was not run: {exc}"
    result.output = f"{applied} It ran; its output:\n{result.output}"
    return result


def _runs(arguments: dict[str, Any]) -> str | None:
    """An insert or an edit that runs its code cell is also a ``run_cell``."""
    runs = arguments.get("run") is True and arguments.get("cell_type", "code") == "code"
    return "run_cell" if runs else None


@tool(host="notebook")
async def edit_cell(
    ctx: ToolContext,
    cell_id: CellId,
    source: Annotated[str, Field(description="the cell's whole new source")],
    source_hash: Hash = None,
    run: Run = False,
) -> str | ToolResult:
    """Replace a cell's whole source with ``source``; with run=true a code cell then runs.

    Refused, with the cell's current source, when it changed since you last saw it: then call
    edit_cell again with a source written from that one.
    """
    ctx.report(f"Editing cell {cell_id}")
    edit = await _applied(ctx, "edit_cell", editor(ctx).edit(cell_id, source, source_hash))
    if not run or edit.cell_type != "code":
        return publish(ctx, "edit_cell", edit)
    return await _and_run(ctx, "edit_cell", edit, source)


@tool(host="notebook")
async def delete_cell(ctx: ToolContext, cell_id: CellId, source_hash: Hash = None) -> str:
    """Delete a cell from the user's notebook (refused when it changed since you read it)."""
    ctx.report(f"Deleting cell {cell_id}")
    return await _attempt(ctx, "delete_cell", editor(ctx).delete(cell_id, source_hash))


@tool(host="notebook")
async def move_cell(
    ctx: ToolContext, cell_id: CellId, after_cell_id: After = None, position: Where = "end"
) -> str:
    """Move a cell after another cell, or to the top or the end of the notebook."""
    ctx.report(f"Moving cell {cell_id}")
    return await _attempt(ctx, "move_cell", editor(ctx).move(cell_id, after_cell_id, position))


async def _current(ctx: ToolContext, cell_id: str) -> dict[str, Any] | None:
    async with notebook_of(ctx).host.open() as cells:
        return cells.cell(find(cells, cell_id))


async def _edit_preview(ctx: ToolContext, arguments: dict[str, Any]) -> dict[str, Any] | None:
    cell_id = str(arguments.get("cell_id"))
    cell = await _current(ctx, cell_id)
    before = str((cell or {}).get("source", ""))
    after = str(arguments.get("source", "")) if "source" in arguments else ""
    known = str(arguments.get("source_hash") or "").strip()
    stale = source_hash(before) != (known or notebook_of(ctx).seen.get(cell_id))
    diff = shown(unified_diff(before, after, cell_id))
    preview = {"kind": "diff", "cellId": cell_id, "text": diff}
    return preview | ({"stale": True} if stale else {})


async def cell_binding(ctx: ToolContext, arguments: dict[str, Any]) -> str | None:
    """The whole source of the cell a call acts on, as it is now (``None``: no such cell)."""
    try:
        cell = await _current(ctx, str(arguments.get("cell_id")))
    except (NotebookError, ToolError):
        return None
    if cell is None:
        return None
    source = cell.get("source")
    return "".join(source) if isinstance(source, list) else str(source or "")


async def _insert_preview(ctx: ToolContext, arguments: dict[str, Any]) -> dict[str, Any] | None:
    diff = unified_diff("", str(arguments.get("source", "")), "new")
    return {"kind": "diff", "text": shown(diff)}


def notebook_tools() -> list[Tool]:
    """The tools that read and change the run's notebook (``run_cell`` included)."""
    return [
        read_notebook,
        dataclasses.replace(insert_cell, preview=_insert_preview, also_does=_runs),
        # An edit or a delete carries the hash of the source it acts on and is refused when the
        # cell changed, which binds it to what its prompt showed; asking again first would only
        # add a prompt before that refusal. A move does not depend on the source.
        dataclasses.replace(edit_cell, preview=_edit_preview, also_does=_runs),
        dataclasses.replace(delete_cell, preview=_edit_preview),
        move_cell,
        dataclasses.replace(run_cell, preview=run_preview, binding=cell_binding),
    ]
