"""The rich renderables of the live display: tool cards, progress rows, the status line.

Text from the run reaches rich only as :class:`~rich.text.Text`, :class:`~rich.markdown.Markdown`
or :class:`~rich.syntax.Syntax` objects built from :func:`~neta_jupyter.terminal.text.clean`
text, never as a string rich would parse for markup: ``[bold red]`` in a model's answer is
shown as written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markdown import Markdown
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.segment import Segment
from rich.spinner import Spinner
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from ..events import ProcessData
from .text import STALE_WORDS, Preview, ToolLabel, clean, duration, one_line

PREVIEW_LINES = 8
"""Lines of a tool's output shown in its card."""
_CODE_KEYS = {"code": "python", "source": "python", "sql": "sql", "query": "sql", "script": "bash"}
_CODE_THEME = "monokai"


def markdown(text: str) -> Markdown:
    """Model text as markdown (control sequences gone, links shown as text)."""
    return Markdown(clean(text), code_theme=_CODE_THEME, hyperlinks=False)


def split_settled(text: str) -> tuple[str, str]:
    """``text`` cut after its last complete markdown block: ``(settled, still being written)``.

    A block is complete at a blank line outside a fenced code block, or at the fence that
    closes one. Settled blocks can be printed for good; only the rest needs redrawing.
    """
    cut = offset = 0
    fence: str | None = None
    lines = text.split("\n")
    for line in lines[:-1]:  # the last piece has no newline yet: it may still change
        offset += len(line) + 1
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
                cut = offset
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif not stripped:
            cut = offset
    return text[:cut], text[cut:]


class Trimmed:
    """A renderable without the blank lines it starts or ends with (blocks get even spacing)."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options, pad=False)
        filled = [i for i, line in enumerate(lines) if not _blank(line)]
        if filled:
            for line in lines[filled[0] : filled[-1] + 1]:
                yield from line
                yield Segment.line()


def _blank(line: list[Segment]) -> bool:
    """Only spaces, and none of them painted (a code block's padding is painted)."""
    return all(
        not segment.text.strip() and not (segment.style and segment.style.bgcolor)
        for segment in line
    )


class Tail:
    """The last ``height`` lines of a renderable: what is being written is the part to see."""

    def __init__(self, renderable: RenderableType, height: int) -> None:
        self.renderable = renderable
        self.height = max(1, height)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options, pad=False)
        for line in lines[-self.height :]:
            yield from line
            yield Segment.line()


def _parse_arguments(arguments: str | None) -> dict[str, Any] | None:
    """Argument JSON as a dict; a fragment still streaming is closed the likely way first."""
    text = (arguments or "").strip()
    if not text:
        return {}
    for ending in ("", '"}', "}", '"]}', "]}"):
        try:
            value = json.loads(text + ending)
        except ValueError:
            continue
        return value if isinstance(value, dict) else None
    return None


def arguments_view(tool_name: str, arguments: str | None) -> RenderableType:
    """Arguments one per line; code arguments as highlighted code."""
    parsed = _parse_arguments(arguments)
    if parsed is None:
        return Text(clean(arguments or ""), style="dim")
    parts: list[RenderableType] = []
    for key, value in parsed.items():
        lexer = _CODE_KEYS.get(key)
        if isinstance(value, str) and (lexer is not None or "\n" in value):
            parts.append(Text(f"{clean(key)}:", style="dim"))
            code = clean(value).rstrip("\n")
            parts.append(Syntax(code, lexer or "text", theme=_CODE_THEME, word_wrap=True))
            continue
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        line = Text(f"{clean(key)}: ", style="dim")
        line.append(one_line(shown, 400), style="")
        parts.append(line)
    return Group(*parts) if parts else Text("(no arguments)", style="dim")


def output_view(output: str | None, extras: Iterable[str] = ()) -> RenderableType | None:
    """The first lines of a tool's output, and where the rest is."""
    lines = clean(output or "").rstrip("\n").splitlines()
    shown = Text()
    for line in lines[:PREVIEW_LINES]:
        shown.append(line + "\n")
    if len(lines) > PREVIEW_LINES:
        shown.append(f"… {len(lines) - PREVIEW_LINES} more lines\n", style="dim")
    for extra in extras:
        shown.append(clean(extra) + "\n", style="dim")
    shown.rstrip()
    return shown if shown.plain else None


@dataclass
class ToolCard:
    """One tool call as the display knows it."""

    call_id: str
    label: ToolLabel = field(default_factory=ToolLabel)
    arguments: str = ""
    phase: str = "generating"
    """``generating`` (arguments streaming), ``asking`` (waits for approval), ``running``."""
    title: str | None = None
    """The tool's own progress title."""
    arguments_shown: bool = False
    """Already printed in an approval card: the final card leaves them out."""
    streamed: str = ""
    """The end of what the call printed so far (TOOL_EVENT ``tool_stream_data``)."""
    spinner: Spinner = field(default_factory=lambda: Spinner("dots", style="cyan"))

    def live(self, height: int) -> Panel:
        """The card while the call streams or runs: a spinner in the title."""
        label = {"generating": "preparing the call…", "running": "running…"}.get(self.phase, "")
        head = Table.grid(padding=(0, 1))
        head.add_row(self.spinner, Text(one_line(self.title) if self.title else label, "dim"))
        body = Tail(arguments_view(self.label.name, self.arguments), height)
        if self.streamed:
            output = Text(self.streamed.rstrip("\n"), style="dim")
            body = Tail(Group(arguments_view(self.label.name, self.arguments), output), height)
        title = Text(self.label.words(), style="bold cyan")
        return Panel(Group(head, body), title=title, title_align="left", border_style="cyan")

    def asking(self, rule: str | None, preview: Preview | None = None) -> Panel:
        """The card of a call that waits for the user's approval (what it would do, if known)."""
        why = f" ({one_line(rule)})" if rule else ""
        title = Text(f"? {self.label.ask_words()} needs approval{why}", style="bold yellow")
        self.arguments_shown = True
        return Panel(
            preview_view(preview) if preview else arguments_view(self.label.name, self.arguments),
            title=title,
            title_align="left",
            border_style="yellow",
        )

    def finished(
        self, *, ok: bool, ms: int | None, output: RenderableType | None, error: str | None
    ) -> Panel:
        """The card of a call that completed or failed."""
        mark, style = ("✓", "green") if ok else ("✗", "red")
        title = Text(f"{mark} {self.label.words()}{duration(ms)}", style=f"bold {style}")
        body: list[RenderableType] = []
        if not self.arguments_shown:
            body.append(arguments_view(self.label.name, self.arguments))
        if error:
            body.append(Text(f"error: {one_line(error, 2000)}", style=style))
        if output is not None:
            body.append(output)
        content = Group(*body) if body else Text("(no output)", style="dim")
        return Panel(content, title=title, title_align="left", border_style=style)


def diff_view(diff: str) -> Syntax:
    """A unified diff, coloured: added lines green, removed red (pygments' diff lexer)."""
    return Syntax(clean(diff).rstrip("\n"), "diff", theme=_CODE_THEME, word_wrap=True)


def edit_panel(words: str, diff: str) -> Panel:
    """A notebook edit a tool applied: what it changed, and the diff."""
    title = Text(f"✎ {one_line(words)}", style="bold magenta")
    return Panel(diff_view(diff), title=title, title_align="left", border_style="magenta")


def preview_view(preview: Preview) -> RenderableType:
    """A notebook tool's preview: the edit's diff, or the cell it would run."""
    shown: RenderableType = (
        diff_view(preview.text)
        if preview.kind == "diff"
        else Syntax(preview.text.rstrip("\n"), "python", theme=_CODE_THEME, word_wrap=True)
    )
    if not preview.stale:
        return shown
    return Group(Text(STALE_WORDS, style="bold red"), shown)


def process_row(table: Table, data: ProcessData) -> None:
    """One operation's progress: its stage, a bar (or a spinner), percent and message."""
    percent = data.percent
    if percent is None and data.current is not None and data.total:
        percent = 100.0 * data.current / data.total
    stage = Text(clean(data.stage or data.target_type), style="bold")
    bar: RenderableType = (
        ProgressBar(total=100.0, completed=percent, width=30)
        if percent is not None
        else Spinner("line", style="cyan")
    )
    figure = Text(f"{percent:3.0f}%" if percent is not None else "")
    table.add_row(stage, bar, figure, Text(one_line(data.message or ""), style="dim"))


def process_done(data: ProcessData) -> Text:
    """The line left behind by an operation that ended."""
    ok = data.status in ("completed", "skipped")
    line = Text("  ✓ " if ok else "  ✗ ", style="green" if ok else "red")
    line.append(f"{clean(data.stage or data.target_type)} {data.status}", style="dim")
    if data.message:
        line.append(f": {one_line(data.message)}", style="dim")
    return line


@dataclass(frozen=True)
class StatusLine:
    """The bottom line: what the run is doing, its step, tokens and time so far."""

    activity: str
    step: int | None
    tokens_in: int
    tokens_out: int
    started: float
    spinner: Spinner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        elapsed = time.monotonic() - self.started
        parts = [self.activity]
        if self.step:
            parts.append(f"step {self.step}")
        if self.tokens_in or self.tokens_out:
            parts.append(f"tokens {self.tokens_in:,} in / {self.tokens_out:,} out")
        parts.append(f"{elapsed:.1f} s")
        row = Table.grid(padding=(0, 1))
        row.add_row(self.spinner, Text(" · ".join(parts), style="dim", no_wrap=True))
        yield row
