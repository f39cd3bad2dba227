"""One shared translation of provider stream parts into events, accumulating the reply."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ..events import EventType, ReasoningData, TextData, ToolData
from ..providers.base import (
    ReasoningPart,
    StreamPart,
    TextPart,
    ToolCall,
    ToolCallPart,
    UsagePart,
)
from .emitter import RunEmitter


@dataclass(slots=True)
class _PendingCall:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Reply:
    """Everything one model reply produced."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: UsagePart | None = None


class ReplyStreamer:
    """Emits REASONING_* / TEXT_* / TOOL_CALL_GENERATING as parts arrive; closes open segments."""

    def __init__(self, emitter: RunEmitter, call_id_prefix: str) -> None:
        self._emitter = emitter
        self._prefix = call_id_prefix
        self._open: EventType | None = None  # TEXT_START or REASONING_START while a segment is open
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _PendingCall] = {}
        self._usage: UsagePart | None = None

    async def consume(self, parts: AsyncIterator[StreamPart]) -> Reply:
        """Drain the provider stream; on an exception the open segment is still closed."""
        try:
            async for part in parts:
                self._on_part(part)
        finally:
            self._close_segment()
        return Reply(
            text="".join(self._text),
            reasoning="".join(self._reasoning),
            tool_calls=[
                ToolCall(c.id, c.name, "".join(c.arguments)) for _, c in sorted(self._calls.items())
            ],
            usage=self._usage,
        )

    @property
    def produced_output(self) -> bool:
        """Whether any text, reasoning or tool call came out so far."""
        return bool(self._text or self._reasoning or self._calls)

    def _on_part(self, part: StreamPart) -> None:
        match part:
            case TextPart(text=text) if text:
                self._segment(EventType.TEXT_START)
                self._text.append(text)
                self._emitter.emit(EventType.TEXT_DELTA, TextData(text=text))
            case ReasoningPart(text=text) if text:
                self._segment(EventType.REASONING_START)
                self._reasoning.append(text)
                self._emitter.emit(EventType.REASONING_DELTA, ReasoningData(text=text))
            case ToolCallPart():
                self._close_segment()
                self._on_tool_fragment(part)
            case UsagePart():
                self._usage = part
            case _:
                pass  # empty text/reasoning deltas carry nothing

    def _on_tool_fragment(self, part: ToolCallPart) -> None:
        call = self._calls.get(part.index)
        if call is None:
            call_id = part.id or f"{self._prefix}_{part.index}"
            call = self._calls[part.index] = _PendingCall(call_id, part.name or "")
            self._emitter.emit(
                EventType.TOOL_CALL_GENERATING,
                ToolData(tool_call_id=call.id, tool_name=call.name, arguments=part.arguments),
            )
        else:
            if part.name and not call.name:
                call.name = part.name
            if not part.arguments:
                return
            self._emitter.emit(
                EventType.TOOL_CALL_GENERATING,
                ToolData(tool_call_id=call.id, arguments=part.arguments),
            )
        call.arguments.append(part.arguments)

    def _segment(self, start: EventType) -> None:
        if self._open == start:
            return
        self._close_segment()
        self._open = start
        if start == EventType.TEXT_START:
            self._emitter.emit(start, TextData())
        else:
            self._emitter.emit(start, ReasoningData())

    def _close_segment(self) -> None:
        if self._open == EventType.TEXT_START:
            self._emitter.emit(EventType.TEXT_END, TextData())
        elif self._open == EventType.REASONING_START:
            self._emitter.emit(EventType.REASONING_END, ReasoningData())
        self._open = None
