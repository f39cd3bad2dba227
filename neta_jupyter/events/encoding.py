"""Wire encodings of the envelope: SSE frames, WebSocket/comm JSON, and a tolerant decoder."""

from __future__ import annotations

import json
from collections.abc import Iterable
from json.encoder import encode_basestring as _json_string
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .models import DATA_TYPES, AgentEvent, EventType

_KNOWN_EVENT_TYPES = frozenset(EventType)


def encode_json(event: AgentEvent, seq: int | None = None) -> str:
    """The envelope as compact JSON (camelCase, nulls left out to keep frames small).

    With ``seq``, the envelope of ``event`` numbered ``seq``: the same text as encoding a copy
    with that seq, without the cost of copying the model for every event appended.
    """
    if seq is None or event.seq is not None:
        if seq is not None:
            event = event.model_copy(update={"seq": seq})
        return event.model_dump_json(by_alias=True, exclude_none=True)
    return numbered(event.event_type.value, seq, envelope_rest(event))


def envelope_rest(event: AgentEvent) -> str:
    """The envelope of an unnumbered ``event`` after its ``eventType``.

    :func:`numbered` completes it once the log has chosen the seq.
    """
    body = event.model_dump_json(by_alias=True, exclude_none=True)
    # eventType is the envelope's first field, so the rest starts right after it.
    return body[len(event.event_type.value) + len('{"eventType":"",') :]


def numbered(event_type: str, seq: int, rest: str) -> str:
    """The full envelope: eventType, then seq (the second field), then ``rest``."""
    return f'{{"eventType":"{event_type}","seq":{seq},{rest}'


def text_rests(
    request_id_json: str,
    kind: str,
    texts: Iterable[str],
    timestamp: str,
    step: int | None,
    total_tokens: int | None,
) -> list[str]:
    """:func:`envelope_rest` of text or reasoning deltas, built without a model.

    The deltas share their timestamp, step and total. Deltas are most of a run's events; this
    is the same text pydantic writes for them (a test compares the two over awkward strings) at
    a fraction of the cost.
    """
    tail = "}"
    if total_tokens is not None:
        tail = f',"totalTokens":{total_tokens}}}'
    if step is not None:
        tail = f',"step":{step}{tail}'
    head = f'"requestId":{request_id_json},"data":{{"type":"{kind}","text":'
    tail = f'}},"timestamp":"{timestamp}"{tail}'
    return [f"{head}{_json_string(text)}{tail}" for text in texts]


def sse_frame(event_type: str, payload: str, seq: int | None) -> str:
    """One SSE message; a ``None`` seq (HEARTBEAT) writes no ``id:`` line.

    ``payload`` is already compact JSON, so it never contains a newline.
    """
    if seq is None:
        return f"event: {event_type}\ndata: {payload}\n\n"
    return f"id: {seq}\nevent: {event_type}\ndata: {payload}\n\n"


def sse_frames(events: Iterable[tuple[int, str, str]]) -> str:
    """Consecutive SSE messages for ``(seq, eventType, envelope)`` rows, in one string.

    A row with a negative seq was never stored (a live status): it is sent without an ``id:``.
    """
    return "".join(
        [
            f"id: {seq}\nevent: {kind}\ndata: {payload}\n\n"
            if seq >= 0
            else f"event: {kind}\ndata: {payload}\n\n"
            for seq, kind, payload in events
        ]
    )


def sse_error_frame(message: str, code: str | None = None) -> str:
    """The seed-003 console error: ``event: error``, the message in a comment.

    Its data is empty, or, with ``code``, ``{"errCode", "message"}`` (for clients that cannot
    read comments).
    """
    safe = " ".join(message.splitlines())
    data = json.dumps({"errCode": code, "message": safe}) if code is not None else ""
    return f": {safe}\nevent: error\ndata: {data}\n\n"


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
