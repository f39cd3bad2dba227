"""Builds a run's envelopes (step, running token total) and appends them to the log."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any, Literal

from ...events import AgentEvent, AgentStatusData, EventData, EventType, LoopPhase, StatusCode
from ...events.encoding import text_rests
from ...events.redact import Redactor
from ...store import EventLog

# Timestamps are formatted once per millisecond, not per event, and the date and time once per
# second: at a model's pace every event falls in a millisecond of its own.
_formatted_ms = -1
_formatted = ""
_second = -1
_second_text = ""


def _timestamp() -> str:
    """An envelope timestamp: UTC, milliseconds."""
    global _formatted_ms, _formatted, _second, _second_text
    ms = time.time_ns() // 1_000_000
    if ms != _formatted_ms:
        second, milli = divmod(ms, 1000)
        if second != _second:
            _second = second
            _second_text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _formatted_ms = ms
        _formatted = f"{_second_text}.{milli:03d}Z"
    return _formatted


_DELTAS = {
    EventType.TEXT_DELTA: ("text", EventType.TEXT_DELTA.value),
    EventType.REASONING_DELTA: ("reasoning", EventType.REASONING_DELTA.value),
}
"""Data type and plain-str name of each delta (an enum's ``.value`` is a slow descriptor)."""


_MAX_DELTAS = 512
"""Deltas held before they are appended even though the current callback has not returned."""
_QUIET = 0.001
"""Seconds after a run's previous delta past which a delta is appended at once, not batched."""
_clock = time.monotonic


class RunEmitter:
    """The only way the runtime publishes: every event goes to the log first.

    Text and reasoning deltas are appended in batches: those emitted during one callback of the
    event loop go to the log together when it returns (or before any other event, or a wait for
    durability), which is before anything else could read the log, so batching changes neither
    the order of events nor when a client can see them, and costs each delta far less. A delta
    that follows a pause (a model's pace: one per callback) is appended at once, saving the
    callback that would append it alone.
    """

    def __init__(self, log: EventLog, request_id: str) -> None:
        self._log = log
        self.request_id = request_id
        self._request_id_json = json.dumps(request_id)
        self.step: int | None = None
        self.total_tokens: int | None = None
        self.phase: LoopPhase | None = None
        """The loop's phase, as PHASE_CHANGED last said (:mod:`.decisions`)."""
        self.stop_decided = False
        """STOP_REASON_DECIDED was sent: the activation ends with the terminal event next."""
        self._deltas: list[str] = []
        self._deltas_of: tuple[EventType, int | None, int | None] | None = None
        self._flush_scheduled = False
        self._last_delta = 0.0

    @property
    def log(self) -> EventLog:
        """The log the run's events go to (other streams of the run's session live there too)."""
        return self._log

    @property
    def redactor(self) -> Redactor:
        """The log's redactor, for text that arrives in fragments."""
        return self._log.redactor

    def emit(self, event_type: EventType, data: EventData) -> int:
        """Append without waiting for durability (streaming deltas); returns the seq."""
        if self._deltas:
            self._append_deltas()
        return self._log.append_nowait(
            AgentEvent(
                event_type=event_type,
                request_id=self.request_id,
                data=data,
                timestamp=_timestamp(),
                step=self.step,
                total_tokens=self.total_tokens,
            )
        )

    def emit_text(self, event_type: EventType, text: str, *, first: bool = False) -> None:
        """:meth:`emit` of a TEXT_DELTA or REASONING_DELTA, the bulk of a run's events.

        ``text`` comes out of a :class:`StreamRedactor`. ``first``: the delta opens a segment
        whose start event was just emitted; it is appended at once, so both share one commit
        (appended later, it would wait for a second commit behind the first).
        """
        deltas = self._deltas
        of = (event_type, self.step, self.total_tokens)
        if of != self._deltas_of:
            if deltas:
                self._append_deltas()
            self._deltas_of = of
        deltas.append(text)
        if first or len(deltas) >= _MAX_DELTAS:
            self._append_deltas()
        elif not self._flush_scheduled:
            now = _clock()
            if now - self._last_delta > _QUIET:
                # A model's pace: nothing else comes in this callback to share the append with.
                self._append_deltas()
            else:
                self._schedule_append()
            self._last_delta = now

    def _append_deltas(self) -> None:
        """Append the deltas emitted so far."""
        if not self._deltas or self._deltas_of is None:
            return
        event_type, step, total_tokens = self._deltas_of
        kind, name = _DELTAS[event_type]
        rests = text_rests(
            self._request_id_json, kind, self._deltas, _timestamp(), step, total_tokens
        )
        self._deltas.clear()
        # Delta texts are already redacted. When their JSON has no escape, each envelope holds
        # one verbatim next to fields the server made, so the log need not search them again.
        redacted = not any("\\" in rest for rest in rests)
        self._log.append_encoded_many(self.request_id, name, rests, redacted=redacted)

    def _schedule_append(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: _MAX_DELTAS, the next event or a flush appends them
        self._flush_scheduled = True
        loop.call_soon(self._scheduled_append)

    def _scheduled_append(self) -> None:
        self._flush_scheduled = False
        self._append_deltas()

    def keeps_up(self) -> bool:
        """Whether the store keeps up with what was appended (it is not far behind)."""
        return self._log.room() is None

    async def keep_pace(self) -> None:
        """Let the event loop run; while the store is far behind, wait for it to catch up."""
        self._append_deltas()
        behind = self._log.room()
        if behind is None:
            await asyncio.sleep(0)
        else:
            await behind

    async def emit_durable(self, event_type: EventType, data: EventData) -> int:
        """Append and wait until it (and everything before it) is durable."""
        seq = self.emit(event_type, data)
        await self._log.flush()
        return seq

    async def flush(self) -> None:
        """Wait until everything emitted is durable."""
        self._append_deltas()
        await self._log.flush()


async def status(emitter: RunEmitter, code: StatusCode, message: str, **attributes: Any) -> None:
    """Publish an AGENT_STATUS (transient: never part of the transcript)."""
    info = code in (StatusCode.CONTEXT_COMPACTING, StatusCode.IMPORTING_ATTACHMENTS)
    level: Literal["INFO", "WARN"] = "INFO" if info else "WARN"
    await emitter.emit_durable(
        EventType.AGENT_STATUS,
        AgentStatusData(code=code, level=level, message=message, attributes=attributes),
    )
