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

_FILE_EXTS = "csv|tsv|txt|md|rst|json|jsonl|yaml|yml|toml|ini|cfg|log|py|ipynb|sql|sh|html|xml"
_FILE_EXTS += "|parquet|xlsx|xls|feather|pkl|png|jpe?g|svg|pdf"
_TEXT_EXTS = frozenset(
    [
        "csv",
        "tsv",
        "txt",
        "md",
        "rst",
        "json",
        "jsonl",
        "yaml",
        "yml",
        "toml",
        "ini",
        "cfg",
        "log",
        "py",
        "sql",
        "sh",
    ]
)
_FILE_TOKEN = re.compile(
    rf"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:{_FILE_EXTS}))(?![\w/])"
)
_LISTING = re.compile(r"\b(?:files|folders?|director(?:y|ies)|ls)\b|what(?:'s| is) here", re.I)
_READING = re.compile(r"\b(?:read|summar\w*|look at|open|show|contents?|inside)\b|what'?s in", re.I)
_DATA = re.compile(
    r"\b(?:variables?|dataframes?|df\w*|data|columns?|datasets?)\b|`[A-Za-z_]\w*`"
    r"|\b[A-Za-z_]\w+\.[A-Za-z_]",
    re.I,
)
_COMPUTE = re.compile(
    r"\b(?:compute|calculate|sum|means?|average|median|plot\w*|chart\w*|histogram\w*|counts?"
    r"|how many|correlat\w*|describe|run|execute|python)\b|=",
    re.I,
)
_PLOT = re.compile(r"\b(?:plot\w*|chart\w*|histogram\w*|graph\w*|visuali[sz]\w*)\b", re.I)
_MISSING_WORDS = re.compile(r"\b(?:missing|nans?|nulls?|worst)\b", re.I)
_ARITHMETIC = re.compile(r"[-(]*\d[\d.]*(?:\s*(?:\*\*|[-+*/%^×÷])\s*[-(]*\d[\d.]*\)*)+")
_ARITHMETIC_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Constant,
    ast.operator,
    ast.unaryop,
)
_FAILURE = re.compile(
    r"\b(?:denied|error|failed|refused|not permitted)\b|\w(?:Error|Exception):", re.I
)
_ENTRY = re.compile(r"^(?P<name>.+?)(?:\t|\s{2,}|\s+\()\s*(?P<size>\d[\d,]*)\s*(?:bytes|B)\b", re.I)
_VARIABLE = re.compile(
    r"^[-*\s]*`?(?P<name>[A-Za-z_]\w*)`?\s*(?::|\t|\s{2,}|\s-\s)\s*(?P<kind>.*)$"
)
_DTYPE = (
    r"(?:u?int\d*|U?Int\d+|float\d*|Float\d+|complex\d*|object|bool|boolean|string|category"
    r"|datetime64\S*|timedelta64\S*)"
)
_COLUMN_LINE = re.compile(
    rf"^[-*|\s]*`?(?P<name>[^\s`:|(][^`:|(]*?)`?(?:\s*[:|]\s*|\s*\(|\s+)(?P<dtype>{_DTYPE})\)?"
    r"(?P<rest>[,;\s].*)?$"
)
_INFO_LINE = re.compile(rf"^\d+\s+(?P<name>.+?)\s+(?P<count>\d+)\s+non-null\s+(?P<dtype>{_DTYPE})")
_COUNT_LINE = re.compile(r"^[-*\s]*`?(?P<name>[^\s`:]+)`?\s*[:=]?\s+(?P<count>\d+)\s*$")
_MISSING_COUNT = re.compile(
    r"(\d+)\s*(?:missing|nulls?|nans?|na)\b|(?:missing|nulls?|nans?)\W{0,3}(\d+)", re.I
)
_SHAPE = re.compile(r"\((\d+),\s*(\d+)\)|(\d+)\s*rows?\D{1,12}?(\d+)\s*col", re.I)


@dataclass(frozen=True, slots=True)
class _Done:
    """A tool call made this turn and what came back."""

    name: str
    args: dict[str, Any]
    output: str

    @property
    def failed(self) -> bool:
        first = self.output.strip().splitlines()[0] if self.output.strip() else ""
        return bool(_FAILURE.search(first)) or "Traceback (most recent call last)" in self.output


@dataclass(frozen=True, slots=True)
class _Call:
    """The tool call the demo model decided to make, and why, in the model's own words."""

    name: str
    args: dict[str, Any]
    purpose: str


@dataclass(frozen=True, slots=True)
class _Turn:
    """The latest prompt, the tools on offer and what has been done since the prompt."""

    prompt: str
    offered: tuple[str, ...]
    done: tuple[_Done, ...]

    def results(self, name: str) -> list[_Done]:
        """Successful calls of one tool, oldest first."""
        return [d for d in self.done if d.name == name and not d.failed]

    def tried(self, call: _Call) -> bool:
        """Whether this call (for ``read_file``: on this path) was already made, however it went."""
        return any(
            d.name == call.name and (d.name != "read_file" or d.args == call.args)
            for d in self.done
        )


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
        for index, part in enumerate(reply_parts(request)):
            if index and self._pace > 0:
                await self._sleep(self._pace)
            yield part


def reply_parts(request: ModelRequest) -> list[StreamPart]:
    """Every part of the demo model's reply to ``request``, without pacing."""
    turn = _read_turn(request)
    call = _next_call(turn)
    unavailable = _unavailable(turn)
    parts: list[StreamPart] = [
        ReasoningPart(w) for w in _words(_reasoning(turn, call, unavailable))
    ]
    if call is None:
        parts += [TextPart(w) for w in _words(_answer(turn, unavailable))]
    else:
        call_id = f"call_{sum(m.role == 'assistant' for m in request.messages)}"
        parts.append(ToolCallPart(0, id=call_id, name=call.name))
        parts += [ToolCallPart(0, arguments=f) for f in _fragments(json.dumps(call.args))]
    produced = sum(len(_part_text(p)) for p in parts)
    parts.append(UsagePart(max(1, _request_chars(request) // 4), max(1, produced // 4)))
    return parts


# --- reading the request ------------------------------------------------------------------


def _read_turn(request: ModelRequest) -> _Turn:
    messages = request.messages
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    prompt = messages[start].content if start >= 0 else ""
    replies = [m for m in messages[start + 1 :] if m.role == "tool"]
    done: list[_Done] = []
    for message in messages[start + 1 :]:
        for call in message.tool_calls if message.role == "assistant" else []:
            # Match by call id; a runtime that leaves the id out still names the tool.
            reply = next((r for r in replies if r.tool_call_id == call.id), None)
            reply = reply or next((r for r in replies if r.name == call.name), None)
            if reply is not None:
                replies.remove(reply)
            done.append(_Done(call.name, _loads(call.arguments), reply.content if reply else ""))
    return _Turn(prompt, tuple(t.name for t in request.tools), tuple(done))


def _loads(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _file_names(prompt: str) -> list[str]:
    return list(dict.fromkeys(_FILE_TOKEN.findall(prompt)))


def _without_files(prompt: str) -> str:
    # File names would otherwise look like data words ("data.csv") or attribute access.
    return _FILE_TOKEN.sub(" ", prompt)


def _arithmetic(prompt: str) -> str | None:
    for match in _ARITHMETIC.finditer(_without_files(prompt)):
        raw = match.group().strip().replace("×", "*").replace("÷", "/").replace("^", "**")
        for candidate in (raw, raw.strip("()")):
            try:
                tree = ast.parse(candidate, mode="eval")
            except SyntaxError:
                continue
            if all(isinstance(node, _ARITHMETIC_NODES) for node in ast.walk(tree)):
                return candidate
    return None


# --- choosing the next tool ----------------------------------------------------------------


def _next_call(turn: _Turn) -> _Call | None:
    return next(
        (c for c in _candidates(turn) if c.name in turn.offered and not turn.tried(c)), None
    )


def _unavailable(turn: _Turn) -> list[str]:
    return list(dict.fromkeys(c.name for c in _candidates(turn) if c.name not in turn.offered))


def _candidates(turn: _Turn) -> Iterator[_Call]:
    """The calls the prompt asks for, in order; later ones may depend on earlier results."""
    prompt, plain = turn.prompt, _without_files(turn.prompt)
    files = _file_names(prompt)
    wants_data = bool(_DATA.search(plain))
    if (
        _LISTING.search(plain)
        or (re.search(r"\bfile\b", plain, re.I) and not files)
        or (re.search(r"\blist\b", plain, re.I) and not wants_data)
    ):
        yield _Call("list_files", {"path": "."}, "list the files in the notebook folder")
    if not files and _READING.search(plain):
        listed = [name for name, _ in _entries(turn)]
        files = [n for n in listed if n.rsplit(".", 1)[-1].lower() in _TEXT_EXTS][:1]
    for path in files:
        yield _Call("read_file", {"path": path}, f"read `{path}` to see what it contains")
    if wants_data:
        yield _Call("list_variables", {}, "list the variables in the kernel")
        if name := _variable_to_inspect(turn):
            yield _Call("inspect_variable", {"name": name}, f"inspect `{name}` in detail")
    if python := _python_call(turn):
        yield python


def _entries(turn: _Turn) -> list[tuple[str, int | None]]:
    """(name, size in bytes) of every listed entry; directories end with ``/``."""
    entries: list[tuple[str, int | None]] = []
    for done in turn.results("list_files"):
        for raw in done.output.splitlines():
            line = raw.strip().lstrip("-* ")
            if not line or line.startswith(("…", "(", "...")):
                continue
            match = _ENTRY.match(line)
            size = int(match["size"].replace(",", "")) if match else None
            entries.append((match["name"].strip() if match else line.split("\t")[0], size))
    return entries


def _variables(turn: _Turn) -> dict[str, str]:
    """Variable name → its description (type, shape) from ``list_variables``."""
    found: dict[str, str] = {}
    for done in turn.results("list_variables"):
        for line in done.output.splitlines():
            if match := _VARIABLE.match(line):
                found.setdefault(match["name"], match["kind"].strip())
    return found


def _variable_to_inspect(turn: _Turn) -> str | None:
    listed = _variables(turn)
    words = re.findall(r"[A-Za-z_]\w*", _without_files(turn.prompt))
    if named := [w for w in words if w in listed]:
        return named[0]
    if listed:
        return next((n for n, kind in listed.items() if "DataFrame" in kind), None)
    plain = _without_files(turn.prompt)
    explicit = re.search(r"`([A-Za-z_]\w*)`|\b([A-Za-z_]\w+)\.[A-Za-z_]|\b(df\w*)\b", plain)
    return next((g for g in explicit.groups() if g), None) if explicit else None


def _inspected(turn: _Turn) -> _Frame | None:
    results = turn.results("inspect_variable")
    if not results:
        return None
    return _parse_frame(str(results[-1].args.get("name", "df")), results[-1].output)


def _parse_frame(name: str, output: str) -> _Frame:
    frame = _Frame(name)
    if shape := _SHAPE.search(output):
        rows, cols = (int(g) for g in shape.groups() if g is not None)
        frame.shape = (rows, cols)
    in_missing_section = False
    for raw in output.splitlines():
        line = raw.strip()
        if info := _INFO_LINE.match(line):
            frame.columns[info["name"]] = info["dtype"]
            if frame.shape:
                frame.missing[info["name"]] = frame.shape[0] - int(info["count"])
        elif (column := _COLUMN_LINE.match(line)) and column["name"].strip() != "dtype":
            frame.columns[column["name"].strip()] = column["dtype"]
            if count := _MISSING_COUNT.search(column["rest"] or ""):
                frame.missing[column["name"].strip()] = int(count[1] or count[2])
        elif _MISSING_WORDS.search(line) and not re.search(r"\d", line):
            in_missing_section = True  # a header such as "missing values:" precedes the counts
        elif in_missing_section and (count := _COUNT_LINE.match(line)):
            frame.missing[count["name"]] = int(count["count"])
    return frame


def _frame_source(turn: _Turn) -> tuple[str, str] | None:
    """(dataframe expression, setup code) for Python code: a kernel variable or a CSV file."""
    if inspected := _inspected(turn):
        return inspected.name, ""
    if turn.results("list_variables") or _DATA.search(_without_files(turn.prompt)):
        if name := _variable_to_inspect(turn):
            return name, ""
    for path in _file_names(turn.prompt):
        stem, _, ext = path.rpartition("/")[2].rpartition(".")
        if ext.lower() in ("csv", "tsv"):
            var = re.sub(r"\W", "_", stem).strip("_").lower() + "_df"
            sep = ', sep="\\t"' if ext.lower() == "tsv" else ""
            return var, f"import pandas as pd\n\n{var} = pd.read_csv({json.dumps(path)}{sep})\n"
    return None


def _python_call(turn: _Turn) -> _Call | None:
    if expr := _arithmetic(turn.prompt):
        return _Call("python", {"code": f"print({expr})"}, f"evaluate `{expr}` with Python")
    prompt = turn.prompt
    source, frame = _frame_source(turn), _inspected(turn)
    missing = bool(_MISSING_WORDS.search(prompt))
    if not _COMPUTE.search(_without_files(prompt)) and not (
        missing and frame and not frame.missing
    ):
        return None
    if source is None:
        if turn.done:
            return None  # the tools already used answer it better than a toy snippet would
        code = f'prompt = {prompt!r}\nprint("hello from the demo model")\n'
        code += 'print(f"your prompt has {len(prompt.split())} words")'
        return _Call("python", {"code": code}, "run a small Python snippet about the prompt")
    var, setup = source
    if _PLOT.search(prompt):
        code = setup + _plot_code(var, _plot_column(prompt, frame), missing)
        return _Call("python", {"code": code}, f"plot a column of `{var}` with matplotlib")
    if missing:
        return _Call(
            "python", {"code": f"{setup}print({var}.isna().sum())"}, "count missing values"
        )
    code = f"{setup}print({var}.describe())"
    return _Call("python", {"code": code}, f"compute summary statistics of `{var}`")


def _plot_column(prompt: str, frame: _Frame | None) -> str | None:
    if frame is None:
        return None
    lowered = prompt.lower()
    for column in frame.columns:
        if len(column) > 1 and re.search(rf"\b{re.escape(column.lower())}\b", lowered):
            return column
    if _MISSING_WORDS.search(prompt) and any(frame.missing.values()):
        return max(frame.missing, key=lambda c: frame.missing[c])
    numeric = [c for c, dtype in frame.columns.items() if re.match(r"(?i)u?int|float", dtype)]
    return numeric[0] if numeric else None


def _plot_code(var: str, column: str | None, missing: bool) -> str:
    if column is not None:
        choose = f"column = {column!r}"
    elif missing:
        choose = f"column = {var}.isna().sum().idxmax()  # the column with the most missing values"
    else:
        choose = f'column = {var}.select_dtypes("number").columns[0]'
    lines = ["import matplotlib.pyplot as plt", "", choose]
    if missing:
        lines.append(f'print({var}[column].isna().sum(), "missing values in", column)')
    lines += [
        f'ax = {var}[column].plot(kind="hist", bins=20, title=f"{{column}} in {var}")',
        "ax.set_xlabel(column)",
        "plt.show()",
    ]
    return "\n".join(lines)


# --- writing the reply ----------------------------------------------------------------------


def _quote(prompt: str) -> str:
    text = " ".join(prompt.split())
    return f'"{text[:77]}…"' if len(text) > 80 else f'"{text}"'


def _goal(turn: _Turn) -> str:
    plain, goals = _without_files(turn.prompt), []
    if _LISTING.search(plain):
        goals.append("to see which files are in the notebook folder")
    if files := _file_names(turn.prompt):
        goals.append("to know what is in " + ", ".join(f"`{f}`" for f in files))
    if _DATA.search(plain):
        goals.append("to understand the data in the kernel")
    if expr := _arithmetic(turn.prompt):
        goals.append(f"the value of `{expr}`")
    elif _PLOT.search(plain):
        goals.append("a plot")
    return " and ".join(goals) or "an answer"


def _progress(done: _Done) -> str:
    if done.failed:
        return f"tried `{done.name}`"
    lines = len(done.output.splitlines())
    return {
        "list_files": f"listed the folder ({lines} entries)",
        "read_file": f"read `{done.args.get('path')}` ({lines} lines)",
        "list_variables": f"listed the kernel variables ({lines} lines)",
        "inspect_variable": f"inspected `{done.args.get('name')}`",
    }.get(done.name, f"ran `{done.name}`")


def _reasoning(turn: _Turn, call: _Call | None, unavailable: list[str]) -> str:
    text = f"The user wants {_goal(turn)} (they asked: {_quote(turn.prompt)})."
    if turn.done:
        text += " So far I have " + ", then ".join(_progress(d) for d in turn.done) + "."
    for done in (d for d in turn.done if d.failed):
        text += f" The `{done.name}` call did not go through, so I won't retry it."
    if call is not None:
        lead = " Next I'll " if turn.done else " I'll first "
        return text + lead + call.purpose + ", then answer from what I find."
    if unavailable:
        text += " I would use " + ", ".join(f"`{n}`" for n in unavailable)
        text += ", but it is not offered in this run."
    if turn.done:
        return text + " That is enough to answer, so I'll write it up now."
    return text + " No tool fits this request, so I'll answer directly and explain what I can do."


def _answer(turn: _Turn, unavailable: list[str]) -> str:
    if not turn.done and not unavailable:
        return _direct_answer(turn)
    lines = [f"### {_title(turn)}", "", _lead(turn), ""]
    for done in turn.done:
        lines += _failure(done) if done.failed else _FACTS[done.name](done)
    for name in unavailable:
        lines.append(f"- I would have used `{name}`, but that tool is not enabled in this run.")
    return "\n".join([*lines, "", _suggestion(turn)]) + "\n"


def _title(turn: _Turn) -> str:
    ok = [d.name for d in turn.done if not d.failed]
    if "python" in ok:
        return "Result"
    if "inspect_variable" in ok or "list_variables" in ok:
        return "Your data"
    return (
        f"About `{turn.results('read_file')[0].args.get('path')}`" if "read_file" in ok else "Files"
    )


def _lead(turn: _Turn) -> str:
    expr, runs = _arithmetic(turn.prompt), turn.results("python")
    if expr and runs and runs[-1].output.strip():
        value = runs[-1].output.strip().splitlines()[0]
        return f"`{expr}` works out to **{value}** — that is what Python printed in your kernel."
    return f"Here is what I found for {_quote(turn.prompt)}, step by step:"


def _failure(done: _Done) -> list[str]:
    reason = (done.output.strip().splitlines() or ["no result"])[0][:160]
    verb = "was denied" if "denied" in reason.lower() else "failed"
    return [f"- The `{done.name}` call {verb} ({reason}), so I did not retry it."]


def _fenced(text: str, language: str = "text", limit: int = 15) -> list[str]:
    lines = text.rstrip().splitlines()
    shown = [line[:160] for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"… ({len(lines) - limit} more lines)")
    return ["", f"```{language}", *shown, "```", ""]


def _list_files_facts(done: _Done) -> list[str]:
    entries = _entries(_Turn("", (), (done,)))
    folders = sum(name.endswith("/") for name, _ in entries)
    out = [
        f"- The folder has {len(entries)} entries: {len(entries) - folders} files and {folders} folders."
    ]
    for name, size in entries[:10]:
        out.append(f"- `{name}`" + (f" — {size:,} bytes" if size is not None else ""))
    if len(entries) > 10:
        out.append(f"- …and {len(entries) - 10} more.")
    return out


def _read_file_facts(done: _Done) -> list[str]:
    path, lines = str(done.args.get("path")), done.output.splitlines()
    out = [f"- `{path}` has {len(lines)} lines ({len(done.output):,} characters)."]
    if path.lower().endswith((".csv", ".tsv")) and lines:
        header = [c.strip() for c in re.split(r"[,\t;]", lines[0])]
        out.append(f"- It is a table with {len(header)} columns and {len(lines) - 1} data rows.")
        out.append("- Columns: " + ", ".join(f"`{c}`" for c in header[:12]) + ".")
    return [*out, "", f"The first lines of `{path}`:", *_fenced(done.output, limit=5)]


def _list_variables_facts(done: _Done) -> list[str]:
    found = _variables(_Turn("", (), (done,)))
    if not found:
        return ["- The kernel has no variables yet (or none I could read)."]
    listed = ", ".join(
        f"`{n}` ({kind})" if kind else f"`{n}`" for n, kind in list(found.items())[:8]
    )
    return [f"- The kernel has {len(found)} variables: {listed}."]


def _inspect_facts(done: _Done) -> list[str]:
    frame = _parse_frame(str(done.args.get("name")), done.output)
    if not frame.columns and frame.shape is None:
        return [f"- Here is what `{frame.name}` looks like:", *_fenced(done.output, limit=8)]
    out = []
    if frame.shape:
        out.append(f"- `{frame.name}` has {frame.shape[0]:,} rows and {frame.shape[1]} columns.")
    if frame.columns:
        out.append(
            "- Columns: " + ", ".join(f"`{c}` ({t})" for c, t in frame.columns.items()) + "."
        )
    if gaps := {c: n for c, n in frame.missing.items() if n}:
        worst = max(gaps, key=lambda c: gaps[c])
        listed = ", ".join(f"`{c}` ({n:,})" for c, n in gaps.items())
        out.append(f"- Missing values: {listed}; the worst is `{worst}`.")
    elif frame.missing:
        out.append("- No column has missing values.")
    return out


def _python_facts(done: _Done) -> list[str]:
    out = ["- I ran this code in your kernel:", *_fenced(str(done.args.get("code", "")), "python")]
    if not done.output.strip():
        return [*out, "- It printed nothing; any figure it drew is shown with the tool call above."]
    return [*out, "- It printed:", *_fenced(done.output)]


_FACTS: dict[str, Callable[[_Done], list[str]]] = {
    "list_files": _list_files_facts,
    "read_file": _read_file_facts,
    "list_variables": _list_variables_facts,
    "inspect_variable": _inspect_facts,
    "python": _python_facts,
}


def _suggestion(turn: _Turn) -> str:
    ok = [d for d in turn.done if not d.failed]
    last = ok[-1].name if ok else ""
    texts = _text_files(turn)
    ideas = {
        "list_files": f'"summarise {texts[0]}"' if texts else '"what variables do I have?"',
        "read_file": '"load it into a dataframe and describe it"',
        "list_variables": '"which columns of df have missing values?"',
        "inspect_variable": '"plot the column with the most missing values"',
        "python": '"plot a histogram of df" or another calculation',
    }
    idea = ideas.get(last, '"what files are here?"')
    return f"**Next**, you could ask: {idea}."


def _text_files(turn: _Turn) -> list[str]:
    return [n for n, _ in _entries(turn) if n.rsplit(".", 1)[-1].lower() in _TEXT_EXTS]


_ABILITIES = {
    "list_files": 'list the files next to your notebook, e.g. "what files are here?"',
    "read_file": 'read and summarise a file, e.g. "summarise data.csv"',
    "list_variables": 'show the variables in your kernel, e.g. "what variables do I have?"',
    "inspect_variable": 'inspect a dataframe, e.g. "which columns of df have missing values?"',
    "python": 'run Python in your kernel with your permission, e.g. "what is 17*23?"',
}


def _direct_answer(turn: _Turn) -> str:
    lines = [
        "### Hello from the demo model",
        "",
        f"You asked: {_quote(turn.prompt)}. I am the offline demo model of neta_jupyter: I run "
        "without a network connection and without a language model, so I pick tools by simple "
        "rules and answer from what they return. Your message did not match any of those rules, "
        "so instead of guessing, here is what I can do in this run:",
        "",
    ]
    abilities = [f"- {_ABILITIES[n]} (`{n}`)" for n in turn.offered if n in _ABILITIES]
    lines += abilities or ["- nothing with tools: none are enabled, so I can only talk."]
    lines += [
        "",
        "For open-ended questions, switch to a real model: any OpenAI-compatible endpoint "
        "(OpenAI, vLLM, Ollama, LM Studio) or Anthropic's API.",
    ]
    return "\n".join(lines) + "\n"


# --- streaming helpers ----------------------------------------------------------------------


def _words(text: str) -> list[str]:
    """Word-sized tokens that concatenate back to ``text`` exactly."""
    return (
        re.findall(r"\s+|\S+\s*", text)
        if text.startswith(tuple(" \n\t"))
        else re.findall(r"\S+\s*", text)
    )


def _fragments(text: str) -> list[str]:
    """Split argument JSON into two to four pieces at uneven places, as real providers stream it."""
    count = min(len(text), 2 + len(text) % 3)
    if count < 2:
        return [text]
    cuts = {
        min(len(text) - 1, max(1, len(text) * k // count + (len(text) + k) % 3 - 1))
        for k in range(1, count)
    }
    bounds = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def _part_text(part: StreamPart) -> str:
    match part:
        case TextPart(text=text) | ReasoningPart(text=text):
            return text
        case ToolCallPart(name=name, arguments=arguments):
            return (name or "") + arguments
        case _:
            return ""


def _request_chars(request: ModelRequest) -> int:
    total = len(request.system)
    for m in request.messages:
        total += len(m.content) + len(m.reasoning or "")
        total += sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
    for t in request.tools:
        total += len(t.name) + len(t.description) + len(json.dumps(t.parameters, sort_keys=True))
    return total
