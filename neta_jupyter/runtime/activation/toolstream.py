"""A tool's side channel (TOOL_EVENT): its partial output, batched, and credentials it lacks.

:class:`ToolOutputStream` turns what a tool writes while it runs (a skill's stdout lines, what a
``python`` cell prints) into ``tool_stream_data`` events. Like process events it is throttled:
the first output goes out at once, later output is gathered and goes out once per interval, and
closing the stream (when the call ends) lets the rest out before the call's TOOL_COMPLETED or
TOOL_FAILED. Only whole lines leave before the end, so a secret printed in two writes is still
one string when the log's redaction reads it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...events import EventType, ToolSideData
from ...providers.base import AuthenticationRequired
from ..log.emitter import RunEmitter
from .process import DEFAULT_INTERVAL, sanitize_payload

STREAM_DATA = "tool_stream_data"
AUTH_REQUIRED = "auth_required"
MODEL_CALL_ID = "model"
"""``toolCallId`` of the side events of the run's model (not of a tool call)."""

MAX_BATCH_CHARS = 16_000
"""Characters of one event; more waiting output goes out at once, in events of this size."""
MAX_STREAMED_CHARS = 400_000
"""Characters streamed per call; the rest is only in the result (a runaway loop is cut)."""


class ToolOutputStream:
    """Partial output of one tool call, published as batched ``tool_stream_data`` events.

    Each event's payload is ``{"text": …, "index": n}`` (``n`` counts the call's events from
    0); the last one says ``"truncated": true`` with ``droppedChars`` when output was cut.
    """

    def __init__(
        self,
        emitter: RunEmitter,
        tool_call_id: str,
        tool_name: str,
        *,
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self._emitter = emitter
        self._call_id = tool_call_id
        self._tool_name = tool_name
        self._interval = interval
        self._pending = ""
        self._index = 0
        self._sent = 0
        self._dropped = 0
        self._last_emit: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def write(self, text: str) -> None:
        """Offer output; it goes out now, or with the next batch."""
        if self._closed or not text:
            return
        room = MAX_STREAMED_CHARS - self._sent - len(self._pending)
        if room < len(text):
            self._dropped += len(text) - max(room, 0)
            text = text[: max(room, 0)]
        self._pending += text
        while len(self._pending) >= MAX_BATCH_CHARS:
            self._release(MAX_BATCH_CHARS)
        if self._timer is not None:
            return  # the batch under way takes it
        now = _clock()
        if self._last_emit is None or now - self._last_emit >= self._interval:
            end = self._pending.rfind("\n") + 1
            if end:
                self._release(end)
            if self._pending:  # a line still being written goes out with the next batch
                self._timer = _schedule(self._interval, self._due)
        else:
            self._timer = _schedule(self._last_emit + self._interval - now, self._due)

    def close(self) -> None:
        """Let everything out (the call ended); later writes are dropped."""
        if self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending or self._dropped:
            self._release(len(self._pending), last=True)
        self._closed = True

    def _due(self) -> None:
        self._timer = None
        if not self._closed and self._pending:
            self._release(len(self._pending))

    def _release(self, end: int, *, last: bool = False) -> None:
        chunk, self._pending = self._pending[:end], self._pending[end:]
        payload: dict[str, Any] = {"text": chunk, "index": self._index}
        if last and self._dropped:
            payload |= {"truncated": True, "droppedChars": self._dropped}
        self._index += 1
        self._sent += len(chunk)
        self._last_emit = _clock()
        self._emitter.emit(
            EventType.TOOL_EVENT,
            ToolSideData(
                tool_call_id=self._call_id,
                tool_name=self._tool_name,
                category=STREAM_DATA,
                payload=payload,
            ),
        )


def auth_required_event(
    tool_call_id: str,
    tool_name: str,
    user_message: str,
    payload: dict[str, Any] | None = None,
) -> ToolSideData:
    """The ``auth_required`` side event: who lacks credentials and what the user should do."""
    return ToolSideData(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        category=AUTH_REQUIRED,
        payload=None if payload is None else sanitize_payload(payload),
        user_message=user_message,
    )


def model_auth_event(exc: AuthenticationRequired) -> ToolSideData:
    """``auth_required`` of the run's model endpoint (``toolCallId`` :data:`MODEL_CALL_ID`)."""
    payload = {"model": exc.model} | ({"variable": exc.variable} if exc.variable else {})
    return auth_required_event(MODEL_CALL_ID, "model", exc.user_message, payload)


def _clock() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return 0.0


def _schedule(delay: float, callback: Any) -> asyncio.TimerHandle | None:
    """A timer on the running loop; without one, closing the stream lets the output out."""
    try:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)
    except RuntimeError:
        return None
