"""The notebook tools: read the run's notebook, and insert, edit, delete and move its cells.

Cells are addressed by id, never by position. ``edit_cell`` and ``delete_cell`` carry the hash of
the source the agent read and are refused when the cell changed since (the message holds the
current source and its hash, so the model can retry). Each applied change is published as a
``TOOL_EVENT`` of category ``notebook_edit`` with a unified diff, and kept in the store so it can
be reverted. ``run_cell`` is in :mod:`.notebook_run`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import Annotated, Any, Literal

from pydantic import Field

from ..events import EventType, ToolSideData
from .notebook_call import CellId, notebook_of
from .notebook_doc import (
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
from .registry import Tool, ToolContext, tool
from .values import ToolError

EDIT_CATEGORY = "notebook_edit"
"""The ``TOOL_EVENT`` category of an applied edit."""
Position = Literal["top", "end"]

Hash = Annotated[str, Field(description="the cell's hash, as read_notebook last showed it")]
After = Annotated[
    str | None, Field(description="put it after the cell with this id (instead of position)")
]
Where = Annotated[Position, Field(description="top or end, when after_cell_id is not given")]


def editor(ctx: ToolContext) -> NotebookEditor:
    """The editor of the run's notebook for this call."""
    notebook = notebook_of(ctx)
    origin = EditOrigin(ctx.request_id, ctx.tool_call_id, notebook.prompt)
    return NotebookEditor(notebook.host, origin)


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
    return f"{edit.kind} of cell {edit.cell_id} applied{new_hash}{where}."


async def _attempt(ctx: ToolContext, name: str, change: Awaitable[NotebookEdit]) -> str:
    try:
        edit: NotebookEdit = await change
    except NotebookError as exc:
        raise ToolError(str(exc)) from exc
    return publish(ctx, name, edit)


@tool(readonly=True, host="notebook")
async def read_notebook(
    ctx: ToolContext,
    cell_id: Annotated[str | None, Field(description="read only this cell")] = None,
    start: Annotated[int | None, Field(description="first cell to read (1-based)", ge=1)] = None,
    end: Annotated[int | None, Field(description="last cell to read (1-based)", ge=1)] = None,
) -> str:
    """Read the user's notebook: each cell's id, type, hash, source and outputs.

    Use it before changing cells: edit_cell and delete_cell need the id and the hash shown
    here. Outputs are summarised (text cut, images referenced).
    """
    notebook = notebook_of(ctx)
    ctx.report(f"Reading {notebook.host.path}")
    try:
        async with notebook.host.open() as cells:
            return read_cells(cells, notebook.host.path, cell_id, start, end)
    except NotebookError as exc:
        raise ToolError(str(exc)) from exc


@tool(host="notebook")
async def insert_cell(
    ctx: ToolContext,
    source: Annotated[str, Field(description="the new cell's source")],
    cell_type: Annotated[CellType, Field(description="code or markdown")] = "code",
    after_cell_id: After = None,
    position: Where = "end",
) -> str:
    """Add a cell to the user's notebook (after a cell, or at the top or the end).

    The answer gives the new cell's id; run it with run_cell.
    """
    ctx.report("Inserting a cell")
    return await _attempt(
        ctx, "insert_cell", editor(ctx).insert(source, cell_type, after_cell_id, position)
    )


@tool(host="notebook")
async def edit_cell(
    ctx: ToolContext,
    cell_id: CellId,
    source: Annotated[str, Field(description="the cell's whole new source")],
    source_hash: Hash,
) -> str:
    """Replace a cell's source with ``source``.

    Refused when the cell changed since you read it: read it again and retry with its new hash.
    """
    ctx.report(f"Editing cell {cell_id}")
    return await _attempt(ctx, "edit_cell", editor(ctx).edit(cell_id, source, source_hash))


@tool(host="notebook")
async def delete_cell(ctx: ToolContext, cell_id: CellId, source_hash: Hash) -> str:
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
    stale = source_hash(before) != str(arguments.get("source_hash", "")).strip()
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
    from .notebook_run import run_cell, run_preview

    return [
        read_notebook,
        dataclasses.replace(insert_cell, preview=_insert_preview),
        # An edit or a delete carries the hash of the source it acts on and is refused when the
        # cell changed, which binds it to what its prompt showed; asking again first would only
        # add a prompt before that refusal. A move does not depend on the source.
        dataclasses.replace(edit_cell, preview=_edit_preview),
        dataclasses.replace(delete_cell, preview=_edit_preview),
        move_cell,
        dataclasses.replace(run_cell, preview=run_preview, binding=cell_binding),
    ]
