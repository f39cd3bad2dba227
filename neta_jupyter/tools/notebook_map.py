"""The map of a run's notebook in its context: each cell's id, type, state and source.

Short cells are shown whole (an edit needs the whole source), longer ones by their first line.
A notebook-bound run is shown it once, as the notebook was when the prompt was sent, so that
"the cell with id fix-me" or "the failing cell" needs no read first; the versions it shows are
the ones the run has seen (its edits are checked against them).
"""

from __future__ import annotations

from typing import Any

from .kernel_tools import strip_ansi
from .notebook_doc import CellList, NotebookError, cell_error, source_hash, source_text
from .registry import RunNotebook

MAX_MAPPED_CELLS = 80
"""Cells the map lists; the rest are counted (read_notebook shows them)."""
FIRST_LINE = 80
"""Characters of a cell's first line the map shows."""
WHOLE_LINES = 4
WHOLE_CHARS = 240
"""A cell of at most so many lines and characters is shown whole."""


def _state(cell: dict[str, Any]) -> str:
    if cell.get("cell_type") != "code":
        return str(cell.get("cell_type", "code"))
    if (error := cell_error(cell)) is not None:
        ename, evalue = error
        return f"code, failed: {ename}: {strip_ansi(evalue)[:FIRST_LINE]}"
    if cell.get("execution_count") is None and not cell.get("outputs"):
        return "code, not run"
    return "code, ran"


def _source(source: str) -> str:
    """A short cell whole (indented below its entry), else its first line and a count."""
    lines = [line for line in source.splitlines() if line.strip()]
    if not lines:
        return " · (empty)"
    if len(lines) == 1 and len(lines[0]) <= FIRST_LINE:
        return f" · {lines[0]}"
    if len(lines) <= WHOLE_LINES and len(source) <= WHOLE_CHARS:
        return ":\n" + "\n".join(f"    {line}" for line in source.rstrip("\n").splitlines())
    first = lines[0] if len(lines[0]) <= FIRST_LINE else lines[0][: FIRST_LINE - 1] + "…"
    return f" · {first}  (+{len(lines) - 1} more lines)" if len(lines) > 1 else f" · {first}"


def notebook_map(cells: CellList, path: str) -> tuple[str, dict[str, str]]:
    """The map as text, and by cell id the hash of each cell's source as it is now."""
    total = len(cells)
    hashes: dict[str, str] = {}
    lines = [f"{path}: {total} cells, in order (id · type · source, or its first line):"]
    for index in range(total):
        cell = cells.cell(index)
        cell_id, source = str(cell.get("id", "")), source_text(cell.get("source"))
        hashes[cell_id] = source_hash(source)
        if index < MAX_MAPPED_CELLS:
            lines.append(f"- {cell_id} · {_state(cell)}{_source(source)}")
    if total > MAX_MAPPED_CELLS:
        lines.append(f"… {total - MAX_MAPPED_CELLS} more cells (read_notebook with start)")
    return "\n".join(lines), hashes


HOW_TO = (
    "To add, change, run or remove cells of this notebook use the notebook tools with these "
    "ids, not python (python runs code without putting it in the notebook): insert_cell adds a "
    "cell (run=true also runs it and gives its output), edit_cell replaces a cell's whole "
    "source, run_cell runs a code cell, delete_cell and move_cell remove or move one, "
    "read_notebook shows cells whole with their outputs. No hashes are needed: an edit of a cell "
    "that changed since you saw it is refused with its current source; then call edit_cell "
    "again with a source written from that one."
)


async def mapped(notebook: RunNotebook) -> str:
    """The map of the run's notebook as it is now; its cells' versions become ones the run saw."""
    try:
        async with notebook.host.open() as cells:
            text, hashes = notebook_map(cells, notebook.host.path)
    except NotebookError as exc:
        return f"(the notebook could not be read: {exc})"
    for cell_id, digest in hashes.items():
        notebook.seen.setdefault(cell_id, digest)
    return f"{text}\n{HOW_TO}"
