"""Builds a run's envelopes (step, running token total) and appends them to the log."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from ..events import AgentEvent, EventData, EventType
from ..events.encoding import text_rest
from ..events.redact import Redactor
from ..store import EventLog

# Timestamps are formatted once per millisecond, not per event.
_formatted_ms = -1
_formatted = ""


def _timestamp() -> str:
    """An envelope timestamp: UTC, milliseconds."""
    global _formatted_ms, _formatted
    ms = time.time_ns() // 1_000_000
    if ms != _formatted_ms:
        moment = datetime.fromtimestamp(ms // 1000, UTC).replace(microsecond=ms % 1000 * 1000)
        _formatted_ms = ms
        _formatted = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return _formatted


_DELTAS = {
    EventType.TEXT_DELTA: ("text", EventType.TEXT_DELTA.value),
    EventType.REASONING_DELTA: ("reasoning", EventType.REASONING_DELTA.value),
}
"""Data type and plain-str name of each delta (an enum's ``.value`` is a slow descriptor)."""


class RunEmitter:
    """The only way the runtime publishes: every event goes to the log first."""

    def __init__(self, log: EventLog, request_id: str) -> None:
        self._log = log
        self.request_id = request_id
        self._request_id_json = json.dumps(request_id)
        self.step: int | None = None
        self.total_tokens: int | None = None

    @property
    def redactor(self) -> Redactor:
        """The log's redactor, for text that arrives in fragments."""
        return self._log.redactor

    def emit(self, event_type: EventType, data: EventData) -> int:
        """Append without waiting for durability (streaming deltas); returns the seq."""
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

    def emit_text(self, event_type: EventType, text: str) -> int:
        """:meth:`emit` of a TEXT_DELTA or REASONING_DELTA, the bulk of a run's events.

        ``text`` comes out of a :class:`StreamRedactor`. When its JSON has no escape, the
        envelope holds it verbatim next to fields the server made, so the log need not search
        the whole envelope for secrets again.
        """
        kind, name = _DELTAS[event_type]
        rest = text_rest(
            self._request_id_json, kind, text, _timestamp(), self.step, self.total_tokens
        )
        return self._log.append_encoded(self.request_id, name, rest, redacted="\\" not in rest)

    async def emit_durable(self, event_type: EventType, data: EventData) -> int:
        """Append and wait until it (and everything before it) is durable."""
        seq = self.emit(event_type, data)
        await self._log.flush()
        return seq

    async def flush(self) -> None:
        """Wait until everything emitted is durable."""
        await self._log.flush()
