"""Following a run's log with heartbeats, shared by the SSE and WebSocket transports."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ..events import TERMINAL_EVENT_TYPES, AgentEvent, EventType, HeartbeatData, encode_json
from ..store import EventLog
from ..store.db import EventRow

Tick = list[EventRow] | None
"""A batch of stored ``(seq, event_type, payload)``, or ``None`` when a heartbeat is due."""


def heartbeat_json(request_id: str) -> str:
    """A HEARTBEAT envelope (never stored, no seq)."""
    return encode_json(
        AgentEvent(event_type=EventType.HEARTBEAT, request_id=request_id, data=HeartbeatData())
    )


async def follow_with_heartbeat(
    log: EventLog, request_id: str, after_seq: int, interval: float, stop: asyncio.Event
) -> AsyncIterator[Tick]:
    """Batches as they become durable; ``None`` after ``interval`` seconds without any.

    Ends as soon as ``stop`` is set (the client went away), even while waiting.
    """
    stream = log.follow(request_id, after_seq)
    pending: asyncio.Future[list[EventRow]] | None = None
    stopper = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            if pending is None:
                pending = asyncio.ensure_future(anext(stream))
            waiting: set[asyncio.Future[Any]] = {pending, stopper}
            done, _ = await asyncio.wait(
                waiting, timeout=interval, return_when=asyncio.FIRST_COMPLETED
            )
            if stopper in done:
                return
            if not done:
                yield None
                continue
            batch, pending = pending.result(), None
            yield batch
    finally:
        stopper.cancel()
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        await stream.aclose()  # type: ignore[attr-defined]


def until_terminal(batch: list[EventRow]) -> tuple[list[EventRow], bool]:
    """The batch cut after its first terminal event, and whether one was found."""
    types = [kind for _, kind, _ in batch]
    if TERMINAL_EVENT_TYPES.isdisjoint(types):  # the usual case, decided without a loop in Python
        return batch, False
    end = next(index for index, kind in enumerate(types) if kind in TERMINAL_EVENT_TYPES) + 1
    return batch[:end], True
