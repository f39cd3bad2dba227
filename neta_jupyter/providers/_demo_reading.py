"""What the demo model reads: the latest prompt, the calls made since and their results.

Tool results are written for people (and models), so they are read leniently: a listing's
entries, a file read's totals, the kernel's variables, a dataframe's shape and columns.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .base import Message, ModelRequest
from .images import describe

_TEXT_EXT = "csv|tsv|txt|md|rst|json|jsonl|yaml|yml|toml|ini|cfg|log|py|sql|sh"
_TEXT_EXTS = frozenset(_TEXT_EXT.split("|"))
_ANY_EXT = _TEXT_EXT + "|ipynb|html|xml|parquet|xlsx|xls|feather|pkl|png|jpe?g|svg|pdf"
_FILE_TOKEN = re.compile(rf"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:{_ANY_EXT}))\b(?!/)")
_LISTING = re.compile(r"\b(?:files|folders?|director(?:y|ies)|ls)\b|what(?:'s| is) here", re.I)
_READING = re.compile(r"\b(?:read|summar\w*|look at|open|show|contents?|inside)\b|what'?s in", re.I)
_DATA = re.compile(
    r"\b(?:variables?|dataframes?|df\w*|data|columns?|datasets?)\b|`[A-Za-z_]\w*`"
    r"|\b[A-Za-z_]\w+\.[A-Za-z_]",  # attribute access such as df.head
    re.I,
)
_COMPUTE = re.compile(
    r"\b(?:compute|calculate|sum|means?|average|median|plot\w*|chart\w*|histogram\w*|counts?"
    r"|how many|correlat\w*|describe|run|execute|python)\b|=",
    re.I,
)
_SKILL = re.compile(r"\b(?:profil\w*|skill)\b", re.I)
_PLOT = re.compile(r"\b(?:plot\w*|chart\w*|histogram\w*|graph\w*|visuali[sz]\w*)\b", re.I)
_MISSING_WORDS = re.compile(r"\b(?:missing|nans?|nulls?|worst)\b", re.I)
_ARITHMETIC = re.compile(r"[-(]*\d[\d.]*(?:\s*(?:\*\*|[-+*/%^\u00d7\u00f7])\s*[-(]*\d[\d.]*\)*)+")
_ARITHMETIC_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator)
_FAILURE = re.compile(r"(?i:^\W*(?:error|failed|not run)\b|\bdenied\b)|^\w*(?:Error|Exception)\b")
_TRACEBACK = "Traceback (most recent call last)"
_BY_ARGUMENTS = ("read_file", "read_notebook", "edit_cell")
"""Tools whose calls count as the same only with the same arguments."""
_ENTRY = re.compile(r"^(?P<name>.+?)(?:\t|\s{2,}|\s+\()\s*(?P<size>\d[\d,]*)\s*(?:bytes|B)\b")
_VARIABLE = re.compile(r"^[-*\s]*`?(?P<name>[A-Za-z_]\w*)`?(?::|\t|\s{2,}|\s-\s)\s*(?P<kind>.*)$")
_DTYPE = (
    r"(?:u?int\d*|U?Int\d+|float\d*|Float\d+|complex\d*|object|bool|boolean|string|str|category"
    r"|datetime64\S*|timedelta64\S*)"
)
_COLUMN_LINE = re.compile(  # "price: float64, 5 missing", "price (float64)", "price  float64"
    rf"^[-*|\s]*`?(?P<name>[^\s`:|(][^`:|(]*?)`?(?:\s*[:|]\s*|\s*\(|\s+)(?P<dtype>{_DTYPE})\)?"
    r"(?P<rest>[,;\s].*)?$"
)
_COUNT_LINE = re.compile(r"^[-*\s]*`?(?P<name>[^\s`:]+)`?\s*[:=]?\s+(?P<count>\d+)\s*$")
_MISSING_COUNT = re.compile(r"(\d+)\s*(?:missing|nulls?|nans?)\b|(?:missing|nulls?|nans?)\W*(\d+)")
_AS_OF_PROMPT = "as of when the prompt ran"
_SHAPE = re.compile(r"\((\d+),\s*(\d+)\)|(\d+)\s*rows?\D{1,12}?(\d+)\s*col", re.I)
# The first line of a read_file result: "Contents of a.txt (2 lines, 49 bytes):", "Only lines
# 1-185 of README.md, which has 353 lines (22,613 bytes) in all. …:", "a.txt is empty (0 bytes)."
_READ_HEADER = re.compile(r"^(?:Contents of |Only lines? \d).*:$|^.+ is empty \(0 bytes\)\.$")
_READ_TOTALS = re.compile(r"([\d,]+) lines?(?: or more)?(?:, | \()([\d,]+) bytes?")
_NOTHING_PRINTED = re.compile(r"^\(the code ran and printed nothing")
_SHOWN_PICTURE = re.compile(r"\s*\[Attached file [^\]\n]*\] \(shown as an image\)")
_READ_SPAN = re.compile(r"^Only lines? (\d+)(?:-(\d+))?")


_PICTURE_LINE = re.compile(r"^\[image: [^\]\n]+\]\n?", re.M)
"""A line of a tool's output that only marks where a picture was (the picture comes apart)."""


def _without_pictures(output: str) -> tuple[str, int]:
    """The output without the lines that mark its pictures, and how many there were."""
    return _PICTURE_LINE.sub("", output), len(_PICTURE_LINE.findall(output))


@dataclass(frozen=True, slots=True)
class _Done:
    """A tool call made this turn and what came back."""

    name: str
    args: dict[str, Any]
    output: str
    pictures: tuple[str, ...] = ()
    """What it shows of each picture the call produced: its name and its size as received."""

    @property
    def failed(self) -> bool:
        first = (self.output.strip().splitlines() or [""])[0]
        return bool(_FAILURE.search(first)) or _TRACEBACK in self.output


@dataclass(frozen=True, slots=True)
class _Call:
    """A tool call the prompt asks for, and its purpose in the model's own words."""

    name: str
    args: dict[str, Any]
    purpose: str


@dataclass(slots=True)
class _Turn:
    """The latest prompt, the tools on offer and what has been done since the prompt."""

    prompt: str
    offered: tuple[str, ...]
    done: tuple[_Done, ...]
    attached: tuple[str, ...] = ()
    """What it shows of each picture attached to the prompt (as :attr:`_Done.pictures`)."""
    plain: str = field(init=False)  # without file names, which read as data words otherwise
    files: list[str] = field(init=False)
    expr: str | None = field(init=False)

    def __post_init__(self) -> None:
        self.plain = _FILE_TOKEN.sub(" ", self.prompt)
        self.files = list(dict.fromkeys(_FILE_TOKEN.findall(self.prompt)))
        self.expr = _arithmetic(self.plain)

    def results(self, name: str) -> list[_Done]:
        return [d for d in self.done if d.name == name and not d.failed]

    def tried(self, call: _Call) -> bool:
        # A failed or denied call counts too: the demo model never retries, except an edit
        # refused because the cell changed, which it redoes on the cell as it is now.
        same = (d for d in self.done if d.name == call.name)
        return any(d.name not in _BY_ARGUMENTS or d.args == call.args for d in same)


@dataclass(frozen=True, slots=True)
class _FileRead:
    """A read_file result: the text shown, and the file's totals (not the shown part's)."""

    body: str
    lines: int
    size: int
    span: tuple[int, int] | None = None
    """(first, last) line shown when only part of the file was."""

    @classmethod
    def of(cls, output: str) -> _FileRead:
        header, _, rest = output.partition("\n")
        if not _READ_HEADER.match(header):
            return cls(output, len(output.splitlines()), len(output.encode()))
        totals = _READ_TOTALS.search(header)
        lines, size = (int(g.replace(",", "")) for g in totals.groups()) if totals else (0, 0)
        span = _READ_SPAN.match(header)
        first = int(span[1]) if span else 0
        return cls(rest, lines, size, (first, int(span[2] or first)) if span else None)


@dataclass(slots=True)
class _Frame:
    """What could be parsed from an ``inspect_variable`` result."""

    name: str
    shape: tuple[int, int] | None = None
    columns: dict[str, str] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)


_INSERTED_CELL = re.compile(r"insert of cell (\S+) applied")


def _read_turn(request: ModelRequest) -> _Turn:
    messages = request.messages
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    replies = [m for m in messages[start + 1 :] if m.role == "tool"]
    done: list[_Done] = []
    for message in messages[start + 1 :]:
        for call in message.tool_calls if message.role == "assistant" else []:
            # Match by call id; a reply without an id is matched by the tool's name.
            reply = next((r for r in replies if r.tool_call_id == call.id), None)
            reply = reply or next((r for r in replies if r.name == call.name), None)
            if reply is not None:
                replies.remove(reply)
            args = _loads(call.arguments)
            # A cell is named by the call's argument, or, inserted, by the call's result.
            inserted = _INSERTED_CELL.match(reply.content) if reply else None
            made_by = (call.id, str(args.get("cell_id", "") or (inserted and inserted[1]) or ""))
            output, pictures = (reply.content, _pictures(reply, made_by)) if reply else ("", ())
            done.append(_Done(call.name, args, output, pictures))
    # A picture it is shown is no file to read: its label is not part of the question.
    prompt = _SHOWN_PICTURE.sub("", messages[start].content) if start >= 0 else ""
    attached = _pictures(messages[start]) if start >= 0 else ()
    return _Turn(prompt, tuple(t.name for t in request.tools), tuple(done), attached)


def _pictures(reply: Message, made_by: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``figure-1.png (640x480 PNG), received as a 640x480 PNG image`` for each picture.

    A file a tool makes is named after its call (and the cell it ran: ``made_by``) to be unique
    in the session; the answer names it as the person knows it.
    """
    shown = []
    for image in reply.images:
        label = image.label or "a picture"
        for prefix in filter(None, made_by):
            label = label.removeprefix(f"{prefix}-")
        shown.append(f"{label}, received as a {describe(image.data, image.media_type)} image")
    return tuple(shown)


def _loads(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _arithmetic(plain: str) -> str | None:
    for match in _ARITHMETIC.finditer(plain):
        raw = match.group().strip().replace("\u00d7", "*").replace("\u00f7", "/")
        for candidate in (raw.replace("^", "**"), raw.replace("^", "**").strip("()")):
            try:
                tree = ast.parse(candidate, mode="eval")
            except SyntaxError:
                continue
            nodes = (n for n in ast.walk(tree) if not isinstance(n, ast.unaryop))
            if all(isinstance(n, _ARITHMETIC_NODES) for n in nodes):
                return candidate
    return None


def _entries(turn: _Turn) -> list[tuple[str, int | None]]:
    """(name, size in bytes) of every listed entry; directories end with ``/``."""
    entries: list[tuple[str, int | None]] = []
    for done in turn.results("list_files"):
        for raw in done.output.splitlines():
            line = raw.strip().lstrip("-* ")
            if line and not line.startswith(("\u2026", "(", "...", "Files in ")):
                match = _ENTRY.match(line)
                size = int(match["size"].replace(",", "")) if match else None
                name = match["name"] if match else re.split(r"\t|\s{2,}", line)[0]
                entries.append((name.strip(), size))
    return entries


def _text_files(turn: _Turn) -> list[str]:
    return [n for n, _ in _entries(turn) if n.rsplit(".", 1)[-1].lower() in _TEXT_EXTS]


def _variables(turn: _Turn) -> dict[str, str]:
    """Variable name → its description (type, shape) from ``list_variables``."""
    found: dict[str, str] = {}
    for done in turn.results("list_variables"):
        for match in filter(None, map(_VARIABLE.match, done.output.splitlines())):
            found.setdefault(match["name"], match["kind"].strip())
    return found


def _kernel_busy(turn: _Turn) -> bool:
    """``list_variables`` answered with the variables as of the prompt: a cell is running."""
    return any(_AS_OF_PROMPT in d.output for d in turn.results("list_variables"))


def _inspected(turn: _Turn) -> _Frame | None:
    results = turn.results("inspect_variable")
    return _parse_frame(results[-1]) if results else None


def _parse_frame(done: _Done) -> _Frame:
    """Read shape, dtypes and missing counts leniently: the output is meant for people."""
    frame = _Frame(str(done.args.get("name", "df")))
    if shape := _SHAPE.search(done.output):
        rows, cols = (int(g) for g in shape.groups() if g is not None)
        frame.shape = (rows, cols)
    in_missing_section = False
    for line in (raw.strip() for raw in done.output.splitlines()):
        if (column := _COLUMN_LINE.match(line)) and column["name"].strip() != "dtype":
            frame.columns[column["name"].strip()] = column["dtype"]
            if count := _MISSING_COUNT.search(column["rest"] or ""):
                frame.missing[column["name"].strip()] = int(count[1] or count[2])
        elif _MISSING_WORDS.search(line) and not re.search(r"\d", line):
            in_missing_section = True  # a header such as "missing values:" precedes the counts
        elif in_missing_section and (count := _COUNT_LINE.match(line)):
            frame.missing[count["name"]] = int(count["count"])
    return frame
