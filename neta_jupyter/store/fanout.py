"""Live followers of the event log, above any backend.

A backend tells this layer what each write made durable; it keeps a bounded in-memory tail of
recent durable events per stream and a signal its followers wait on. A follower that keeps up is
served from the tail; one that falls behind it reads the backend instead, so a slow client costs
reads, not memory. Followers that are behind share each turn of the event loop between them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from ..events import (
    TERMINAL_EVENT_TYPES,
    AgentEvent,
    AgentStatusData,
    EventType,
    StatusCode,
    encode_json,
)
from .contract import EventRow

TRANSIENT_SEQ = -1
"""The seq of a row that is sent but never stored (it carries no id on the wire)."""

_STEP_EVENTS = 4096
"""Events that followers who are behind send per turn of the event loop, together."""
_MIN_STEP = 64
_EARLY = 0.001
"""A heartbeat's timer may fire this much before its deadline (the loop's clock resolution)."""


Push = Callable[[list[EventRow]], bool]
"""Writes a durable batch to a follower's client at once, from the commit that made it durable.

False when it did not take the batch (its client has not read what was sent before, or the batch
is one the follower's own task must send): the follower's task then sends it and what follows,
waiting for the client, until it is caught up again.
"""


class Reads(Protocol):
    """What followers read from a backend when the tail no longer holds what they need."""

    async def last_seq(self, stream: str) -> int:
        """Seq of the stream's last durable event, -1 when it has none."""
        ...

    async def read_after(self, stream: str, after: int, limit: int) -> list[EventRow]:
        """Up to ``limit`` durable events with seq > ``after``, in order."""
        ...


class Watcher(Protocol):
    """Reads streams written by other processes as they grow (a shared store's tailer)."""

    async def watch(self, stream: str, after: int) -> None:
        """Tell the fan-out the stream's events after seq ``after`` as they become durable."""
        ...

    def unwatch(self, stream: str) -> None:
        """Read the stream no more."""
        ...


class _Pusher:
    """A caught-up follower written to from the commit itself, and its task waiting meanwhile."""

    __slots__ = ("beat", "pos", "push", "waiter")

    def __init__(self, push: Push, beat: _Beat | None) -> None:
        self.push = push
        self.beat = beat
        self.pos = -1
        self.waiter: asyncio.Future[bool] | None = None

    def detach(self) -> None:
        """Wake the follower's task: it sends the next batches itself."""
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(False)


class _Tail:
    """Recent durable events of one stream (contiguous seqs) and the followers waiting on it."""

    __slots__ = ("ended", "events", "last", "pushers", "readers", "waiters")

    def __init__(self, last: int) -> None:
        self.events: list[EventRow] = []
        self.last = last
        self.waiters: list[asyncio.Future[bool]] = []
        self.pushers: list[_Pusher] = []
        self.readers = 0
        self.ended = -1
        """Seq of a terminal event whose segment is dropped once no follower reads it."""

    def after(self, seq: int, limit: int) -> list[EventRow] | None:
        """Up to ``limit`` events after ``seq`` if the tail still holds them, else None."""
        events = self.events
        if not events or seq + 1 < events[0][0]:
            return None
        start = seq + 1 - events[0][0]
        return events[start : start + limit]

    def drop_ended(self) -> None:
        """Forget the events up to the last terminal one (they are in the store)."""
        events = self.events
        if events and events[0][0] <= self.ended:
            del events[: self.ended + 1 - events[0][0]]
        self.ended = -1

    def wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(False)

    def push(self, rows: list[EventRow]) -> None:
        """Write ``rows`` (just after ``last``) to every pushed follower that takes them.

        One pass over the followers from the commit: no task wakes up for a batch, only for a
        follower that does not take it (it is behind, or the batch ends its stream).
        """
        first, last = rows[0][0] - 1, rows[-1][0]
        deadline = -1.0
        kept: list[_Pusher] = []
        for pusher in self.pushers:
            try:
                took = pusher.pos == first and pusher.push(rows)
            except Exception:  # its task meets the same fault when it writes, and ends
                took = False
            if not took:
                pusher.detach()
                continue
            pusher.pos = last
            beat = pusher.beat
            if beat is not None:
                if deadline < 0:
                    deadline = beat.loop.time()
                beat.deadline = deadline + beat.interval
            kept.append(pusher)
        self.pushers = kept

    async def attach(self, pusher: _Pusher, pos: int) -> int:
        """Push to ``pusher`` from ``pos`` on until it is detached (or a heartbeat is due).

        The position it reached.
        """
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        pusher.waiter, pusher.pos = waiter, pos
        self.pushers.append(pusher)
        if pusher.beat is not None:
            pusher.beat.arm(waiter)
        try:
            await waiter
        finally:
            pusher.waiter = None
            with contextlib.suppress(ValueError):
                self.pushers.remove(pusher)
        return pusher.pos

    def detach_all(self) -> None:
        pushers, self.pushers = self.pushers, []
        for pusher in pushers:
            pusher.detach()

    async def wait(self, beat: _Beat | None) -> None:
        """Until the tail grows (or ``beat`` says a heartbeat is due)."""
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        if beat is not None:
            beat.arm(waiter)
        try:
            by_beat = await waiter
        except BaseException:
            self._drop(waiter)
            raise
        if by_beat:
            self._drop(waiter)

    def _drop(self, waiter: asyncio.Future[bool]) -> None:
        with contextlib.suppress(ValueError):
            self.waiters.remove(waiter)


class _Beat:
    """When a follower's next heartbeat is due, without a timer per wait.

    A busy server wakes each follower at every commit; a timer made and cancelled per wait
    (``asyncio.timeout``) cost more than the rest of the wait. The follower moves its deadline
    (a float) instead, and one timer, when it fires before the deadline, sets itself again for it.
    """

    __slots__ = ("deadline", "handle", "interval", "loop", "waiter")

    def __init__(self, interval: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.interval = interval
        self.deadline = self.loop.time() + interval
        self.handle: asyncio.TimerHandle | None = None
        self.waiter: asyncio.Future[bool] | None = None

    def sent(self) -> None:
        """Something was sent: the next heartbeat is due ``interval`` from now."""
        self.deadline = self.loop.time() + self.interval

    def due(self) -> bool:
        """Whether a heartbeat is due now (then the next one is ``interval`` later)."""
        if self.loop.time() < self.deadline - _EARLY:
            return False
        self.sent()
        return True

    def arm(self, waiter: asyncio.Future[bool]) -> None:
        """Wake ``waiter`` once the deadline passes."""
        self.waiter = waiter
        if self.handle is None:
            self.handle = self.loop.call_at(self.deadline, self._fire)

    def _fire(self) -> None:
        self.handle = None
        if self.loop.time() < self.deadline - _EARLY:
            self.handle = self.loop.call_at(self.deadline, self._fire)
        elif self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(True)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class Fanout:
    """The tails of the streams written or followed in this process, and their followers."""

    def __init__(self, reads: Reads, *, tail_size: int = 4096, read_batch: int = 512) -> None:
        self._reads = reads
        self._tails: dict[str, _Tail] = {}
        self._terminal: dict[str, int] = {}  # seq of each stream's latest terminal event
        self._followers = 0
        self._tail_size = tail_size
        # Followers behind the tail read this many rows at a time: few enough that little of a
        # replay is alive whenever the garbage collector runs (survivors make it scan the whole
        # heap), enough that a query and a flush are shared by many events.
        self._read_batch = read_batch
        self._unavailable: str | None = None
        self._health_changes = 0
        self.watcher: Watcher | None = None
        """Feeds the tails of streams other servers write (:meth:`remote`), when shared."""

    # --- told by the log and the backend

    def ending(self, stream: str, seq: int) -> None:
        """The event ``seq`` appended to ``stream`` ends a segment."""
        self._terminal[stream] = seq

    def remote(self, stream: str, rows: list[EventRow]) -> None:
        """``rows`` read of a stream that another server may write.

        Contiguous, starting at or before the seq after the last this process has.
        """
        for seq, kind, _ in reversed(rows):
            if kind in TERMINAL_EVENT_TYPES:
                self._terminal[stream] = max(seq, self._terminal.get(stream, -1))
                break
        self.durable(stream, rows)

    def durable(self, stream: str, rows: list[EventRow]) -> None:
        """``rows`` (contiguous, after the stream's last) became durable: followers may see them.

        Rows a follower may already have (told both by this process's writer and by the tailer
        of a shared store) are left out.
        """
        tail = self._tails.get(stream)
        if tail is None:
            tail = self._tails[stream] = _Tail(rows[0][0] - 1)
        elif rows[0][0] <= tail.last:
            rows = rows[tail.last + 1 - rows[0][0] :]
            if not rows:
                return
        events = tail.events
        events += rows
        tail.last = rows[-1][0]
        ended = self._terminal.get(stream, -1)
        if events and events[0][0] <= ended <= tail.last:
            # A finished segment's events live in the store only, once its followers (who may
            # be behind) have read them from here.
            tail.ended = ended
            if not tail.readers:
                tail.drop_ended()
        if len(events) > 2 * self._tail_size:
            del events[: len(events) - self._tail_size]
        if tail.pushers:
            tail.push(rows)
        tail.wake()

    def health_changed(self, reason: str | None) -> None:
        """Writes fail (``reason``) or work again: every follower tells its client."""
        self._unavailable = reason
        self._health_changes += 1
        for tail in self._tails.values():
            tail.detach_all()
            tail.wake()

    def last_seq(self, stream: str) -> int | None:
        """Seq of the stream's last durable event if this process knows it, else None."""
        tail = self._tails.get(stream)
        return None if tail is None else tail.last

    def forget(self, stream: str) -> None:
        """Drop the stream's tail unless someone follows it (its events are gone from the store)."""
        tail = self._tails.get(stream)
        if tail is not None and not tail.readers:
            del self._tails[stream]
            if self.watcher is not None:
                self.watcher.unwatch(stream)

    # --- following

    async def follow(
        self,
        stream: str,
        after: int,
        *,
        heartbeat: float | None = None,
        push: Push | None = None,
    ) -> AsyncIterator[list[EventRow]]:
        """Batches of ``(seq, event_type, payload)`` after ``after``: stored, then live.

        With ``heartbeat``: an empty batch after each ``heartbeat`` seconds without one, and,
        while the store cannot be written, a batch of one unstored AGENT_STATUS (seq -1) saying
        why the stream is quiet. A read that fails raises
        :class:`~neta_jupyter.store.health.StorageError`.

        A follower that keeps up waits on the stream's tail alone: no task or timer of its own
        beyond one heartbeat timer, since a busy server wakes hundreds of them per commit. With
        ``push``, once caught up it is not even woken: the commit hands each batch to ``push``
        (see :data:`Push`), and only the batches ``push`` does not take are yielded.
        """
        pos = after
        tail: _Tail | None = None
        told = 0
        beat = _Beat(heartbeat) if heartbeat is not None else None
        pusher = _Pusher(push, beat) if push is not None else None
        self._followers += 1
        try:
            while True:
                if heartbeat is not None and told != self._health_changes:
                    told = self._health_changes
                    if self._unavailable is not None:
                        yield [self._status_row(stream)]
                current = self._tails.get(stream) or await self._tail(stream)
                if current is not tail:
                    if tail is not None:
                        self._leave(stream, tail)
                    tail = current
                    tail.readers += 1
                    if tail.readers == 1 and self.watcher is not None:
                        # A tail this server's own writes made is not watched yet, and another
                        # server may write the stream next (a run resumed there).
                        await self.watcher.watch(stream, tail.last)
                if tail.last > pos:
                    # Followers that are behind share each turn of the loop: together they
                    # send about _STEP_EVENTS events per turn, then let others run.
                    limit = max(_MIN_STEP, _STEP_EVENTS // self._followers)
                    batch = tail.after(pos, limit)
                    behind = batch is None or len(batch) == limit
                    if batch is None:
                        size = min(limit, self._read_batch)
                        batch = await self._reads.read_after(stream, pos, size)
                    if batch:
                        pos = batch[-1][0]
                        yield batch
                        if beat is not None:
                            beat.sent()
                        if behind:
                            await asyncio.sleep(0)
                        continue
                if beat is not None and beat.due():
                    yield []
                    continue
                if pusher is not None:
                    pos = await tail.attach(pusher, pos)
                else:
                    await tail.wait(beat)
        finally:
            if beat is not None:
                beat.close()
            self._followers -= 1
            if tail is not None:
                self._leave(stream, tail)

    async def _tail(self, stream: str) -> _Tail:
        """The stream's tail, made from where the backend says it ends."""
        last = await self._reads.last_seq(stream)
        # A write may have become durable while the backend was asked: its tail is the one.
        tail = self._tails.get(stream)
        if tail is None:
            tail = self._tails[stream] = _Tail(last)
        return tail

    def _leave(self, stream: str, tail: _Tail) -> None:
        tail.readers -= 1
        if tail.readers or tail.ended < 0:
            return
        tail.drop_ended()
        if not tail.events and self._tails.get(stream) is tail:
            del self._tails[stream]  # made again from the store if anyone asks
            if self.watcher is not None:
                self.watcher.unwatch(stream)

    def _status_row(self, stream: str) -> EventRow:
        event = AgentEvent(
            event_type=EventType.AGENT_STATUS,
            request_id=stream,
            data=AgentStatusData(
                code=StatusCode.STORAGE_UNAVAILABLE,
                level="ERROR",
                message=(
                    f"The server cannot save this run's events: {self._unavailable}. "
                    "They are kept and the stream goes on once they can be saved."
                ),
            ),
        )
        return (TRANSIENT_SEQ, EventType.AGENT_STATUS.value, encode_json(event))
