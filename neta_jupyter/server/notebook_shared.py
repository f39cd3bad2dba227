"""The cells of a collaboration room's live ``YNotebook`` (imported only when a room holds one).

pycrdt comes with the collaboration stack (jupyter-collaboration); a server without it has no
rooms, and its notebook tools go through the file (:mod:`.notebooks`) without importing this.
"""

from __future__ import annotations

from typing import Any

from pycrdt import Array, Map, Text

from ..tools.notebook_doc import source_text


def _youtputs(outputs: list[dict[str, Any]]) -> list[Map[Any]]:
    """Outputs as the shared document holds them (a stream's text is shared text)."""
    made = []
    for output in outputs:
        if output.get("output_type") == "stream":
            output = output | {"text": Text(source_text(output.get("text")))}
        made.append(Map(output))
    return made


class SharedCells:
    """:class:`CellList` over a room's live ``YNotebook`` (changes reach every view)."""

    def __init__(self, document: Any) -> None:
        self._doc = document
        self._cells: Array[Any] = document.ycells

    def __len__(self) -> int:
        return len(self._cells)

    def cell(self, index: int) -> dict[str, Any]:
        cell: dict[str, Any] = self._cells[index].to_py()
        cell.pop("execution_state", None)
        cell["source"] = source_text(cell.get("source"))
        count = cell.get("execution_count")
        if isinstance(count, float):  # numbers from the browser arrive as floats
            cell["execution_count"] = int(count)
        return cell

    def insert(self, index: int, cell: dict[str, Any]) -> None:
        self._cells.insert(index, self._doc.create_ycell(cell))

    def delete(self, index: int) -> None:
        del self._cells[index]

    def set_source(self, index: int, source: str) -> None:
        # A text change of the shared source, so the user's typing elsewhere in it survives.
        self._doc.set_cell(index, source=source)

    def set_outputs(self, index: int, outputs: list[dict[str, Any]], count: int | None) -> None:
        ycell = self._cells[index]
        if "outputs" not in ycell:
            ycell["outputs"] = Array()
        # Changed in place: JupyterLab's view of the cell watches this very array, and a new one
        # under the key would never show.
        youtputs = ycell["outputs"]
        youtputs.clear()
        youtputs.extend(_youtputs(outputs))
        ycell["execution_count"] = count

    def set_metadata(self, index: int, key: str, value: Any) -> None:
        self._cells[index]["metadata"][key] = value

    def set_running(self, index: int, running: bool) -> None:
        self._cells[index]["execution_state"] = "running" if running else "idle"
