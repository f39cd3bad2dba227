"""What goes to the views: batched envelopes of a run, and the following of a child run.

Every message goes through :func:`~.comm.outgoing`; a run's envelopes leave at most once per
:data:`BATCH_INTERVAL` (jupyter_server drops bursts of over 1000 messages a second).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from .comm import ErrorMessage, EventsMessage, KernelMessage

BATCH_INTERVAL = 0.05
"""Seconds between two event messages to a view (jupyter_server drops bursts over 1000/s)."""
MAX_BATCH = 500
"""Envelopes in one message; a long replay is split."""
FOLLOW_BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Seconds between looks at a child run at rest that may go on (suspended, retryable)."""

_log = logging.getLogger(__name__)


class Outbox:
    """Envelopes of one run on their way to the views, at most one message per BATCH_INTERVAL."""

    def __init__(
        self, send: Callable[[KernelMessage], None], request_id: str | None = None
    ) -> None:
        self._send = send
        self._request_id = request_id
        self._pending: list[dict[str, Any]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._last_sent = float("-inf")

    def push(self, events: Sequence[dict[str, Any]]) -> None:
        """Queue envelopes; sent within BATCH_INTERVAL of the message before."""
        if not events:
            return
        self._pending.extend(events)
        if self._timer is None:
            self._send_soon(at_once=False)

    def flush(self) -> None:
        """Send what is queued as soon as the rate limit allows."""
        if self._pending and self._timer is None:
            self._send_soon(at_once=True)

    def _send_soon(self, *, at_once: bool) -> None:
        """Send once BATCH_INTERVAL has passed since the last message (outside a loop: now).

        ``at_once``: when it has passed already, send in this call rather than on the loop.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._flush()
            return
        delay = self._last_sent + BATCH_INTERVAL - loop.time()
        if at_once and delay <= 0:
            self._flush()
        else:
            self._timer = loop.call_later(max(0.0, delay), self._flush)

    def clear(self) -> None:
        """Forget what is queued (a replay sends it again)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending = []

    def send_now(self, events: Sequence[dict[str, Any]]) -> None:
        """Send ``events`` at once, split into messages of at most MAX_BATCH."""
        for start in range(0, len(events), MAX_BATCH):
            batch = list(events[start : start + MAX_BATCH])
            self._send(EventsMessage(kind="events", events=batch, request_id=self._request_id))
        with contextlib.suppress(RuntimeError):
            self._last_sent = asyncio.get_running_loop().time()

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        self.send_now(batch)


class RunSource(Protocol):
    """Where a child run's envelopes come from (the widget's feed)."""

    def follow_run(self, request_id: str, after_seq: int) -> AsyncIterator[dict[str, Any]]:
        """Envelopes after ``after_seq`` up to the run's next terminal event."""
        ...


def ends_for_good(envelope: dict[str, Any]) -> bool:
    """Whether no event can follow ``envelope`` in its run (completed, or failed for good)."""
    event_type = envelope.get("eventType")
    data = envelope.get("data")
    recoverable = isinstance(data, dict) and data.get("recoverable") is True
    return event_type == "MESSAGE_COMPLETED" or (event_type == "MESSAGE_FAILED" and not recoverable)


class ChildFollower:
    """Sends a child run's events to the views that opened it, until it ends or is stopped.

    A suspended child goes on after someone answers it (here or elsewhere): the follower looks
    again at once after an action of a view (:meth:`poke`), and now and then otherwise.
    """

    def __init__(
        self, source: RunSource, request_id: str, send: Callable[[KernelMessage], None]
    ) -> None:
        self.request_id = request_id
        self._source = source
        self._send = send
        self._outbox = Outbox(send, request_id)
        self._kick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self, after_seq: int) -> bool:
        """Follow from ``after_seq`` on the running loop; False when there is none."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        self._task = loop.create_task(self._run(after_seq), name=f"neta-child-{self.request_id}")
        return True

    def poke(self) -> None:
        """Look for new events now (an action on the child was accepted)."""
        self._kick.set()

    def stop(self) -> None:
        """Send nothing more."""
        if self._task is not None:
            self._task.cancel()
        self._outbox.clear()

    async def _run(self, last: int) -> None:
        pause = 0
        while True:
            try:
                received, last, ended = await self._segment(last)
            except Exception as exc:
                _log.warning("run widget: cannot follow %s: %s", self.request_id, exc)
                self._outbox.flush()
                message = str(exc) or type(exc).__name__
                self._send(ErrorMessage(kind="error", message=message, request_id=self.request_id))
                return
            self._outbox.flush()
            if ended:
                return
            if received:
                pause = 0
                continue
            delay = FOLLOW_BACKOFF[min(pause, len(FOLLOW_BACKOFF) - 1)]
            pause += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), delay)
            self._kick.clear()

    async def _segment(self, last: int) -> tuple[bool, int, bool]:
        """One stream segment: (anything new, the last seq sent, the run ended for good)."""
        received = False
        async for envelope in self._source.follow_run(self.request_id, last):
            seq = envelope.get("seq")
            if not isinstance(seq, int) or seq <= last:
                continue
            last, received = seq, True
            self._outbox.push([envelope])
            if ends_for_good(envelope):
                return received, last, True
        return received, last, False
