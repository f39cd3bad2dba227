"""How a notebook reads to the model: cells with ids, hashes, sources and summarised outputs."""

from __future__ import annotations

from typing import Any

from .kernel_tools import strip_ansi
from .notebook_doc import CellList, NotebookError, find, source_hash, source_text

MAX_CELL_OUTPUT = 2_000
"""Characters of one cell's outputs the model reads; the rest is counted."""
MAX_READ_CHARS = 30_000
"""Characters of one ``read_notebook`` answer; later cells are counted, not shown."""
_IMAGES = ("image/png", "image/jpeg", "image/gif", "image/svg+xml")


def output_lines(cell_id: str, outputs: list[dict[str, Any]]) -> str:
    """A cell's outputs as text: streams and results, images referenced, errors' last lines."""
    parts: list[str] = []
    for number, output in enumerate(outputs, start=1):
        match output.get("output_type"):
            case "stream":
                parts.append(strip_ansi(source_text(output.get("text"))))
            case "error":
                trace = [strip_ansi(line) for line in output.get("traceback") or []]
                parts.append("\n".join(trace[-6:]) + "\n" if trace else "")
                parts.append(f"{output.get('ename')}: {output.get('evalue')}\n")
            case "display_data" | "execute_result":
                data = output.get("data") or {}
                image = next((m for m in _IMAGES if m in data), None)
                if image is not None:
                    parts.append(f"[image: {image}, output {number} of cell {cell_id}]\n")
                elif "text/plain" in data:
                    parts.append(strip_ansi(source_text(data["text/plain"])).rstrip("\n") + "\n")
                else:
                    parts.append(f"[display: {', '.join(sorted(data))}]\n")
    text = "".join(parts)
    if len(text) <= MAX_CELL_OUTPUT:
        return text
    return text[:MAX_CELL_OUTPUT] + f"… [outputs truncated: {len(text):,} characters in all]\n"


def cell_text(cell: dict[str, Any], number: int, total: int) -> str:
    """One cell as the model reads it."""
    cell_id = str(cell.get("id", ""))
    source = source_text(cell.get("source"))
    kind = str(cell.get("cell_type", "code"))
    head = f"--- cell {number} of {total} · id {cell_id} · {kind} · hash {source_hash(source)}"
    if kind == "code":
        count = cell.get("execution_count")
        head += f" · run {count}" if count is not None else " · not run"
    lines = [head, source if source else "(empty)"]
    outputs = cell.get("outputs") or []
    if outputs:
        lines.append(f"--- outputs of {cell_id}:")
        lines.append(output_lines(cell_id, outputs).rstrip("\n"))
    return "\n".join(lines)


def read_cells(
    cells: CellList,
    path: str,
    cell_id: str | None,
    start: int | None,
    end: int | None,
    seen: dict[str, str] | None = None,
) -> str:
    """The notebook (or a range of its cells, or one cell) as text with totals.

    ``seen`` gets the hash of each cell shown whole: the reader has seen that version.
    """
    total = len(cells)
    if cell_id is not None:
        first = find(cells, cell_id)
        chosen = range(first, first + 1)
    else:
        low = max(1, start or 1)
        high = min(total, end or total)
        if start is not None and total and low > total:
            raise NotebookError(f"the notebook has {total} cells; start {start} is past the end")
        chosen = range(low - 1, high)
    shown: list[str] = [f"Notebook {path}: {total} cells."]
    size = 0
    for index in chosen:
        text = cell_text(cells.cell(index), index + 1, total)
        if size + len(text) > MAX_READ_CHARS:
            rest = chosen.stop - index
            shown.append(f"… {rest} more cells not shown (read them with start={index + 1})")
            break
        shown.append(text)
        size += len(text)
        if seen is not None:
            cell = cells.cell(index)
            seen[str(cell.get("id", ""))] = source_hash(source_text(cell.get("source")))
    if not total:
        shown.append("(the notebook has no cells)")
    return "\n".join(shown)
