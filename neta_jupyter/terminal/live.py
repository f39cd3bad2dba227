"""The live display of a run on a terminal (rich): what is done is printed, the rest redrawn.

Finished things are printed once and stay in the scrollback: answer blocks as markdown (headings,
lists, tables, highlighted code), reasoning collapsed to one dim line, one panel per tool call
with its arguments (code as code) and output, notices. Below them a small live region is redrawn
while the run streams: the answer's unfinished block, the reasoning as it comes (dimmed), cards
of calls that run (with a spinner), progress bars of long operations and a status line with the
step and the tokens used. The region never grows past the screen, so redrawing it stays exact.
"""

from __future__ import annotations

import asyncio
import time
from typing import TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from ..events import (
    AgentEvent,
    AgentStatusData,
    AttachmentData,
    ClarifyData,
    CompactionData,
    EventType,
    MessageData,
    PermissionAskData,
    PermissionResolvedData,
    PhaseData,
    ProcessData,
    ProgressData,
    ReasoningData,
    SessionData,
    SkillData,
    SupplementaryInputData,
    TextData,
    TokenUsageData,
    ToolData,
    ToolSideData,
    decode_event,
)
from .dispatch import AttachmentLocator, BodyRenderer
from .text import (
    CUT_OFF_NOTE,
    ToolLabel,
    asked_label,
    clean,
    edit_words,
    one_line,
    phase_text,
    read_preview,
)
from .views import (
    StatusLine,
    Tail,
    ToolCard,
    Trimmed,
    edit_panel,
    markdown,
    output_view,
    process_done,
    process_row,
    split_settled,
)
from .words import (
    attachment_words,
    outcome_words,
    resolution_words,
    session_words,
    status_words,
    was_stopped,
)

_TICK = 0.1
"""Seconds between redraws of the live region (spinners, elapsed time, streamed text)."""
_ENDED = frozenset({"completed", "failed", "cancelled", "skipped"})
_STREAMED_KEPT = 8_000
"""Characters of a running call's streamed output kept for its card (its end is shown)."""
_STATUS_STYLE = {"ERROR": "red", "WARN": "yellow"}


class LiveRenderer(BodyRenderer):
    """Draws a run on a terminal with rich; fed the same envelopes as the plain renderer."""

    def __init__(
        self,
        out: TextIO,
        *,
        locate_attachment: AttachmentLocator | None = None,
        console: Console | None = None,
    ) -> None:
        # markup/emoji/highlight off: nothing printed here is ever parsed for rich markup.
        self.console = console or Console(
            file=out, markup=False, emoji=False, highlight=False, soft_wrap=False
        )
        self._locate = locate_attachment or (lambda path: path)
        self._live: Live | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._started = time.monotonic()
        self._spinner = Spinner("dots", style="cyan")
        self._answer = ""
        self._answer_open = False
        self._reasoning: str | None = None
        self._cards: dict[str, ToolCard] = {}
        self._asked: dict[str, ToolLabel] = {}
        """The calls already shown in an approval card, with the tool they are of."""
        self._progress: dict[str, ProcessData] = {}
        self._step: int | None = None
        self._tokens = (0, 0)
        self._printed = False
        self._phase: PhaseData | None = None
        self._no_progress = 0

    # --- the renderer interface

    def feed(self, payload: str) -> AgentEvent | None:
        """Show one envelope; the decoded event, or None for one this client ignores."""
        event = decode_event(payload)
        if event is None:
            return None
        if event.step is not None:
            self._step = event.step
        self.render(event)
        if event.is_terminal:
            self._stop()
        else:
            self._redraw()
        return event

    def flush(self) -> None:
        """Push what was printed out (the live region redraws itself)."""
        self.console.file.flush()

    def notice(self, text: str) -> None:
        """A message from the command itself, after the text streamed so far (kept as it is)."""
        self._settle_thinking()
        self._settle_answer()
        self._print(Text(clean(text), style="yellow"))

    def prompt(self, text: str) -> None:
        """A question at the bottom of the screen, with the live region put away."""
        self._stop()
        self.console.print(Text(clean(text), style="bold yellow"), end="")
        self.console.file.flush()

    def answered(self) -> None:
        """The terminal echoed the answer and its newline."""

    def close(self) -> None:
        """Print the text still in progress and put the live region away."""
        self._settle_thinking()
        self._settle_answer()
        self._stop()

    # --- drawing

    def _print(self, renderable: RenderableType, *, one_row: bool = False) -> None:
        """Printed for good, above the live region (``one_row``: cut to the width, with …).

        Callers change the state first: the live region is redrawn below from the state as it
        is now, so it never repeats what was just printed.
        """
        if self._live is not None:
            # Printing redraws the region below from what was last refreshed: refresh it first.
            self._live.update(self.view(), refresh=True)
        if one_row:
            self.console.print(renderable, no_wrap=True, overflow="ellipsis")
        else:
            self.console.print(renderable)
        self._printed = True

    def _stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._live is not None:
            self._live.stop()  # transient: the region is erased, what was printed stays
            self._live = None

    def _redraw(self) -> None:
        """Show the region; once shown, each tick redraws it from the state as it is then."""
        if self._live is not None:
            return
        # No refresh thread: rich's would redraw while this thread prints, and a redraw that
        # interleaves with a print leaves a stale copy of the region in the scrollback. All
        # drawing happens on the event loop, ticking for the spinners.
        self._live = Live(
            self.view(),
            console=self.console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start(refresh=True)
        self._schedule_tick()

    def _schedule_tick(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # fed outside an event loop: redrawn when something is printed
            return
        self._ticker = loop.call_later(_TICK, self._tick)

    def _tick(self) -> None:
        self._ticker = None
        if self._live is not None:
            self._live.update(self.view(), refresh=True)
            self._schedule_tick()

    def view(self) -> RenderableType:
        """What is going on now, no taller than the screen."""
        room = max(4, self.console.size.height - 2)
        parts: list[RenderableType] = []
        if self._reasoning:
            parts.append(Tail(Text(self._reasoning, style="dim italic"), 3))
        if self._answer.strip():
            parts.append(markdown(self._answer))
        parts += [card.live(max(3, room // 2)) for card in self._cards.values()]
        if self._progress:
            table = Table.grid(padding=(0, 1))
            for data in self._progress.values():
                process_row(table, data)
            parts.append(table)
        parts.append(self._status_line())
        return Tail(Group(*parts), room)

    def _status_line(self) -> StatusLine:
        running = [c for c in self._cards.values() if c.phase == "running"]
        phase = self._phase
        if running:
            activity = f"running {', '.join(clean(c.label.name) for c in running)}"
        elif phase and phase.phase not in ("calling_model", "running_tools"):
            # What the loop does between the model's tokens, as the server says.
            activity = phase_text(phase.phase) or "working"
        elif phase and phase.phase == "running_tools":
            activity = phase_text(phase.phase, phase.tool_names) or "running tools"
        elif self._cards:
            activity = "preparing a tool call"
        elif self._reasoning is not None:
            activity = "thinking"
        elif self._answer_open:
            activity = "writing"
        else:
            activity = "waiting for the model"
        if self._no_progress >= 2:
            activity += f" · no progress in {self._no_progress} steps"
        tokens_in, tokens_out = self._tokens
        return StatusLine(activity, self._step, tokens_in, tokens_out, self._started, self._spinner)

    # --- events

    def _aside(self, kind: EventType, event: AgentEvent) -> None:
        """The bodies the status line counts, and the events that only need mentioning."""
        match event.data:
            case PhaseData() as phase:
                self._phase = phase
            case ProgressData() as progress:
                self._no_progress = progress.no_progress_count
            case TokenUsageData() as usage:
                tokens_in, tokens_out = self._tokens
                self._tokens = (tokens_in + usage.input_tokens, tokens_out + usage.output_tokens)
            case _:
                self._mention(kind, event)

    def _mention(self, kind: EventType, event: AgentEvent) -> None:
        """One line for the events that only need mentioning."""
        match event.data:
            case SessionData() as session:
                self._print(Text(session_words(event.request_id, session.session_id), "dim"))
            case AgentStatusData() as status:
                style = _STATUS_STYLE.get(status.level, "dim")
                self._print(Text(status_words(status), style=style))
            case AttachmentData() as attached:
                self._print(Text(attachment_words(kind, attached, self._locate)))
            case SupplementaryInputData() as supplied:
                self._print(Text(f"↳ input delivered: {one_line(supplied.content)}", "dim"))
            case SkillData() as skill:
                verb = kind.removeprefix("SKILL_").lower()
                self._print(Text(f"◦ skill {clean(skill.skill_name)}: {verb}", style="dim"))
            case CompactionData():
                verb = kind.removeprefix("COMPACTION_").lower()
                self._print(Text(f"◦ context compaction: {verb}", style="dim"))
            case ClarifyData():
                pass  # the question is put at the prompt, with its options

    def _text(self, kind: EventType, data: TextData) -> None:
        if kind == EventType.TEXT_START:
            self._settle_thinking()
            if data.replaces:
                self._print(Text(CUT_OFF_NOTE, style="dim"))
            self._answer_open = True
        self._answer += clean(data.text)
        settled, self._answer = split_settled(self._answer)
        self._print_block(settled)
        if kind == EventType.TEXT_END:
            self._settle_answer()

    def _print_block(self, block: str) -> None:
        """Finished markdown blocks, one blank line apart like blocks of one document."""
        if block.strip():
            if self._printed:
                self._print(Text(""))
            self._print(Trimmed(markdown(block)))

    def _settle_answer(self) -> None:
        rest, self._answer, self._answer_open = self._answer, "", False
        self._print_block(rest)

    def _thinking(self, kind: EventType, data: ReasoningData) -> None:
        self._reasoning = (self._reasoning or "") + clean(data.text)
        if kind == EventType.REASONING_END:
            self._settle_thinking()

    def _settle_thinking(self) -> None:
        """Reasoning collapses to one dim line once it is done."""
        reasoning, self._reasoning = self._reasoning, None
        if reasoning is not None and reasoning.strip():
            line = Text(f"thinking: {one_line(reasoning, 2000)}", style="dim italic")
            self._print(line, one_row=True)

    def _card(self, data: ToolData) -> ToolCard:
        card = self._cards.get(data.tool_call_id)
        if card is None:
            card = self._cards[data.tool_call_id] = ToolCard(data.tool_call_id)
            card.arguments_shown = data.tool_call_id in self._asked
            card.label = self._asked.get(data.tool_call_id, card.label)
        card.label = card.label.seen(data.tool_name, data.mcp_server, data.mcp_tool)
        return card

    def _tool(self, kind: EventType, data: ToolData) -> None:
        self._settle_thinking()
        card = self._card(data)
        if kind == EventType.TOOL_CALL_GENERATING:
            card.arguments += data.arguments or ""
        elif kind == EventType.TOOL_START:
            card.arguments = data.arguments or card.arguments
            card.phase = "running"
        elif kind == EventType.TOOL_RUNNING:
            card.phase, card.title = "running", data.title or card.title
        elif kind in (EventType.TOOL_COMPLETED, EventType.TOOL_FAILED):
            del self._cards[data.tool_call_id]
            ok = kind == EventType.TOOL_COMPLETED
            extras = [f"image: {self._locate(path)}" for path in data.images or []]
            if data.truncated and data.output_ref:
                extras.append(f"full output: {self._locate(data.output_ref)}")
            output = output_view(data.output if ok else None, extras)
            error = None if ok else (data.error_message or "failed")
            self._print(card.finished(ok=ok, ms=data.duration_ms, output=output, error=error))

    def _side(self, side: ToolSideData) -> None:
        """Streamed output in its running card, credentials asked for; other categories ignored."""
        if side.category == "auth_required":
            message = Text(one_line(side.user_message or "credentials are missing", 2000))
            title = Text("🔑 credentials needed", style="bold yellow")
            self._print(Panel(message, title=title, title_align="left", border_style="yellow"))
        elif side.category == "notebook_edit" and side.payload:
            diff = side.payload.get("diff")
            words = edit_words(side.payload, side.user_message)
            self._print(edit_panel(words, diff if isinstance(diff, str) else ""))
        elif side.category == "tool_stream_data" and side.payload:
            card = self._cards.get(side.tool_call_id)
            text = side.payload.get("text")
            if card is not None and isinstance(text, str):
                card.streamed = (card.streamed + clean(text))[-_STREAMED_KEPT:]

    def _ask(self, ask: PermissionAskData) -> None:
        card = self._cards.pop(ask.tool_call_id, None) or ToolCard(ask.tool_call_id)
        card.label, card.arguments = asked_label(ask), ask.arguments
        self._asked[ask.tool_call_id] = card.label
        self._print(card.asking(ask.rule_description, read_preview(ask.preview)))

    def _resolved(self, data: PermissionResolvedData) -> None:
        self._print(Text(resolution_words(data), style="green" if data.approved else "red"))

    def _process(self, data: ProcessData) -> None:
        if data.status in _ENDED:
            self._progress.pop(data.operation_id, None)
            self._print(process_done(data))
        else:
            self._progress[data.operation_id] = data

    def _message(self, kind: EventType, data: MessageData) -> None:
        self._settle_thinking()
        self._settle_answer()
        if kind != EventType.MESSAGE_SUSPENDED:
            self._settle_cards()
        head, detail = outcome_words(kind, data, waiting="waiting")
        if kind == EventType.MESSAGE_COMPLETED:
            line = Text(head, style="bold green")
        elif was_stopped(kind, data):
            line = Text(head, style="yellow")
        elif kind == EventType.MESSAGE_FAILED:
            line = Text(head, style="red")
        else:
            line = Text(head, style="yellow")
        if detail:
            line.append(detail, style="dim")
        self._print(line)

    def _settle_cards(self) -> None:
        """The run ended: calls still open did not finish (the runtime normally closes them)."""
        cards, self._cards = list(self._cards.values()), {}
        self._progress.clear()
        for card in cards:
            self._print(card.finished(ok=False, ms=None, output=None, error="did not finish"))
