"""Plain output of ``neta-jupyter run``: one line per thing that happened, or JSON lines.

Used when stdout is not a terminal, with ``--plain`` and with ``--json`` (the live, rich display
on a terminal is :mod:`neta_jupyter.terminal.live`). Both the embedded runtime and a remote
server hand these renderers the same envelope JSON, so what the user sees does not depend on
where the run lives. Unknown event types are skipped (:func:`decode_event` returns ``None`` for
them), as every client of the stream must.
"""

from __future__ import annotations

import os
from typing import TextIO

from .events import (
    AgentEvent,
    AgentStatusData,
    AttachmentData,
    ClarifyData,
    CompactionData,
    EventType,
    MessageData,
    PermissionAskData,
    PermissionResolvedData,
    ProcessData,
    ProgressData,
    ReasoningData,
    SessionData,
    SkillData,
    SupplementaryInputData,
    TextData,
    ToolData,
    ToolSideData,
    decode_event,
)
from .terminal.dispatch import AttachmentLocator, BodyRenderer
from .terminal.text import (
    CUT_OFF_NOTE,
    PREVIEW_WIDTH,
    STALE_WORDS,
    ToolLabel,
    asked_label,
    clean,
    compact_arguments,
    duration,
    edit_words,
    one_line,
    read_preview,
)
from .terminal.words import (
    attachment_words,
    outcome_words,
    resolution_words,
    session_words,
    status_words,
    was_stopped,
)

_PREVIEW_LINES = 5
_PREVIEW_WIDTH = PREVIEW_WIDTH
_STREAMED_LINES = 200
"""Lines of a call's streamed output printed; its result has the whole."""


def color_enabled(stream: TextIO) -> bool:
    """ANSI styling only on a terminal, and never when ``NO_COLOR`` is set (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Style:
    """ANSI SGR wrappers that do nothing when colour is off."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled and text else text

    def dim(self, text: str) -> str:
        """Secondary text: reasoning, progress, ids."""
        return self._wrap("2", text)

    def bold(self, text: str) -> str:
        """Tool names and headings."""
        return self._wrap("1", text)

    def red(self, text: str) -> str:
        """Failures."""
        return self._wrap("31", text)

    def green(self, text: str) -> str:
        """Successes."""
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        """Warnings and questions."""
        return self._wrap("33", text)


class TerminalRenderer(BodyRenderer):
    """Writes a run for people: streamed text, one card per tool call, notices, a summary."""

    def __init__(
        self,
        out: TextIO,
        *,
        color: bool,
        locate_attachment: AttachmentLocator | None = None,
    ) -> None:
        self.out = out
        self.style = Style(color)
        self._locate = locate_attachment or (lambda path: path)
        self._at_line_start = True
        self._tools: dict[str, ToolLabel] = {}
        self._streamed_lines: dict[str, int] = {}

    # --- low-level writing

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self._at_line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        """``text`` on a line of its own, whatever was streamed before."""
        if not self._at_line_start:
            self._write("\n")
        self._write(text + "\n")

    def flush(self) -> None:
        """Push what was written to the terminal (called once per batch of events)."""
        self.out.flush()

    def notice(self, text: str) -> None:
        """A message from the CLI itself, not from the run."""
        self._line(self.style.yellow(text))

    def prompt(self, text: str) -> None:
        """A question; the answer is typed on the same line."""
        if not self._at_line_start:
            self._write("\n")
        self.out.write(self.style.yellow(text))
        self.out.flush()
        self._at_line_start = False

    def answered(self) -> None:
        """The user pressed Enter: the terminal, not our output, ended the prompt's line."""
        self._at_line_start = True

    def close(self) -> None:
        """Nothing stays live: every line is final when written."""

    # --- events

    def feed(self, payload: str) -> AgentEvent | None:
        """Render one envelope (JSON); the decoded event, or None for one this client ignores."""
        event = decode_event(payload)
        if event is not None:
            self.render(event)
        return event

    def _aside(self, kind: EventType, event: AgentEvent) -> None:
        """One line for each of the other bodies a person would want to know of."""
        match event.data:
            case AttachmentData() as attachment:
                self._attachment(kind, attachment)
            case AgentStatusData() as status:
                self._status(status)
            case SessionData() as session:
                self._line(self.style.dim(session_words(event.request_id, session.session_id)))
            case SupplementaryInputData() as supplied:
                self._line(self.style.dim(f"  ↳ input delivered: {one_line(supplied.content)}"))
            case SkillData() | CompactionData() | ClarifyData() as other:
                self._other(kind, other)
            case ProgressData(no_progress_count=count) if count >= 2:
                # The phases are for a live status line; a log only hears of a stuck run.
                self._line(self.style.dim(f"  ◦ no progress in {count} steps in a row"))
            case _:
                pass

    def _text(self, kind: EventType, data: TextData) -> None:
        if kind == EventType.TEXT_START:
            if data.replaces:
                self._line(self.style.dim(CUT_OFF_NOTE))
            if not data.continues:  # a reply taken up again goes on where it was cut off
                # A blank line sets the answer apart from the reasoning and tool cards above it.
                self._write("\n" if self._at_line_start else "\n\n")
            self._write(clean(data.text))
        elif kind == EventType.TEXT_DELTA:
            self._write(clean(data.text))
        elif kind == EventType.TEXT_END and not self._at_line_start:
            self._write("\n")

    def _thinking(self, kind: EventType, data: ReasoningData) -> None:
        if kind == EventType.REASONING_START:
            if not self._at_line_start:
                self._write("\n")
            self._write(self.style.dim("thinking: " + clean(data.text)))
        elif kind == EventType.REASONING_DELTA:
            self._write(self.style.dim(clean(data.text)))
        elif kind == EventType.REASONING_END and not self._at_line_start:
            self._write("\n")

    def _tool(self, kind: EventType, data: ToolData) -> None:
        label = self._tools.get(data.tool_call_id, ToolLabel())
        label = label.seen(data.tool_name, data.mcp_server, data.mcp_tool)
        self._tools[data.tool_call_id] = label
        name = self.style.bold(label.words())
        if kind == EventType.TOOL_START:
            self._line(f"▸ {name} {compact_arguments(data.arguments)}")
        elif kind == EventType.TOOL_RUNNING and data.title:
            self._line(self.style.dim(f"  … {one_line(data.title)}"))
        elif kind == EventType.TOOL_COMPLETED:
            self._line(self.style.green("✓ ") + name + duration(data.duration_ms))
            self._preview(data)
        elif kind == EventType.TOOL_FAILED:
            error = one_line(data.error_message or "failed")
            self._line(
                self.style.red("✗ ")
                + name
                + duration(data.duration_ms)
                + self.style.red(f" error: {error}")
            )

    def _side(self, side: ToolSideData) -> None:
        """Streamed output under its call, credentials asked for; other categories ignored."""
        if side.category == "auth_required":
            message = one_line(side.user_message or "credentials are missing", 2000)
            self._line(self.style.bold(self.style.yellow("🔑 credentials needed: ")) + message)
        elif side.category == "notebook_edit" and side.payload:
            diff = side.payload.get("diff")
            words = one_line(edit_words(side.payload, side.user_message))
            self._line(self.style.bold(f"  ✎ {words}"))
            self._diff(diff if isinstance(diff, str) else "")
        elif side.category == "tool_stream_data" and side.payload:
            text = side.payload.get("text")
            shown = self._streamed_lines.get(side.tool_call_id, 0)
            for line in clean(text if isinstance(text, str) else "").splitlines():
                shown += 1
                if shown <= _STREAMED_LINES:
                    self._line(self.style.dim("  ┆ ") + line[:_PREVIEW_WIDTH])
                elif shown == _STREAMED_LINES + 1:
                    self._line(self.style.dim("  ┆ … (more output: see the result)"))
            self._streamed_lines[side.tool_call_id] = shown

    def _diff(self, diff: str) -> None:
        """A unified diff under its call, added lines green and removed ones red."""
        for line in clean(diff).rstrip("\n").splitlines():
            if line.startswith(("+++", "---", "@@")):
                painted = self.style.dim(line)
            elif line.startswith("+"):
                painted = self.style.green(line)
            elif line.startswith("-"):
                painted = self.style.red(line)
            else:
                painted = line
            self._line("    " + painted)

    def _preview(self, data: ToolData) -> None:
        """The first lines of a tool's output, and where the rest is."""
        lines = clean(data.output or "").rstrip("\n").splitlines()
        for line in lines[:_PREVIEW_LINES]:
            shown = line if len(line) <= _PREVIEW_WIDTH else line[: _PREVIEW_WIDTH - 1] + "…"
            self._line(self.style.dim("  │ ") + shown)
        if len(lines) > _PREVIEW_LINES:
            self._line(self.style.dim(f"  │ … {len(lines) - _PREVIEW_LINES} more lines"))
        if data.truncated and data.output_ref:
            self._line(self.style.dim(f"  │ full output: {self._locate(data.output_ref)}"))
        for image in data.images or []:
            self._line(self.style.dim(f"  │ image: {self._locate(image)}"))

    def _ask(self, ask: PermissionAskData) -> None:
        rule = f" ({one_line(ask.rule_description)})" if ask.rule_description else ""
        self._line(self.style.yellow(f"? {asked_label(ask).ask_words()} needs approval{rule}"))
        preview = read_preview(ask.preview)
        if preview is None:
            self._line(self.style.dim(f"  arguments: {compact_arguments(ask.arguments)}"))
            return
        if preview.stale:
            self._line(self.style.red(f"  {STALE_WORDS}"))
        if preview.kind == "diff":
            self._diff(preview.text)
            return
        for line in preview.text.rstrip("\n").splitlines():
            self._line(self.style.dim("    │ ") + line)

    def _resolved(self, data: PermissionResolvedData) -> None:
        paint = self.style.green if data.approved else self.style.red
        self._line(paint(resolution_words(data)))

    def _message(self, kind: EventType, data: MessageData) -> None:
        head, detail = outcome_words(kind, data, waiting="suspended")
        if kind == EventType.MESSAGE_COMPLETED:
            self._line(self.style.green(head) + self.style.dim(detail))
        elif was_stopped(kind, data):
            self._line(self.style.yellow(head) + self.style.dim(detail))
        elif kind == EventType.MESSAGE_FAILED:
            self._line(self.style.red(head) + self.style.dim(detail))
        elif kind == EventType.MESSAGE_SUSPENDED:
            self._line(self.style.yellow(head))

    def _attachment(self, kind: EventType, data: AttachmentData) -> None:
        self._line(attachment_words(kind, data, self._locate))

    def _status(self, data: AgentStatusData) -> None:
        text = status_words(data)
        match data.level:
            case "ERROR":
                self._line(self.style.red(text))
            case "WARN":
                self._line(self.style.yellow(text))
            case _:
                self._line(self.style.dim(text))

    def _process(self, data: ProcessData) -> None:
        percent = data.percent
        if percent is None and data.current is not None and data.total:
            percent = 100.0 * data.current / data.total
        parts = [data.stage or data.target_type, data.status]
        if percent is not None:
            parts.append(f"{percent:.0f}%")
        if data.message:
            parts.append(one_line(data.message))
        self._line(self.style.dim("  ◦ " + " ".join(clean(p) for p in parts)))

    def _other(self, kind: EventType, data: SkillData | CompactionData | ClarifyData) -> None:
        match data:
            case SkillData():
                text = f"skill {data.skill_name}: {kind.removeprefix('SKILL_').lower()}"
            case CompactionData():
                text = f"context compaction: {kind.removeprefix('COMPACTION_').lower()}"
            case ClarifyData():
                text = f"question: {data.question}"
        self._line(self.style.dim(f"  ◦ {one_line(text)}"))


class JsonRenderer:
    """Writes each envelope as one JSON line (for scripts); the CLI's own words go to stderr."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err

    def feed(self, payload: str) -> AgentEvent | None:
        """Print the envelope exactly as stored or received."""
        self.out.write(payload + "\n")
        return decode_event(payload)

    def flush(self) -> None:
        """Push the lines out so a reading pipe sees them at once."""
        self.out.flush()

    def notice(self, text: str) -> None:
        """A message from the CLI itself."""
        self.err.write(text + "\n")
        self.err.flush()

    def prompt(self, text: str) -> None:
        """A question on stderr, so stdout stays pure JSON lines."""
        self.err.write(text)
        self.err.flush()

    def answered(self) -> None:
        """Nothing to track: stdout never holds a prompt."""

    def close(self) -> None:
        """Nothing stays live."""
