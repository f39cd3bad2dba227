"""What the demo model writes: its reasoning and its markdown answer, from the results."""

from __future__ import annotations

import re

from . import _demo_delegate, _demo_notebook
from ._demo_reading import (
    _COMPUTE,
    _DATA,
    _LISTING,
    _NOTHING_PRINTED,
    _PLOT,
    _READING,
    _TRACEBACK,
    _Call,
    _Done,
    _entries,
    _FileRead,
    _inspected,
    _kernel_busy,
    _parse_frame,
    _text_files,
    _Turn,
    _variables,
    _without_pictures,
)

_IDEAS = {
    "read_file": '"load it into a dataframe and describe it"',
    "list_variables": '"which columns of {frame} have missing values?"',
    "inspect_variable": '"plot the column with the most missing values"',
    "python": '"plot a histogram of {frame}", or another calculation',
    "delegate": '"summarise one of those files"',
    "run_cell": '"add a cell that plots a histogram of {frame}"',
    "list_files": '"what is in {frame}?"',
}
_IDEAS_WITHOUT_DATA = {
    "list_variables": '"load a CSV file into a dataframe"',
    "python": '"what is 2**10?", or another calculation',
    "run_cell": '"add a cell that prints today\'s date"',
    "list_files": '"what variables do I have?"',
}
"""What to suggest when no dataframe is known: a suggestion never names data that is not there."""
_ABILITIES = {
    "list_files": 'list the files next to your notebook: "what files are here?"',
    "read_file": 'read and summarise a file: "summarise data.csv"',
    "list_variables": 'show the variables in your kernel: "what variables do I have?"',
    "inspect_variable": 'inspect a dataframe: "which columns of df have missing values?"',
    "python": 'run Python in your kernel, with your permission: "what is 17*23?"',
    "delegate": 'hand independent parts to sub-agents: "compare notes.txt and data.csv"',
    "insert_cell": 'write and run cells in this notebook: "add a cell that plots df"',
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
        if _demo_notebook.refused(done):
            text += " The cell changed after I read it, so my change was refused."
            continue
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
    seen = [f"- I was shown the picture you attached: {p}." for p in turn.attached]
    if not turn.done and not unavailable:
        abilities = [f"- {_ABILITIES[n]} (`{n}`)" for n in turn.offered if n in _ABILITIES]
        abilities = abilities or ["- only talk: no tools are enabled in this run."]
        direct = _DIRECT_ANSWER.format(prompt=_quote(turn.prompt), abilities="\n".join(abilities))
        return "\n".join([direct, *seen, ""]) if seen else direct
    lines = [_lead(turn), "", *seen]
    for done in turn.done:
        lines += (_demo_notebook.refusal(done) or _failure(done)) if done.failed else _facts(done)
        lines += [f"- I was shown the picture it made: {p}." for p in done.pictures]
    for name in unavailable:
        lines.append(f"- I would have used `{name}`, but that tool is not enabled in this run.")
    idea = _next_idea(turn)
    text = "\n".join([*lines, "", f"**Next**, you could ask: {idea}."]) + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def _next_idea(turn: _Turn) -> str:
    """A follow-up prompt for what was done last, about data that is there."""
    ok, texts, frame = [d.name for d in turn.done if not d.failed], _text_files(turn), _frame(turn)
    ideas = {k: v.format(frame=frame) for k, v in _IDEAS.items()} if frame else _IDEAS_WITHOUT_DATA
    ideas = _IDEAS | ideas
    if texts:
        ideas["list_files"] = f'"summarise {texts[0]}"'
    if not any(str(d.args.get("path")).endswith("sv") for d in turn.results("read_file")):
        ideas["read_file"] = '"what else is in this folder?"'  # only tables load into a dataframe
    return ideas.get(ok[-1] if ok else "", '"what files are here?"')


def _frame(turn: _Turn) -> str | None:
    """A dataframe the turn saw in the kernel, by its name."""
    frames = [n for n, kind in _variables(turn).items() if "DataFrame" in kind]
    if not frames and (inspected := _inspected(turn)) and inspected.shape:
        frames = [inspected.name]
    return frames[0] if frames else None


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
    if (notebook := _demo_notebook.facts(done)) is not None:
        return notebook
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
            printed, drawn = _without_pictures(done.output)
            figures = "a figure" if drawn == 1 else f"{drawn} figures"
            drew = [f"- It drew {figures}, shown with the call."] if drawn else []
            if not printed.strip() or _NOTHING_PRINTED.match(printed):
                return [*out, *(drew or ["- It printed nothing."])]
            return [*out, "- It printed:", *_fenced(printed), *drew]
        case "run_skill":
            report = done.output.split("\n[process log:")[0].strip().splitlines()
            return ["- The skill reported:", "", *report[:60]]
        case "delegate":
            return _demo_delegate.facts(done.output)
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
