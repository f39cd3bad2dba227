"""One shared translation of provider stream parts into events, accumulating the reply.

When a step is asked for again after its stream broke off (a retry, or the run resumed after the
server shut down mid-reply), the new attempt is given what the broken one already sent: text,
reasoning and argument fragments the client has seen are not sent twice, and tool calls keep the
ids the client already knows. The first segment after the break says how it relates to the one
the client has: it ``continues`` it, or, when the reply came out differently, ``replaces`` it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...events import EventType, ReasoningData, TextData, ToolData
from ...events.redact import StreamRedactor
from ...providers.base import (
    ReasoningPart,
    StreamPart,
    TextPart,
    ToolCall,
    ToolCallPart,
    UsagePart,
)
from ..data.values import Reply
from ..log.emitter import RunEmitter

if TYPE_CHECKING:
    from ..data.state import RunState

_TURN = 0.0005
"""Seconds of handling parts that all streams together take per turn of the event loop before
they let it run other callbacks (timers, sockets, commits): with many runs streaming at once,
each run's slice is this shared out, so the loop's turn stays short however many stream."""
_MIN_SLICE = 0.00001
_MAX_SLICE = 0.0002
_WAITED = 0.001
"""Seconds between two parts past which the provider surely waited (the loop ran meanwhile)."""
_streaming = 0
"""Streams being consumed in this process (one event loop)."""
_TEXT_START = EventType.TEXT_START
_TEXT_DELTA = EventType.TEXT_DELTA


def _slice() -> float:
    return min(_MAX_SLICE, max(_MIN_SLICE, _TURN / max(1, _streaming)))


@dataclass(frozen=True, slots=True)
class ReplyLimits:
    """How much of one reply is read, whatever the model was asked for (it may not listen)."""

    tokens: int = 100_000
    """Counted as the deltas received, or a quarter of the bytes when that is more."""
    bytes: int = 2_000_000
    """UTF-8 bytes of text, reasoning and tool-call arguments together."""

    def over(self, deltas: int, size: int) -> str | None:
        """Why a reply of ``deltas`` parts and ``size`` bytes must stop (``None``: it may go on)."""
        if size > self.bytes:
            return f"{self.bytes:,} bytes (c.NetaApp.max_reply_bytes)"
        if max(deltas, size // 4) > self.tokens:
            return f"{self.tokens:,} tokens (c.NetaApp.max_reply_tokens)"
        return None


class SentSoFar:
    """What clients have seen of one step's reply, across its attempts."""

    def __init__(self, before: Reply | None = None) -> None:
        self.before = before
        self.streamer: ReplyStreamer | None = None
        """The attempt streaming now (or last)."""

    def reply(self) -> Reply | None:
        """All of it, as the clients have it."""
        return self.streamer.sent() if self.streamer is not None else self.before


@contextmanager
def kept_across_activations(state: RunState, step: int) -> Iterator[SentSoFar]:
    """What the step's reply showed before its activation ended is kept in the run's state.

    A shutdown (or a failure that can be retried) may cut a reply off mid-stream; when the run
    goes on, the step is asked for again and sends only what its clients have not seen.
    """
    kept = state.kept_reply
    sent = SentSoFar(kept.reply() if kept is not None and kept.step == step else None)
    try:
        yield sent
    except BaseException:
        shown = sent.reply()
        if shown is not None and (shown.text or shown.reasoning or shown.tool_calls):
            state.kept_reply = shown.kept(step)
        raise
    state.kept_reply = None


class _Fresh:
    """Passes through only what goes beyond text a previous attempt already sent."""

    def __init__(self, sent: str) -> None:
        self.sent = sent
        self.seen = ""
        # Once the text has gone past (or away from) what was sent, every chunk is fresh; from
        # then on nothing is accumulated, so a long answer costs the same per chunk throughout.
        self.past = not sent
        self.replaced = False
        """The text went away from what was sent: all of it is sent anew, replacing that."""
        self.linked = not sent
        """The first segment after the break said how it relates to the one sent before."""

    def __call__(self, chunk: str) -> str:
        if self.past:
            return chunk
        start = len(self.seen)
        self.seen += chunk
        if len(self.seen) <= len(self.sent) and self.sent.startswith(self.seen):
            return ""
        self.past, seen, self.seen = True, self.seen, ""
        if seen.startswith(self.sent):
            return seen[max(start, len(self.sent)) :]
        self.replaced = True
        return seen

    def ended_short(self, received: str) -> bool:
        """At the end: the text stopped inside what was sent, so what was sent must be replaced."""
        if self.past or received == self.sent:
            return False
        self.past = self.replaced = True
        return True

    def link(self) -> tuple[bool | None, bool | None]:
        """``(continues, replaces)`` of the segment opening now: set once after a break."""
        if self.linked:
            return None, None
        self.linked = True
        return (None, True) if self.replaced else (True, None)

    def shown(self, received: str) -> str:
        """The text as the client has it."""
        if self.replaced or len(received) >= len(self.sent):
            return received
        return self.sent


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    redact: StreamRedactor
    arguments: list[str] = field(default_factory=list)
    fresh: _Fresh = field(default_factory=lambda: _Fresh(""))


class ReplyStreamer:
    """Emits REASONING_* / TEXT_* / TOOL_CALL_GENERATING as parts arrive; closes open segments."""

    def __init__(
        self,
        emitter: RunEmitter,
        call_id_prefix: str,
        already_sent: Reply | None = None,
        limits: ReplyLimits | None = None,
    ) -> None:
        self._emitter = emitter
        self._limits = limits or ReplyLimits()
        self._deltas = self._size = 0
        self._cut: str | None = None
        self._prefix = call_id_prefix
        self._before = already_sent or Reply()
        self._open: EventType | None = None  # TEXT_START or REASONING_START while open
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._fresh_text = _Fresh(self._before.text)
        self._fresh_reasoning = _Fresh(self._before.reasoning)
        # A secret split across fragments is caught before any fragment of it is published.
        self._redact_text = StreamRedactor(emitter.redactor)
        self._redact_reasoning = StreamRedactor(emitter.redactor)
        self._calls: dict[int, _Call] = {}
        self._usage: UsagePart | None = None

    async def consume(self, parts: AsyncIterator[StreamPart]) -> Reply:
        """Drain the provider stream; on an exception the open segment is still closed."""
        global _streaming
        _streaming += 1
        on_part, clock = self._on_part, time.monotonic
        try:
            last = clock()
            deadline = last + _slice()
            async for part in parts:
                on_part(part)
                if self._cut is not None:
                    await _closed(parts)
                    break
                now = clock()
                if now >= deadline:
                    if now - last > _WAITED and self._emitter.keeps_up():
                        # The provider waited for this part (a model's pace), so the loop ran
                        # meanwhile: yielding to it again would only cost a turn per token.
                        deadline = now + _slice()
                    else:
                        # A provider whose parts are already buffered never suspends: let the
                        # loop commit and send what was emitted, and serve other runs, between
                        # slices (and wait while the store is far behind, so its backlog stays
                        # bounded).
                        await self._emitter.keep_pace()
                        now = clock()
                        deadline = now + _slice()
                last = now
            self._replace_if_short()
        finally:
            _streaming -= 1
            self._close_segment()
            self._flush_calls()
        return self.reply()

    def reply(self) -> Reply:
        """What was received so far."""
        return Reply(
            text="".join(self._text),
            reasoning="".join(self._reasoning),
            tool_calls=[
                ToolCall(c.id, c.name, "".join(c.arguments)) for _, c in sorted(self._calls.items())
            ],
            usage=self._usage,
            cut=self._cut,
        )

    def sent(self) -> Reply:
        """Everything the client has seen of this step, across attempts."""
        mine = self.reply()
        return Reply(
            text=self._fresh_text.shown(mine.text),
            reasoning=self._fresh_reasoning.shown(mine.reasoning),
            tool_calls=mine.tool_calls or self._before.tool_calls,
        )

    def _replace_if_short(self) -> None:
        """A reply that ended within what an earlier attempt sent replaces that text."""
        if self._fresh_text.ended_short(text := "".join(self._text)):
            self._segment(_TEXT_START)
            if fresh := self._redact_text.feed(text):
                self._emitter.emit_text(_TEXT_DELTA, fresh)
        if self._fresh_reasoning.ended_short(reasoning := "".join(self._reasoning)):
            self._segment(EventType.REASONING_START)
            if fresh := self._redact_reasoning.feed(reasoning):
                self._emitter.emit_text(EventType.REASONING_DELTA, fresh)

    @property
    def produced_output(self) -> bool:
        """Whether any text, reasoning or tool call came out so far (in any attempt)."""
        return bool(self._text or self._reasoning or self._calls or self._before.text)

    def _count(self, text: str) -> None:
        self._deltas += 1
        self._size += len(text.encode())
        if self._deltas % 64 == 0 or len(text) > 256:  # cheap enough per part, checked often
            self._cut = self._limits.over(self._deltas, self._size)

    def _on_part(self, part: StreamPart) -> None:
        if type(part) is TextPart:  # most parts: decided before the match's pattern tests
            if text := part.text:
                self._count(text)
                self._text.append(text)
                unsent = self._fresh_text
                fresh = self._redact_text.feed(text if unsent.past else unsent(text))
                if fresh:
                    opens = self._open is not _TEXT_START
                    if opens:
                        self._segment(_TEXT_START)
                    self._emitter.emit_text(_TEXT_DELTA, fresh, first=opens)
            return
        match part:
            case ReasoningPart(text=text) if text:
                self._count(text)
                self._reasoning.append(text)
                fresh = self._redact_reasoning.feed(self._fresh_reasoning(text))
                if fresh:
                    opens = self._open is not EventType.REASONING_START
                    self._segment(EventType.REASONING_START)
                    self._emitter.emit_text(EventType.REASONING_DELTA, fresh, first=opens)
            case ToolCallPart():
                self._count(part.arguments)
                self._close_segment()
                self._on_tool_fragment(part)
            case UsagePart():
                self._usage = part
            case _:
                pass  # empty text/reasoning deltas carry nothing

    def _on_tool_fragment(self, part: ToolCallPart) -> None:
        call = self._calls.get(part.index)
        if call is None:
            call = self._new_call(part)
        elif part.name and not call.name:
            call.name = part.name
        call.arguments.append(part.arguments)
        fresh = call.redact.feed(call.fresh(part.arguments))
        if fresh:
            self._emitter.emit(
                EventType.TOOL_CALL_GENERATING, ToolData(tool_call_id=call.id, arguments=fresh)
            )

    def _new_call(self, part: ToolCallPart) -> _Call:
        earlier = self._before.tool_calls
        if part.index < len(earlier):  # the client already has a card for this call
            known = earlier[part.index]
            call = _Call(
                known.id, part.name or known.name, self._redactor(), fresh=_Fresh(known.arguments)
            )
        else:
            call = _Call(
                part.id or f"{self._prefix}_{part.index}", part.name or "", self._redactor()
            )
            self._emitter.emit(
                EventType.TOOL_CALL_GENERATING,
                ToolData(tool_call_id=call.id, tool_name=call.name, arguments=""),
            )
        self._calls[part.index] = call
        return call

    def _redactor(self) -> StreamRedactor:
        return StreamRedactor(self._emitter.redactor)

    def _segment(self, start: EventType) -> None:
        if self._open == start:
            return
        self._close_segment()
        self._open = start
        if start == EventType.TEXT_START:
            continues, replaces = self._fresh_text.link()
            self._emitter.emit(start, TextData(continues=continues, replaces=replaces))
        else:
            continues, replaces = self._fresh_reasoning.link()
            self._emitter.emit(start, ReasoningData(continues=continues, replaces=replaces))

    def _close_segment(self) -> None:
        if self._open == EventType.TEXT_START:
            if rest := self._redact_text.flush():
                self._emitter.emit_text(EventType.TEXT_DELTA, rest)
            self._emitter.emit(EventType.TEXT_END, TextData())
        elif self._open == EventType.REASONING_START:
            if rest := self._redact_reasoning.flush():
                self._emitter.emit_text(EventType.REASONING_DELTA, rest)
            self._emitter.emit(EventType.REASONING_END, ReasoningData())
        self._open = None

    def _flush_calls(self) -> None:
        for call in self._calls.values():
            if rest := call.redact.flush():
                self._emitter.emit(
                    EventType.TOOL_CALL_GENERATING, ToolData(tool_call_id=call.id, arguments=rest)
                )


async def _closed(parts: AsyncIterator[StreamPart]) -> None:
    """End the provider's stream (and its HTTP response) before the model has finished."""
    close = getattr(parts, "aclose", None)
    if close is not None:
        await close()
