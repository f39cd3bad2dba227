"""The changes the notebook tools make, each checked, recorded and revertible.

Every change opens the notebook once: the check (the cell is as the agent read it) and the
change happen in the same opening, so nothing the user types in between can be overwritten.
The check is against the hash the caller names, or else against the version of the cell the run
last saw (``seen``), which every read, refusal and change keeps current.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .notebook_doc import (
    CellChanged,
    CellList,
    CellType,
    EditKind,
    NotebookEdit,
    NotebookError,
    NotebookHost,
    NotSeen,
    Unchanged,
    cell_error,
    find,
    new_cell,
    new_edit_id,
    source_hash,
    unified_diff,
)


@dataclass(frozen=True, slots=True)
class EditOrigin:
    """Who makes an edit: the run and the call, and the provenance its cells carry."""

    request_id: str
    tool_call_id: str
    prompt: str = ""

    def provenance(self) -> dict[str, Any]:
        """``metadata.neta`` of a cell this call wrote."""
        first = self.prompt.strip().splitlines()[0] if self.prompt.strip() else ""
        return {"requestId": self.request_id, "toolCallId": self.tool_call_id, "prompt": first}


def _check(cells: CellList, cell_id: str, expected: str | None) -> tuple[int, str]:
    """The cell's index and source, refused when its source no longer has the ``expected`` hash."""
    index = find(cells, cell_id)
    source = str(cells.cell(index).get("source", ""))
    if expected is not None and source_hash(source) != expected.strip():
        raise CellChanged(cell_id, source)
    return index, source


def _position(cells: CellList, after: str | None, where: str) -> int:
    if after is not None:
        return find(cells, after) + 1
    if where == "top":
        return 0
    if where == "end":
        return len(cells)
    raise NotebookError("say where the cell goes: after_cell_id, or position 'top' or 'end'")


def _checked_seen(
    cells: CellList, cell_id: str, expected: str | None, seen: dict[str, str]
) -> tuple[int, str]:
    """The cell's index and source, if it is as ``expected`` or, without a hash, as last seen.

    A refusal shows the cell's current source, so that version counts as seen from then on.
    """
    index = find(cells, cell_id)
    source = str(cells.cell(index).get("source", ""))
    now = source_hash(source)
    if expected is not None and expected.strip():
        if now != expected.strip():
            seen[cell_id] = now
            raise CellChanged(cell_id, source)
    elif (last := seen.get(cell_id)) != now:
        seen[cell_id] = now
        raise NotSeen(cell_id, source) if last is None else CellChanged(cell_id, source)
    return index, source


class NotebookEditor:
    """Applies the tools' changes to one notebook and keeps a record of each."""

    def __init__(
        self, host: NotebookHost, origin: EditOrigin, seen: dict[str, str] | None = None
    ) -> None:
        self.host = host
        self.origin = origin
        self.seen: dict[str, str] = {} if seen is None else seen
        """By cell id, the hash of the version the run last saw (kept current here)."""

    def _edit(
        self, kind: EditKind, cell_id: str, before: str | None, after: str | None
    ) -> NotebookEdit:
        return NotebookEdit(
            edit_id=new_edit_id(),
            request_id=self.origin.request_id,
            tool_call_id=self.origin.tool_call_id,
            path=self.host.path,
            cell_id=cell_id,
            kind=kind,
            diff=unified_diff(before or "", after or "", cell_id),
            before_hash=None if before is None else source_hash(before),
            after_hash=None if after is None else source_hash(after),
            before=before,
            after=after,
            via=self.host.via,
            note=self.host.note,
        )

    async def insert(
        self, source: str, cell_type: CellType, after: str | None, where: str
    ) -> NotebookEdit:
        """A new cell after the cell ``after`` (or at the top or end)."""
        cell = new_cell(cell_type, source, {"neta": self.origin.provenance()})
        async with self.host.open() as cells:
            index = _position(cells, after, where)
            cells.insert(index, cell)
        edit = self._edit("insert", cell["id"], None, source)
        edit.cell, edit.index_after, edit.cell_type = cell, index, cell_type
        self.seen[cell["id"]] = source_hash(source)
        await self.host.record(edit)
        return edit

    async def edit(self, cell_id: str, source: str, expected: str | None) -> NotebookEdit:
        """Replace the cell's source, if it still has the source the agent read."""
        async with self.host.open() as cells:
            index, before = _checked_seen(cells, cell_id, expected, self.seen)
            if source == before:
                cell = cells.cell(index)
                mine = _written_by(cell) == self.origin.request_id
                error = cell_error(cell)
                failed = f"{error[0]}: {error[1]}" if error else None
                raise Unchanged(cell_id, failed, written_by_run=mine)
            cells.set_source(index, source)
            cells.set_metadata(index, "neta", self.origin.provenance())
            kind = str(cells.cell(index).get("cell_type", "code"))
        self.seen[cell_id] = source_hash(source)
        edit = self._edit("edit", cell_id, before, source)
        edit.cell_type = kind
        edit.index_before = edit.index_after = index
        await self.host.record(edit)
        return edit

    async def delete(self, cell_id: str, expected: str | None) -> NotebookEdit:
        """Remove the cell, if it still has the source the agent read."""
        async with self.host.open() as cells:
            index, before = _checked_seen(cells, cell_id, expected, self.seen)
            cell = cells.cell(index)
            cells.delete(index)
        self.seen.pop(cell_id, None)
        edit = self._edit("delete", cell_id, before, None)
        edit.cell, edit.index_before = cell, index
        await self.host.record(edit)
        return edit

    async def move(self, cell_id: str, after: str | None, where: str) -> NotebookEdit:
        """Move the cell after the cell ``after`` (or to the top or end)."""
        if after == cell_id:
            raise NotebookError("a cell cannot move after itself")
        async with self.host.open() as cells:
            index, source = _check(cells, cell_id, None)
            cell = cells.cell(index)
            cells.delete(index)
            target = _position(cells, after, where)
            cells.insert(target, cell)
        edit = self._edit("move", cell_id, source, source)
        edit.diff = f"moved cell {cell_id} from position {index + 1} to {target + 1}\n"
        edit.index_before, edit.index_after = index, target
        await self.host.record(edit)
        return edit


def _written_by(cell: dict[str, Any]) -> str | None:
    """The run whose edit the cell holds (its provenance), if any."""
    neta = (cell.get("metadata") or {}).get("neta")
    return str(neta.get("requestId")) if isinstance(neta, dict) else None


async def revert(host: NotebookHost, edit: NotebookEdit) -> NotebookEdit:
    """Undo ``edit``; :class:`CellChanged` when the cell changed after it (nothing is touched)."""
    if edit.reverted:
        raise NotebookError(f"edit {edit.edit_id} was already reverted")
    async with host.open() as cells:
        match edit.kind:
            case "insert" | "edit" | "move":
                try:
                    index, _ = _check(cells, edit.cell_id, edit.after_hash)
                except CellChanged:
                    raise
                except NotebookError:  # the user deleted the cell since
                    raise CellChanged(edit.cell_id, None) from None
                _undo_present(cells, edit, index)
            case "delete":
                if any(cells.cell(i).get("id") == edit.cell_id for i in range(len(cells))):
                    raise NotebookError(f"cell {edit.cell_id} is in the notebook again")
                assert edit.cell is not None
                cells.insert(min(edit.index_before or 0, len(cells)), edit.cell)
    edit.reverted = True
    edit.reverted_at = time.time()
    await host.record(edit)
    return edit


def _undo_present(cells: CellList, edit: NotebookEdit, index: int) -> None:
    """Undo an edit whose cell is still there, at ``index``."""
    match edit.kind:
        case "insert":
            cells.delete(index)
        case "edit":
            cells.set_source(index, edit.before or "")
        case "move":
            cell = cells.cell(index)
            cells.delete(index)
            cells.insert(min(edit.index_before or 0, len(cells)), cell)
