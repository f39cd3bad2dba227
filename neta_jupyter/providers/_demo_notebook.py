"""The demo model in a notebook: it adds a cell and runs it in one call, and edits without hashes.

The map of the notebook is in its context, so adding a cell needs no read first. Asked to comment
a cell, it reads the cell and edits it without copying a hash; when the edit is refused because
the user changed the cell, it redoes it on the source the refusal shows.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

from ._demo_reading import _Call, _Done, _Turn, _without_pictures

_NOTEBOOK = re.compile(
    r"\b(?:add|insert|write|put|create|make)\b(?:\W+\w+){0,4}?\W+cells?\b"
    r"|\b(?:in|to|into) (?:the|my|this) notebook\b",
    re.I,
)
_INSERTED = re.compile(r"insert of cell (\S+) applied")
_RAN = "It ran; its output:\n"
"""Where an insert that ran its cell says what the cell printed."""
_UUID = re.compile(r"\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)


def short(cell_id: object) -> str:
    """A cell's id as people read it: a notebook's UUIDs by their first eight characters."""
    return _UUID.sub(r"\1", str(cell_id))


_HELLO = 'print("hello from a cell the demo model wrote")'


def wants_cells(turn: _Turn) -> bool:
    """Whether the prompt asks for work in the notebook, and the notebook tools are there."""
    return "insert_cell" in turn.offered and bool(_NOTEBOOK.search(turn.plain))


def notebook_calls(turn: _Turn, python: _Call | None) -> Iterator[_Call]:
    """Add a cell with the code ``python`` would run at the end, and run it in the same call."""
    code = str(python.args["code"]) if python is not None else _HELLO
    yield _Call(
        "insert_cell",
        {"source": code, "position": "end", "run": True},
        "add a cell with the code at the end and run it",
    )


def _code(text: str) -> list[str]:
    return ["", "```python", text, "```", ""]


def refusal(done: _Done) -> list[str]:
    """What the answer says of an edit refused because the cell changed (empty: not one)."""
    if not refused(done):
        return []
    cell = done.args.get("cell_id")
    return [
        f"- My first change of cell `{short(cell)}` was refused: the cell changed after I read it "
        "(you edited it), so I read it again and made the change on top of your version."
    ]


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
            added = [f"- I added cell {cell} to the notebook:", "", "```python", code, "```", ""]
            _, ran, printed = done.output.partition(_RAN)
            return [*added, *_ran(dataclasses.replace(done, output=printed))] if ran else added
        case "edit_cell":
            code, cell = str(done.args.get("source", "")), short(done.args.get("cell_id"))
            return [f"- I put the comment on cell `{cell}`:", *_code(code)]
        case "run_cell":
            return _ran(done)
    return None


def _ran(done: _Done) -> list[str]:
    """What running the cell gave: its printed output, and the figures it drew (in the cell)."""
    printed, drawn = _without_pictures(done.output)
    printed, figures = printed.strip(), "a figure" if drawn == 1 else f"{drawn} figures"
    if not printed:
        said = f"it drew {figures}" if drawn else "it printed nothing"
        return [f"- I ran it; {said}, now in the notebook under the cell."]
    out = ["- I ran it; its output, now in the notebook too:", "", "```text", printed, "```", ""]
    return [*out, f"- It drew {figures} too, under the cell."] if drawn else out


# --- commenting a cell: an edit that is refused when the cell changed since it was read --------

_COMMENT = re.compile(r"\b(?:comment|annotate)\b(?:\W+\w+){0,3}?\W+cell\b", re.I)
_CELL_HEAD = re.compile(r"^--- cell \d+ of \d+ · id (\S+) · (\w+) · hash (\w+)")
_REFUSED = re.compile(r"\bcell changed since you read it\b")


def wants_comment(turn: _Turn) -> bool:
    """Whether the prompt asks to comment a cell, and the notebook can be edited."""
    return "edit_cell" in turn.offered and bool(_COMMENT.search(turn.plain))


def _code_cells(read: str) -> list[tuple[str, str, str]]:
    """(id, hash, source) of each code cell in a read_notebook result."""
    cells: list[tuple[str, str, str]] = []
    head: re.Match[str] | None = None
    lines: list[str] = []
    for line in [*read.splitlines(), "--- end"]:
        if not line.startswith("--- "):
            lines += [line] if head else []
            continue
        if head:
            cells.append((head[1], head[3], "\n".join(lines)))
        found = _CELL_HEAD.match(line)
        head, lines = (found if found and found[2] == "code" else None), []
    return cells


def _note(prompt: str) -> str:
    _, colon, text = prompt.partition(":")
    return "# " + (text.strip() if colon and text.strip() else "reviewed by the demo model")


def refused(done: _Done) -> bool:
    """Whether the call was an edit refused because the cell changed after it was read."""
    return done.name == "edit_cell" and bool(_REFUSED.search(done.output))


def comment_calls(turn: _Turn) -> Iterator[_Call]:
    """Read the notebook and put a comment on top of its last code cell (not a magic).

    When that edit is refused because the cell changed since the read, put the comment on top of
    the source the refusal shows.
    """
    yield _Call("read_notebook", {}, "read the notebook to find its last code cell")
    reads = turn.results("read_notebook")
    cells = _code_cells(reads[0].output) if reads else []
    ours = [c for c in cells if not c[2].startswith(("%", "(empty)"))]
    if not ours:
        return
    cell_id, _, source = ours[-1]
    note = _note(turn.prompt)
    edit = {"cell_id": cell_id, "source": f"{note}\n{source}"}
    yield _Call("edit_cell", edit, f"put a comment on top of cell `{short(cell_id)}`")
    refusals = [d for d in turn.done if refused(d)]
    if refusals and (now := _refused_source(refusals[-1].output)) is not None:
        edit = {"cell_id": cell_id, "source": f"{note}\n{now}"}
        purpose = f"put the comment on top of cell `{short(cell_id)}` as it is now"
        yield _Call("edit_cell", edit, purpose)


def _refused_source(output: str) -> str | None:
    """The cell's current source, as a refused edit's result shows it."""
    _, found, rest = output.partition(" and this source:\n")
    source, _, _ = rest.rpartition("\nNothing was changed")
    return source if found and source else None


# --- running a cell the user wrote, in the background when asked ----------------------------

_RUN = re.compile(r"\brun\b(?:\W+\w+){0,3}?\W+cell\b", re.I)
_BACKGROUND = re.compile(r"\bin the background\b", re.I)
_NAMED = re.compile(r"\bcell `?([\w-]+)`?")


def wants_run(turn: _Turn) -> bool:
    """Whether the prompt asks to run a cell of the notebook (not to add one)."""
    return "run_cell" in turn.offered and bool(_RUN.search(turn.plain))


def run_calls(turn: _Turn) -> Iterator[_Call]:
    """Read the notebook and run the cell the prompt names (by id), else its last code cell."""
    yield _Call("read_notebook", {}, "read the notebook to find the cell")
    reads = turn.results("read_notebook")
    cells = [c for c in _code_cells(reads[0].output) if not c[2].startswith("%")] if reads else []
    named = _NAMED.search(turn.plain)
    chosen = [c for c in cells if named and c[0] == named[1]] or cells[-1:]
    if not chosen:
        return
    cell_id = chosen[0][0]
    if _BACKGROUND.search(turn.plain):
        purpose = f"run cell `{short(cell_id)}` in the background and answer once it has finished"
        yield _Call("run_cell", {"cell_id": cell_id, "background": True}, purpose)
    else:
        yield _Call("run_cell", {"cell_id": cell_id}, f"run cell `{short(cell_id)}`")
