"""Wire encodings of the envelope: SSE frames, WebSocket/comm JSON, and a tolerant decoder."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .models import DATA_TYPES, AgentEvent, EventType

_KNOWN_EVENT_TYPES = frozenset(EventType)


def encode_json(event: AgentEvent, seq: int | None = None) -> str:
    """The envelope as compact JSON (camelCase, nulls left out to keep frames small).

    With ``seq``, the envelope of ``event`` numbered ``seq``: the same text as encoding a copy
    with that seq, without the cost of copying the model for every event appended.
    """
    body = event.model_dump_json(by_alias=True, exclude_none=True)
    if seq is None:
        return body
    # seq is the envelope's second field, so it goes right after eventType.
    head = f'{{"eventType":"{event.event_type.value}",'
    if event.seq is None and body.startswith(head):
        return f'{head}"seq":{seq},{body[len(head) :]}'
    return encode_json(event.model_copy(update={"seq": seq}))


def sse_frame(event_type: str, payload: str, seq: int | None) -> str:
    """One SSE message; a ``None`` seq (HEARTBEAT) writes no ``id:`` line.

    ``payload`` is already compact JSON, so it never contains a newline.
    """
    if seq is None:
        return f"event: {event_type}\ndata: {payload}\n\n"
    return f"id: {seq}\nevent: {event_type}\ndata: {payload}\n\n"


def sse_frames(events: Iterable[tuple[int, str, str]]) -> str:
    """Consecutive SSE messages for stored ``(seq, eventType, envelope)`` rows, in one string."""
    return "".join(
        [f"id: {seq}\nevent: {kind}\ndata: {payload}\n\n" for seq, kind, payload in events]
    )


def sse_error_frame(message: str) -> str:
    """The seed-003 console error: ``event: error``, empty data, the message in a comment."""
    safe = " ".join(message.splitlines())
    return f": {safe}\nevent: error\ndata: \n\n"


def ws_batch(payloads: list[str]) -> str:
    """Several stored envelopes as one JSON array frame, without re-encoding them."""
    return "[" + ",".join(payloads) + "]"


def decode_event(raw: str | bytes | dict[str, Any]) -> AgentEvent | None:
    """Parse an envelope; unknown event types or ``data.type`` values give ``None``.

    Clients must keep consuming when the server adds something new (seed 003 §10), so this never
    raises on well-formed JSON of an unknown shape.
    """
    obj = json.loads(raw) if isinstance(raw, str | bytes) else raw
    if not isinstance(obj, dict) or obj.get("eventType") not in _KNOWN_EVENT_TYPES:
        return None
    data = obj.get("data")
    if not isinstance(data, dict) or data.get("type") not in DATA_TYPES:
        return None
    try:
        return AgentEvent.model_validate(obj)
    except ValidationError:
        return None


def catalogue_schema() -> dict[str, Any]:
    """JSON Schema of the envelope and every data body (the widget's types come from it)."""
    schema = TypeAdapter(AgentEvent).json_schema(by_alias=True, mode="serialization")
    schema["title"] = "AgentEvent"
    return schema
