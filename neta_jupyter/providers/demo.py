"""The offline demo model: a deterministic agent that picks tools by simple rules.

There is no language model behind it. Each call reads the latest user prompt and what was done
since (tool calls and their results), chooses the next tool from keywords in the prompt, and
streams reasoning followed by either one tool call or a markdown answer built from the results.
The same request always yields the same parts.
"""

from __future__ import annotations

import ast
import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .base import ModelRequest, ReasoningPart, StreamPart, TextPart, ToolCallPart, UsagePart

__all__ = ["DemoModel"]

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
_READ_SPAN = re.compile(r"^Only lines? (\d+)(?:-(\d+))?")


@dataclass(frozen=True, slots=True)
class _Done:
    """A tool call made this turn and what came back."""

    name: str
    args: dict[str, Any]
    output: str

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
        # A failed or denied call counts too: the demo model never retries.
        same = (d for d in self.done if d.name == call.name)
        return any(d.name != "read_file" or d.args == call.args for d in same)


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


class DemoModel:
    """A deterministic, offline model that behaves like a small tool-using agent."""

    def __init__(
        self, pace: float = 0.0, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ) -> None:
        """``pace``: seconds between emitted tokens, so streaming is visible (0 for tests)."""
        if pace < 0:
            raise ValueError("pace must be >= 0")
        self._pace = pace
        self._sleep = sleep

    @property
    def name(self) -> str:
        """Always ``demo``."""
        return "demo"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Yield reasoning, then one tool call or the final answer, then usage."""
        for index, part in enumerate(_reply(request)):
            if index and self._pace > 0:
                await self._sleep(self._pace)
            yield part


def _reply(request: ModelRequest) -> list[StreamPart]:
    turn = _read_turn(request)
    fresh = (c for c in _candidates(turn) if c.name in turn.offered and not turn.tried(c))
    call = next(fresh, None)
    missing = list(dict.fromkeys(c.name for c in _candidates(turn) if c.name not in turn.offered))
    reasoning = _reasoning(turn, call, missing)
    parts: list[StreamPart] = [ReasoningPart(w) for w in _words(reasoning)]
    if call is None:
        body = _answer(turn, missing)
        parts += [TextPart(w) for w in _words(body)]
    else:
        body = json.dumps(call.args)
        call_id = _call_id(request)
        parts.append(ToolCallPart(0, id=call_id, name=call.name))
        parts += [ToolCallPart(0, arguments=f) for f in _fragments(body)]
    produced = len(reasoning) + len(body) + (len(call.name) if call else 0)
    parts.append(UsagePart(max(1, _request_chars(request) // 4), max(1, produced // 4)))
    return parts


# --- reading the request ------------------------------------------------------------------


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
            done.append(_Done(call.name, _loads(call.arguments), reply.content if reply else ""))
    prompt = messages[start].content if start >= 0 else ""
    return _Turn(prompt, tuple(t.name for t in request.tools), tuple(done))


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


# --- choosing the next tool ----------------------------------------------------------------


def _candidates(turn: _Turn) -> Iterator[_Call]:
    """The calls the prompt asks for, in order; later ones may depend on earlier results."""
    plain, files = turn.plain, turn.files
    wants_data = bool(_DATA.search(plain))
    reads_unnamed = not files and not wants_data and not turn.expr and _READING.search(plain)
    if (
        _LISTING.search(plain)
        or reads_unnamed
        or (re.search(r"\bfile\b", plain, re.I) and not files)
        or (re.search(r"\blist\b", plain, re.I) and not wants_data)
    ):
        yield _Call("list_files", {"path": "."}, "list the files in the notebook folder")
    if not files and _READING.search(plain):
        texts = _text_files(turn)
        words = set(re.findall(r"\w+", plain.lower()))  # "README" names README.md
        named = [n for n in texts if n.split(".")[0].lower() in words]
        files = (named or texts)[:1]
    if _SKILL.search(plain):
        # Profiling a data file is a job for the profiling skill, with staged progress.
        for path in [f for f in files if f.lower().endswith((".csv", ".tsv", ".parquet"))][:1]:
            yield _Call(
                "run_skill",
                {"name": "profile_data", "args": {"path": path}},
                f"profile `{path}` with the profile_data skill",
            )
            files = [f for f in files if f != path]
    for path in files:
        yield _Call("read_file", {"path": path}, f"read `{path}` to see what it contains")
    if wants_data:
        yield _Call("list_variables", {}, "list the variables in the kernel")
        # While a cell runs, inspecting would wait for it; the listing taken with the prompt will
        # do, and python (which asks first) queues behind the cell.
        if not _kernel_busy(turn) and (name := _variable_to_inspect(turn)):
            yield _Call("inspect_variable", {"name": name}, f"inspect `{name}` in detail")
    if python := _python_call(turn):
        yield python


def _entries(turn: _Turn) -> list[tuple[str, int | None]]:
    """(name, size in bytes) of every listed entry; directories end with ``/``."""
    entries: list[tuple[str, int | None]] = []
    for done in turn.results("list_files"):
        for raw in done.output.splitlines():
            line = raw.strip().lstrip("-* ")
            if line and not line.startswith(("\u2026", "(", "...", "Files in ")):
                match = _ENTRY.match(line)
                size = int(match["size"].replace(",", "")) if match else None
                entries.append((match["name"].strip() if match else line.split("\t")[0], size))
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


def _variable_to_inspect(turn: _Turn) -> str | None:
    listed, plain = _variables(turn), turn.plain
    words: list[str] = re.findall(r"[A-Za-z_]\w*", plain)
    if named := [w for w in words if w in listed]:
        return named[0]
    if listed:
        return next((n for n, kind in listed.items() if "DataFrame" in kind), None)
    explicit = re.search(r"`([A-Za-z_]\w*)`|\b([A-Za-z_]\w+)\.[A-Za-z_]|\b(df\w*)\b", plain)
    return str(explicit[explicit.lastindex]) if explicit and explicit.lastindex else None


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


def _frame_source(turn: _Turn) -> tuple[str, list[str], _Frame | None] | None:
    """(dataframe variable, code that loads it, what is known of it): from the kernel or a CSV."""
    if inspected := _inspected(turn):
        return inspected.name, [], inspected
    if _DATA.search(turn.plain) and (name := _variable_to_inspect(turn)):
        return name, [], None
    for path in turn.files:
        stem, _, ext = path.rpartition("/")[2].rpartition(".")
        if ext.lower() in ("csv", "tsv"):
            var = re.sub(r"\W", "_", stem).strip("_").lower() + "_df"
            read = [
                _FileRead.of(d.output).body
                for d in turn.results("read_file")
                if d.args.get("path") == path
            ]
            header = re.split(r"[,\t;]", (read[0].splitlines() or [""])[0]) if read else []
            sep = ', sep="\\t"' if ext.lower() == "tsv" else ""
            load = ["import pandas as pd", "", f"{var} = pd.read_csv({json.dumps(path)}{sep})"]
            return var, load, _Frame(var, columns={h.strip(): "" for h in header if h.strip()})
    return None


def _python_call(turn: _Turn) -> _Call | None:
    prompt, source, inspected = turn.prompt, _frame_source(turn), _inspected(turn)
    if expr := turn.expr:
        return _Call("python", {"code": f"print({expr})"}, f"evaluate `{expr}` with Python")
    missing = bool(_MISSING_WORDS.search(prompt))
    unknown_gaps = missing and inspected is not None and not inspected.missing
    if not _COMPUTE.search(turn.plain) and not unknown_gaps:
        return None
    if source is None:
        if turn.done:
            return None  # the tools already used answer it better than a toy snippet would
        code = f'prompt = {prompt!r}\nprint("hello from the demo model")\n'
        code += 'print(f"your prompt has {len(prompt.split())} words")'
        return _Call("python", {"code": code}, "run a small Python snippet about the prompt")
    var, load, frame = source
    if _PLOT.search(prompt):
        code = _plot_code(var, load, _plot_column(prompt, frame), missing)
        return _Call("python", {"code": code}, f"plot a column of `{var}` with matplotlib")
    if missing:
        code = "\n".join([*load, f"print({var}.isna().sum())"])
        return _Call("python", {"code": code}, f"count the missing values in `{var}`")
    code = "\n".join([*load, f"print({var}.describe())"])
    return _Call("python", {"code": code}, f"compute summary statistics of `{var}`")


def _plot_column(prompt: str, frame: _Frame | None) -> str | None:
    if frame is None:
        return None
    for column in frame.columns:
        if len(column) > 1 and re.search(rf"\b{re.escape(column)}\b", prompt, re.I):
            return column
    if _MISSING_WORDS.search(prompt) and any(frame.missing.values()):
        return max(frame.missing, key=lambda c: frame.missing[c])
    numeric = [c for c, dtype in frame.columns.items() if re.match(r"(?i)u?int|float", dtype)]
    return numeric[0] if numeric else None


def _plot_code(var: str, load: list[str], column: str | None, missing: bool) -> str:
    if column is not None:
        choose = f"column = {column!r}"
    elif missing:
        choose = f"column = {var}.isna().sum().idxmax()  # the column with the most gaps"
    else:
        choose = f'column = {var}.select_dtypes("number").columns[0]'
    lines = ["import matplotlib.pyplot as plt", *load, "", choose]
    if missing:
        lines.append(f'print({var}[column].isna().sum(), "missing values in", column)')
    lines.append(f'ax = {var}[column].plot(kind="hist", bins=20, title=f"{{column}} in {var}")')
    return "\n".join([*lines, "ax.set_xlabel(column)", "plt.show()"])


# --- writing the reply ----------------------------------------------------------------------

_IDEAS = {
    "read_file": '"load it into a dataframe and describe it"',
    "list_variables": '"which columns of df have missing values?"',
    "inspect_variable": '"plot the column with the most missing values"',
    "python": '"plot a histogram of df", or another calculation',
}
_ABILITIES = {
    "list_files": 'list the files next to your notebook: "what files are here?"',
    "read_file": 'read and summarise a file: "summarise data.csv"',
    "list_variables": 'show the variables in your kernel: "what variables do I have?"',
    "inspect_variable": 'inspect a dataframe: "which columns of df have missing values?"',
    "python": 'run Python in your kernel, with your permission: "what is 17*23?"',
}
_DIRECT_ANSWER = """### Hello from the demo model

You asked: {prompt}. I am the offline demo model of neta_jupyter: I run without a network \
connection and without a language model, so I pick tools by simple rules and answer from what \
they return. Your message did not match any of those rules, so instead of guessing, here is \
what I can do in this run:

{abilities}

For open-ended questions, switch to a real model: any OpenAI-compatible endpoint (OpenAI, \
vLLM, Ollama, LM Studio) or Anthropic's API. Until then, try one of the examples above.
"""


def _quote(prompt: str) -> str:
    text = " ".join(prompt.split())
    return f'"{text[:77]}\u2026"' if len(text) > 80 else f'"{text}"'


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def _goal(turn: _Turn) -> str:
    plain, files, expr = turn.plain, turn.files, turn.expr
    goals = [
        "to see which files are in the notebook folder" if _LISTING.search(plain) else "",
        "to know what is in " + ", ".join(f"`{f}`" for f in files) if files else "",
        "a summary of a file" if not files and _READING.search(plain) else "",
        "to understand the data in the kernel" if _DATA.search(plain) else "",
        f"the value of `{expr}`" if expr else "a plot" if _PLOT.search(plain) else "",
        "a computation" if not expr and _COMPUTE.search(plain) and not _PLOT.search(plain) else "",
    ]
    return " and ".join(filter(None, goals)) or "an answer"


def _reasoning(turn: _Turn, call: _Call | None, unavailable: list[str]) -> str:
    text = f"The user wants {_goal(turn)} (they asked: {_quote(turn.prompt)})."
    steps = ", then ".join(f"`{d.name}`" for d in turn.done)
    text += f" So far I have used {steps}." if steps else ""
    for done in (d for d in turn.done if d.failed):
        text += f" The `{done.name}` call did not go through, so I won't retry it."
    if _kernel_busy(turn):
        text += " A cell is still running in your kernel, so I use the variables"
        text += " from when you asked."
    if call is not None:
        lead = " Next I'll " if turn.done else " I'll first "
        return text + lead + call.purpose + ", then answer from what I find."
    for name in unavailable:
        text += f" I would use `{name}`, but it is not offered in this run, so I'll say so."
    if turn.done or unavailable:
        return text + " That is all I can do here, so I'll write up the answer now."
    return text + " No tool fits this request, so I'll answer directly and explain what I can do."


def _answer(turn: _Turn, unavailable: list[str]) -> str:
    if not turn.done and not unavailable:
        abilities = [f"- {_ABILITIES[n]} (`{n}`)" for n in turn.offered if n in _ABILITIES]
        abilities = abilities or ["- only talk: no tools are enabled in this run."]
        return _DIRECT_ANSWER.format(prompt=_quote(turn.prompt), abilities="\n".join(abilities))
    lines = [_lead(turn), ""]
    for done in turn.done:
        lines += _failure(done) if done.failed else _facts(done)
    for name in unavailable:
        lines.append(f"- I would have used `{name}`, but that tool is not enabled in this run.")
    ok, texts = [d.name for d in turn.done if not d.failed], _text_files(turn)
    ideas = _IDEAS | {"list_files": f'"summarise {texts[0]}"' if texts else '"what is in df?"'}
    if not any(str(d.args.get("path")).endswith("sv") for d in turn.results("read_file")):
        ideas["read_file"] = '"what else is in this folder?"'  # only tables load into a dataframe
    idea = ideas.get(ok[-1] if ok else "", '"what files are here?"')
    text = "\n".join([*lines, "", f"**Next**, you could ask: {idea}."]) + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def _lead(turn: _Turn) -> str:
    expr, runs, prompt = turn.expr, turn.results("python"), _quote(turn.prompt)
    if expr and runs and runs[-1].output.strip():
        value = runs[-1].output.strip().splitlines()[0]
        return f"### {expr} = {value}\n\n`{expr}` works out to **{value}**: Python printed it."
    if all(d.failed for d in turn.done):
        return f"### Not done\n\nI could not fully answer {prompt}; I'd rather say so than guess."
    return f"### What I found\n\nHere is what I found for {prompt}, step by step."


def _failure(done: _Done) -> list[str]:
    lines = done.output.strip().splitlines() or ["no result"]
    reason = (lines[-1] if _TRACEBACK in done.output else lines[0])[:160]
    reason = reason.removeprefix("Error: ").rstrip(".")
    verb = "was denied" if "denied" in reason.lower() else "failed"
    return [f"- The `{done.name}` call {verb} ({reason}), so I did not retry it."]


def _fenced(text: str, language: str = "text", limit: int = 15) -> list[str]:
    lines = [line[:160] for line in text.rstrip().splitlines()]
    more = [f"\u2026 ({_plural(len(lines) - limit, 'more line')})"] if len(lines) > limit else []
    return ["", f"```{language}", *lines[:limit], *more, "```", ""]


def _facts(done: _Done) -> list[str]:
    """Bullet points with what one successful call returned."""
    alone = _Turn("", (), (done,))
    match done.name:
        case "list_files":
            entries = _entries(alone)
            folders = sum(name.endswith("/") for name, _ in entries)
            files = _plural(len(entries) - folders, "file")
            out = [f"- The folder holds {files} and {_plural(folders, 'folder')}:"]
            for name, size in entries[:10]:
                out.append(f"  - `{name}`" + (f", {_plural(size, 'byte')}" if size else ""))
            return out + ([f"  - \u2026and {len(entries) - 10} more"] if len(entries) > 10 else [])
        case "read_file":
            return _read_facts(str(done.args.get("path")), _FileRead.of(done.output))
        case "list_variables":
            found = list(_variables(alone).items())
            listed = ", ".join(f"`{n}` ({kind})" if kind else f"`{n}`" for n, kind in found[:8])
            return [f"- The kernel has {_plural(len(found), 'variable')}: {listed or 'none'}."]
        case "inspect_variable":
            return _inspect_facts(done)
        case "python":
            code = str(done.args.get("code", ""))
            out = ["- I ran this code in your kernel:", *_fenced(code, "python")]
            if not done.output.strip() or _NOTHING_PRINTED.match(done.output):
                return [*out, "- It printed nothing; any figure it drew is shown with the call."]
            return [*out, "- It printed:", *_fenced(done.output)]
        case "run_skill":
            report = done.output.split("\n[process log:")[0].strip().splitlines()
            return ["- The skill reported:", "", *report[:60]]
        case _:
            return [f"- `{done.name}` returned:", *_fenced(done.output, limit=8)]


def _read_facts(path: str, read: _FileRead) -> list[str]:
    """The file's totals, whatever part of it was shown, then its first lines."""
    size = f"{_plural(read.lines, 'line')} ({_plural(read.size, 'byte')})"
    out = [f"- `{path}` has {size}."]
    if read.span is not None:
        first, last = read.span
        out.append(f"- I read lines {first:,} to {last:,} of it; the rest is longer than one read.")
    lines = read.body.splitlines()
    if path.lower().endswith((".csv", ".tsv")) and lines:
        header = ", ".join(f"`{c.strip()}`" for c in re.split(r"[,\t;]", lines[0]))
        out.append(f"- A table of {_plural(read.lines - 1, 'row')}; columns: {header}.")
    return [*out, "", f"The first lines of `{path}`:", *_fenced(read.body, limit=5)]


def _inspect_facts(done: _Done) -> list[str]:
    frame, out = _parse_frame(done), []
    if not frame.columns and frame.shape is None:
        return [f"- Here is what `{frame.name}` looks like:", *_fenced(done.output, limit=8)]
    if frame.shape:
        rows, cols = _plural(frame.shape[0], "row"), _plural(frame.shape[1], "column")
        out.append(f"- `{frame.name}` has {rows} and {cols}.")
    if frame.columns:
        columns = ", ".join(f"`{c}` ({t})" for c, t in frame.columns.items())
        out.append(f"- Columns: {columns}.")
    if gaps := {c: n for c, n in frame.missing.items() if n}:
        listed = ", ".join(f"`{c}` ({n:,})" for c, n in gaps.items())
        out.append(f"- Missing values: {listed}; the worst is `{max(gaps, key=gaps.__getitem__)}`.")
    elif frame.missing:
        out.append("- No column has missing values.")
    return out


# --- streaming helpers ----------------------------------------------------------------------


def _words(text: str) -> list[str]:
    """Word-sized tokens, each keeping its trailing whitespace, that join back to ``text``."""
    return re.findall(r"\S+\s*|\s+", text)


def _fragments(text: str) -> list[str]:
    """Two to four pieces cut at uneven places, as real providers stream argument JSON."""
    count = 2 + len(text) % 3
    cuts = {min(len(text) - 1, max(1, len(text) * k // count + k % 2)) for k in range(1, count)}
    bounds = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def _call_id(request: ModelRequest) -> str:
    # Numbered by the assistant messages so far, skipping ids a compacted history already used.
    used = {c.id for m in request.messages for c in m.tool_calls}
    number = sum(m.role == "assistant" for m in request.messages)
    while f"call_{number}" in used:
        number += 1
    return f"call_{number}"


def _request_chars(request: ModelRequest) -> int:
    total = len(request.system)
    for m in request.messages:
        total += len(m.content) + len(m.reasoning or "")
        total += sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
    for t in request.tools:
        total += len(t.name) + len(t.description) + len(json.dumps(t.parameters, sort_keys=True))
    return total
