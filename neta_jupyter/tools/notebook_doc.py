"""The run's notebook as the notebook tools see it: cells by id, edits checked by hash, reverts.

The host (``server/notebooks.py``) supplies a :class:`NotebookHost`: a way to open the cells of
one notebook for a moment (the live shared document of the collaboration room, or the file
through the contents API) and to keep edit records. Everything else — finding a cell by id,
refusing a stale edit, the diff, provenance, undoing an edit — is written once here over the
small synchronous :class:`CellList`, so both paths behave the same.

Exceptions (who raises → who catches)::

    CellChanged     raised by Notebook.edit/delete/move/revert when the cell is not as expected,
                    caught by the tools (→ TOOL_FAILED with the current source) and the revert
                    endpoint (→ 409); NotSeen: an edit naming no hash of a cell the run has not
                    seen as it is now
    NotebookError   a cell id that is not there, a bad position; tools → TOOL_FAILED, endpoint → 4xx
"""

from __future__ import annotations

import difflib
import hashlib
import time
import uuid
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

EditKind = Literal["insert", "edit", "delete", "move"]
CellType = Literal["code", "markdown", "raw"]
Via = Literal["shared", "file"]
"""``shared``: the live document of an open collaboration room; ``file``: the .ipynb on disk."""
MAX_SHOWN_DIFF = 24_000
"""Characters of a diff an event carries (events stay under the wire's size limit)."""
MAX_IDS_LISTED = 40
"""Cell ids a "no such cell" message lists."""


class NotebookError(Exception):
    """The notebook cannot do what was asked (no such cell, a bad position)."""


class CellChanged(NotebookError):
    """The cell is not what the caller last saw; ``source`` is what it holds now."""

    def __init__(self, cell_id: str, source: str | None) -> None:
        self.cell_id = cell_id
        self.source = source
        if source is None:
            super().__init__(f"cell changed since you read it: {cell_id} is no longer there")
            return
        super().__init__(
            f"cell changed since you read it: cell {cell_id} now has hash {source_hash(source)} "
            f"and this source:\n{source}"
        )


class Unchanged(NotebookError):
    """An edit whose new source is the cell's source as it is: it would change nothing."""

    def __init__(self, cell_id: str, error: str | None, *, written_by_run: bool) -> None:
        if written_by_run:
            # Told to send a change, a 1.5B model sent its applied edit again and again.
            super().__init__(
                f"cell {cell_id} already holds this source: your edit of it was applied. Do not "
                "send it again: answer the user now."
            )
            return
        failed = f" Its last run failed with {error}." if error else ""
        # Worded as the next reply, as a refused stale edit is (tools/notebook_tools.py).
        super().__init__(
            f"cell {cell_id} already has this source, so nothing was changed.{failed} Your next "
            f"reply must be the edit_cell call with cell_id {cell_id!r} and its whole source with "
            "the change made."
        )


class NotSeen(CellChanged):
    """The caller named no hash and has not seen the cell as it is now."""

    def __init__(self, cell_id: str, source: str) -> None:
        NotebookError.__init__(
            self,
            f"you have not seen cell {cell_id} as it is now: it has hash {source_hash(source)} "
            f"and this source:\n{source}",
        )
        self.cell_id = cell_id
        self.source = source


def source_text(value: Any) -> str:
    """A cell's source (or a stream's text) as one string, as nbformat may split it in lines."""
    return "".join(value) if isinstance(value, list) else str(value or "")


def cell_error(cell: dict[str, Any]) -> tuple[str, str] | None:
    """The name and value of the error the cell's last run raised, if it did."""
    outputs = cell.get("outputs") or []
    error = next((o for o in outputs if o.get("output_type") == "error"), None)
    return None if error is None else (str(error.get("ename")), str(error.get("evalue", "")))


def source_hash(source: str) -> str:
    """The short hash of a cell's source the agent passes back with an edit."""
    return hashlib.sha256(source.encode()).hexdigest()[:10]


def shown(diff: str) -> str:
    """A diff cut for an event, saying how long it was."""
    if len(diff) <= MAX_SHOWN_DIFF:
        return diff
    return diff[:MAX_SHOWN_DIFF] + f"\n… [diff truncated: {len(diff):,} characters in all]\n"


def unified_diff(before: str, after: str, cell_id: str) -> str:
    """The change of one cell's source, as ``diff -u`` shows it."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"cell {cell_id} (before)",
        tofile=f"cell {cell_id} (after)",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


class CellList(Protocol):
    """The cells of one opened notebook; changes made here land when the opening ends."""

    def __len__(self) -> int:
        """Number of cells."""
        ...

    def cell(self, index: int) -> dict[str, Any]:
        """A copy of one cell as nbformat JSON (``source`` as one string, ``id`` present)."""
        ...

    def insert(self, index: int, cell: dict[str, Any]) -> None:
        """Put a new cell at ``index``."""
        ...

    def delete(self, index: int) -> None:
        """Remove the cell at ``index``."""
        ...

    def set_source(self, index: int, source: str) -> None:
        """Replace a cell's source (in the shared document: as a text change, merged)."""
        ...

    def set_outputs(self, index: int, outputs: list[dict[str, Any]], count: int | None) -> None:
        """Replace a code cell's outputs and execution count."""
        ...

    def set_metadata(self, index: int, key: str, value: Any) -> None:
        """Set one key of a cell's metadata."""
        ...

    def set_running(self, index: int, running: bool) -> None:
        """Show the cell as running (``[*]``) or idle, where views show that (the shared one)."""
        ...


@dataclass(slots=True)
class NotebookEdit:
    """One applied edit: what the event says, what the store keeps, what a revert needs."""

    edit_id: str
    request_id: str
    tool_call_id: str
    path: str
    cell_id: str
    kind: EditKind
    diff: str
    before_hash: str | None
    """Of the source before (``None``: the cell did not exist)."""
    after_hash: str | None
    """Of the source after (``None``: the cell was deleted)."""
    before: str | None = None
    after: str | None = None
    cell: dict[str, Any] | None = None
    """The whole cell (an insert or delete: what a revert removes or puts back)."""
    index_before: int | None = None
    index_after: int | None = None
    cell_type: str | None = None
    """Of the cell changed, when it is known (what to do next depends on it)."""
    via: Via = "shared"
    note: str = ""
    """Why the edit went to the file, when it did (for the model and the user)."""
    created: float = field(default_factory=time.time)
    reverted: bool = False
    reverted_at: float | None = None

    def payload(self) -> dict[str, Any]:
        """The ``notebook_edit`` event's payload (camelCase, without the stored cell)."""
        return {
            "editId": self.edit_id,
            "path": self.path,
            "cellId": self.cell_id,
            "kind": self.kind,
            "diff": shown(self.diff),
            "beforeHash": self.before_hash,
            "afterHash": self.after_hash,
            "indexBefore": self.index_before,
            "indexAfter": self.index_after,
            "via": self.via,
            "reverted": self.reverted,
        } | ({"note": self.note} if self.note else {})

    def to_json(self) -> dict[str, Any]:
        """As the store keeps it."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NotebookEdit:
        """Back from the store."""
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


class NotebookHost(Protocol):
    """One notebook, for one run (or one revert), as the host can reach it."""

    @property
    def path(self) -> str:
        """The notebook's path under the server root."""
        ...

    @property
    def via(self) -> Via:
        """Which way the cells are reached now (a room may open or close between calls)."""
        ...

    @property
    def note(self) -> str:
        """Why the cells were last reached through the file ("" when through a room)."""
        ...

    def open(self) -> AbstractAsyncContextManager[CellList]:
        """The cells for a moment; the file is saved, or the shared document updated, after."""
        ...

    async def record(self, edit: NotebookEdit) -> None:
        """Keep an edit (or its reverted state) durably."""
        ...


def find(cells: CellList, cell_id: str) -> int:
    """The index of the cell with ``cell_id``."""
    ids = [str(cells.cell(index).get("id")) for index in range(len(cells))]
    if cell_id in ids:
        return ids.index(cell_id)
    listed = ", ".join(ids[:MAX_IDS_LISTED]) + (" …" if len(ids) > MAX_IDS_LISTED else "")
    raise NotebookError(
        f"no cell with id {cell_id!r} in the notebook; its cell ids are: {listed or 'none'}"
    )


def new_cell(cell_type: CellType, source: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """A fresh nbformat cell with an id of its own."""
    cell: dict[str, Any] = {
        "id": uuid.uuid4().hex[:8],
        "cell_type": cell_type,
        "source": source,
        "metadata": metadata,
    }
    if cell_type == "code":
        cell |= {"outputs": [], "execution_count": None}
    return cell


def new_edit_id() -> str:
    """An id for an edit record."""
    return f"ed_{uuid.uuid4().hex[:16]}"
