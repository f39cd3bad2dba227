"""The offline demo model: a deterministic agent that picks tools by simple rules.

There is no language model behind it. Each call reads the latest user prompt and what was done
since (tool calls and their results), chooses the next tool from keywords in the prompt, and
streams reasoning followed by either one tool call or a markdown answer built from the results.
The same request always yields the same parts.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from . import _demo_delegate, _demo_notebook
from ._demo_answer import _answer, _reasoning
from ._demo_reading import (
    _COMPUTE,
    _DATA,
    _LISTING,
    _MISSING_WORDS,
    _PLOT,
    _READING,
    _SKILL,
    _Call,
    _FileRead,
    _Frame,
    _inspected,
    _kernel_busy,
    _read_turn,
    _text_files,
    _Turn,
    _variables,
)
from .base import ModelRequest, ReasoningPart, StreamPart, TextPart, ToolCallPart, UsagePart

__all__ = ["DemoModel"]


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


# --- choosing the next tool ----------------------------------------------------------------


def _candidates(turn: _Turn) -> Iterator[_Call]:
    """The calls the prompt asks for, in order; later ones may depend on earlier results."""
    plain, files = turn.plain, turn.files
    if _demo_notebook.wants_comment(turn):
        yield from _demo_notebook.comment_calls(turn)
        return
    if _demo_notebook.wants_run(turn):
        yield from _demo_notebook.run_calls(turn)
        return
    if "delegate" in turn.offered and (delegation := _demo_delegate.delegation(plain, files)):
        # Independent parts go to sub-agents; once they answered, there is nothing left to do.
        yield _Call("delegate", *delegation)
        if turn.results("delegate"):
            return
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
    python = _python_call(turn)
    if _demo_notebook.wants_cells(turn):
        # The code goes into a cell of the notebook, where the user sees and keeps it.
        yield from _demo_notebook.notebook_calls(turn, python)
    elif python is not None:
        yield python


def _variable_to_inspect(turn: _Turn) -> str | None:
    listed, plain = _variables(turn), turn.plain
    words: list[str] = re.findall(r"[A-Za-z_]\w*", plain)
    if named := [w for w in words if w in listed]:
        return named[0]
    if listed:
        return next((n for n, kind in listed.items() if "DataFrame" in kind), None)
    explicit = re.search(r"`([A-Za-z_]\w*)`|\b([A-Za-z_]\w+)\.[A-Za-z_]|\b(df\w*)\b", plain)
    return str(explicit[explicit.lastindex]) if explicit and explicit.lastindex else None


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
