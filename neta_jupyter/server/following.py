"""What the SSE and WebSocket transports share when they follow a run's log."""

from __future__ import annotations

from ..events import TERMINAL_EVENT_TYPES, AgentEvent, EventType, HeartbeatData, encode_json
from ..store import EventRow


def heartbeat_json(request_id: str) -> str:
    """A HEARTBEAT envelope (never stored, no seq)."""
    return encode_json(
        AgentEvent(event_type=EventType.HEARTBEAT, request_id=request_id, data=HeartbeatData())
    )


def until_terminal(batch: list[EventRow]) -> tuple[list[EventRow], bool]:
    """The batch cut after its first terminal event, and whether one was found."""
    types = [kind for _, kind, _ in batch]
    if TERMINAL_EVENT_TYPES.isdisjoint(types):  # the usual case, decided without a loop in Python
        return batch, False
    end = next(index for index, kind in enumerate(types) if kind in TERMINAL_EVENT_TYPES) + 1
    return batch[:end], True
