"""The notebook tasks of the agent evaluation: a small analysis notebook and what to do in it.

Each run is bound to ``analysis.ipynb`` and the kernel that ran its first cell. Checks read the
notebook as saved after the run (cell ids, sources, outputs) and, where the task leaves a
variable, the kernel; the answer's wording counts only where the task is to explain.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from neta_jupyter.server.notebooks import FileCells
from neta_jupyter.tools.notebook_doc import CellList, NotebookEdit, Via, source_text

from .agent_tasks import Outcome, Task, prose, sales_rows, word

PATH = "analysis.ipynb"
LOAD = (
    "import pandas as pd\n"
    "sales = pd.read_csv('sales.csv')\n"
    "sales['revenue'] = sales['units'] * sales['price']\n"
    "print(len(sales), 'orders')"
)
FAILING = "total = sales['revenu'].sum()\nprint(total)"
TRACEBACK = [
    "---------------------------------------------------------------------------",
    "KeyError                                  Traceback (most recent call last)",
    "Cell In[2], line 1\n----> 1 total = sales['revenu'].sum()\n      2 print(total)",
    "KeyError: 'revenu'",
]
KERNEL_SETUP = f"%reset -f\n{LOAD}\nlimit = 100\n"
"""The kernel as the notebook left it: the first cell ran, the second failed."""


def _code(cell_id: str, source: str, outputs: list[dict[str, Any]], count: int | None) -> Any:
    return {
        "id": cell_id,
        "cell_type": "code",
        "source": source,
        "metadata": {},
        "outputs": outputs,
        "execution_count": count,
    }


def _stream(text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": text}


def notebook() -> dict[str, Any]:
    """The task notebook as the user left it."""
    error = {"output_type": "error", "ename": "KeyError", "evalue": "'revenu'"}
    cells = [
        {"id": "intro", "cell_type": "markdown", "metadata": {},
         "source": "# Sales by region\nThe orders of sales.csv, with their revenue."},
        _code("load", LOAD, [_stream("40 orders\n")], 1),
        _code("fix-me", FAILING, [error | {"traceback": TRACEBACK}], 2),
        _code("limits", "limit = 100\nprint(limit)", [_stream("100\n")], 3),
        _code("scratch", "# scratch: try things here\nx = 1", [], None),
    ]  # fmt: skip
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


ORIGINAL_IDS = [c["id"] for c in notebook()["cells"]]


class FileNotebook:
    """The task notebook as a server without collaboration rooms reaches it: through the file."""

    def __init__(self, root: Path) -> None:
        self._file = root / PATH
        self.edits: list[NotebookEdit] = []

    @property
    def path(self) -> str:
        """Under the task folder."""
        return PATH

    @property
    def via(self) -> Via:
        """Always the file."""
        return "file"

    @property
    def note(self) -> str:
        """Nothing to explain: there is no room to miss."""
        return ""

    @asynccontextmanager
    async def open(self) -> AsyncIterator[CellList]:
        """The cells, saved after the body when it changed them."""
        content = json.loads(self._file.read_text())
        cells = FileCells(content)
        yield cells
        if cells.changed:
            self._file.write_text(json.dumps(content, indent=1))

    async def record(self, edit: NotebookEdit) -> None:
        """Kept for the run only."""
        self.edits.append(edit)

    def reset(self) -> None:
        """The notebook as the user left it."""
        self._file.write_text(json.dumps(notebook(), indent=1))
        self.edits = []


def _cells(outcome: Outcome) -> list[dict[str, Any]]:
    return list((outcome.notebook or {}).get("cells", []))


def _by_id(outcome: Outcome, cell_id: str) -> dict[str, Any] | None:
    return next((c for c in _cells(outcome) if c.get("id") == cell_id), None)


def _new_cells(outcome: Outcome, kind: str) -> list[dict[str, Any]]:
    return [
        c for c in _cells(outcome) if c.get("id") not in ORIGINAL_IDS and c.get("cell_type") == kind
    ]


def _printed(cell: dict[str, Any]) -> str:
    parts = []
    for output in cell.get("outputs") or []:
        if output.get("output_type") == "stream":
            parts.append(source_text(output.get("text")))
        elif "text/plain" in (output.get("data") or {}):
            parts.append(source_text(output["data"]["text/plain"]))
    return "".join(parts)


def _has_number(text: str, value: float, tolerance: float) -> bool:
    found = re.findall(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    return any(math.isclose(float(f), value, abs_tol=tolerance + 1e-9) for f in found)


def _failed(cell: dict[str, Any]) -> bool:
    return any(o.get("output_type") == "error" for o in cell.get("outputs") or [])


def _same_cells(outcome: Outcome) -> bool:
    """Every cell of the user's notebook is there once, and no other was added."""
    return [c.get("id") for c in _cells(outcome)] == ORIGINAL_IDS


def _user_change(content: dict[str, Any]) -> None:
    cell = next(c for c in content["cells"] if c["id"] == "limits")
    cell["source"] = "limit = 100\nmargin = 5\nprint(limit + margin)"


def notebook_tasks() -> list[Task]:
    """The eight notebook tasks."""
    rows = sales_rows()
    total = sum(u * p for _, _, _, u, p in rows)
    north = sum(u * p for _, r, _, u, p in rows if r == "North")
    mean_units = statistics.fmean(u for _, _, _, u, _ in rows)

    def added_run(outcome: Outcome) -> bool:
        return any(_has_number(_printed(c), mean_units, 0.01) for c in _new_cells(outcome, "code"))

    def fixed(outcome: Outcome) -> bool:
        cell = _by_id(outcome, "fix-me")
        if cell is None or not _same_cells(outcome) or _failed(cell):
            return False
        in_kernel = _has_number(outcome.probe, total, 0.01)
        return _has_number(_printed(cell), total, 0.01) and in_kernel

    def plotted(outcome: Outcome) -> bool:
        return any(
            "image/png" in (o.get("data") or {})
            for c in _new_cells(outcome, "code")
            for o in c.get("outputs") or []
        )

    def stale_edit(outcome: Outcome) -> bool:
        source = source_text((_by_id(outcome, "limits") or {}).get("source"))
        kept = "margin = 5" in source
        return _same_cells(outcome) and kept and bool(re.search(r"limit\s*=\s*200\b", source))

    def deleted(outcome: Outcome) -> bool:
        return [c.get("id") for c in _cells(outcome)] == [i for i in ORIGINAL_IDS if i != "scratch"]

    def summarised(outcome: Outcome) -> bool:
        return word("fix-me")(outcome) and "sales" in prose(outcome).lower()

    def noted(outcome: Outcome) -> bool:
        return any(
            _has_number(source_text(c.get("source")), north, 1.0)
            for c in _new_cells(outcome, "markdown")
        )

    def task(name: str, prompt: str, expected: str, check: Callable[[Outcome], bool]) -> Task:
        return Task(name, prompt, expected, check, notebook=True)

    return [
        task("nb_add_run", "Add a new code cell at the end of this notebook that prints the mean "
             "of the units column of sales, then run that cell.",
             f"a new cell printing {mean_units:g}", added_run),
        Task("nb_fix", "The cell with id fix-me fails with a KeyError. Fix that cell and run it.",
             f"fix-me prints {total:.2f}, no other cell", fixed, notebook=True,
             probe="print(repr(globals().get('total')))"),
        task("nb_explain", "Why does the cell fix-me fail? Explain it from its error.",
             "the column 'revenu'", word("revenu")),
        task("nb_plot", "Add a cell to this notebook that draws a bar chart of the revenue per "
             "region of sales, and run it.", "an image in a new cell", plotted),
        Task("nb_stale_edit", "In the cell with id limits, set limit to 200.",
             "limit = 200 and the user's margin line", stale_edit, notebook=True,
             meanwhile=_user_change),
        task("nb_delete", "Delete the cell with id scratch from this notebook.",
             "scratch gone, the rest kept", deleted),
        task("nb_summary", "Summarise this notebook: what does each cell do, and which cell "
             "fails?", "fix-me and sales named", summarised),
        task("nb_markdown", "Compute the total revenue of the North region and add a markdown "
             "cell at the end of this notebook that states it.",
             f"a markdown cell with {north:.2f}", noted),
    ]  # fmt: skip
