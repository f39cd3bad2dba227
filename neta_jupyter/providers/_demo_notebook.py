"""The demo model in a notebook: asked to add a cell, it reads the notebook, inserts, runs."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ._demo_reading import _Call, _Done, _Turn

_NOTEBOOK = re.compile(
    r"\b(?:add|insert|write|put|create|make)\b(?:\W+\w+){0,4}?\W+cells?\b"
    r"|\b(?:in|to|into) (?:the|my|this) notebook\b",
    re.I,
)
_INSERTED = re.compile(r"insert of cell (\S+) applied")
_HELLO = 'print("hello from a cell the demo model wrote")'


def wants_cells(turn: _Turn) -> bool:
    """Whether the prompt asks for work in the notebook, and the notebook tools are there."""
    return "insert_cell" in turn.offered and bool(_NOTEBOOK.search(turn.plain))


def notebook_calls(turn: _Turn, python: _Call | None) -> Iterator[_Call]:
    """Read the notebook, add a cell with the code ``python`` would run, then run that cell."""
    yield _Call("read_notebook", {}, "read the notebook to see its cells")
    code = str(python.args["code"]) if python is not None else _HELLO
    yield _Call(
        "insert_cell", {"source": code, "position": "end"}, "add a cell with the code at the end"
    )
    inserted = turn.results("insert_cell")
    if inserted and (found := _INSERTED.search(inserted[-1].output)):
        yield _Call("run_cell", {"cell_id": found[1]}, f"run the new cell `{found[1]}`")


def facts(done: _Done) -> list[str] | None:
    """What a notebook tool's result says, for the answer (None: not a notebook tool)."""
    match done.name:
        case "read_notebook":
            head = (done.output.splitlines() or [""])[0]
            return [f"- I read the notebook: {head.removeprefix('Notebook ')}"]
        case "insert_cell":
            found = _INSERTED.search(done.output)
            cell = f"`{found[1]}`" if found else "a new cell"
            code = str(done.args.get("source", ""))
            return [f"- I added cell {cell} to the notebook:", "", "```python", code, "```", ""]
        case "run_cell":
            printed = done.output.strip() or "nothing"
            return [
                "- I ran it; its output, now in the notebook too:",
                "",
                "```text",
                printed,
                "```",
                "",
            ]
    return None
