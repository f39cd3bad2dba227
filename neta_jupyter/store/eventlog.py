"""The durable event log: append with contiguous seq per run, read after a seq, follow live.

Followers that keep up are served from a bounded in-memory tail of recent committed events; one
that falls behind the tail reads the store instead, so a slow client costs reads, not memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from itertools import repeat
from typing import NamedTuple, Protocol

from ..events import (
    TERMINAL_EVENT_TYPES,
    AgentEvent,
    AgentStatusData,
    EventType,
    StatusCode,
    encode_json,
)
from ..events.encoding import envelope_rest
from ..events.redact import Redactor
from .db import Database, EventRow
from .schema import SEQ_BITS


class StoredEvent(NamedTuple):
    """An event as stored: its seq, type and the envelope JSON that every transport sends as is.

    A named tuple: about half the cost of a frozen dataclass to make, and a long replay makes
    hundreds of thousands.
    """

    seq: int
    event_type: str
    payload: str

    @property
    def terminal(self) -> bool:
        """Whether it ends a stream segment."""
        return self.event_type in TERMINAL_EVENT_TYPES


class EventLog(Protocol):
    """What transports and the runtime need of a log (sqlite here; other backends fit the same)."""

    redactor: Redactor
    """Applied to every payload before it is stored."""

    def append_nowait(self, event: AgentEvent) -> int:
        """Assign the next seq and queue the event for the next group commit."""
        ...

    def append_encoded_many(
        self, request_id: str, event_type: str, rests: list[str], *, redacted: bool = False
    ) -> int:
        """Append consecutive events of one type, encoded up to their seqs; the first seq.

        Each of ``rests`` is what :func:`~neta_jupyter.events.encoding.envelope_rest` gives.
        ``redacted`` says their only free text has already been through the redactor.
        """
        ...

    async def append(self, event: AgentEvent) -> int:
        """Append and return once the event is durable."""
        ...

    async def flush(self) -> None:
        """Return once everything appended so far is durable."""
        ...

    def last_seq(self, request_id: str) -> int:
        """Seq of the last durable event of the run, -1 when it has none."""
        ...

    def read_after(self, request_id: str, after_seq: int, limit: int = 2048) -> list[StoredEvent]:
        """Durable events with seq > ``after_seq``, in order."""
        ...

    def follow(self, request_id: str, after_seq: int) -> AsyncIterator[list[EventRow]]:
        """Batches of ``(seq, event_type, payload)`` after ``after_seq``.

        Stored ones first, then live ones as they commit.
        """
        ...

    def follow_or_idle(
        self, request_id: str, after_seq: int, idle: float | None
    ) -> AsyncIterator[list[EventRow]]:
        """:meth:`follow`, with an empty batch after each ``idle`` seconds without one.

        While the store cannot be written, a batch of one unstored AGENT_STATUS (seq -1, sent
        without an id) says why the stream is quiet. A read that fails raises
        :class:`~neta_jupyter.store.health.StorageError`.
        """
        ...


TRANSIENT_SEQ = -1
"""The seq of a row that is sent but never stored (it carries no id on the wire)."""

_STEP_EVENTS = 8192
"""Events that followers who are behind send per turn of the event loop, together."""
_MIN_STEP = 64


class _Tail:
    """Recent committed events of one run (contiguous seqs) and a signal for waiters."""

    __slots__ = ("ended", "events", "last", "readers", "signal")

    def __init__(self, last: int) -> None:
        self.events: list[EventRow] = []
        self.last = last
        self.signal = asyncio.Event()
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


class SqliteEventLog:
    """:class:`EventLog` on the shared SQLite :class:`Database`."""

    def __init__(
        self,
        db: Database,
        *,
        tail_size: int = 4096,
        read_batch: int = 512,
        redactor: Redactor | None = None,
    ) -> None:
        self._db = db
        self.redactor = redactor or Redactor()
        self._next: dict[str, int] = {}
        self._streams: dict[str, int] = {}
        self._requests: dict[int, str] = {}
        self._last_stream: int | None = None
        self._terminal: dict[str, int] = {}  # seq of each run's latest terminal event
        self._tails: dict[str, _Tail] = {}
        self._followers = 0
        self._tail_size = tail_size
        # Followers behind the tail read this many rows at a time: few enough that little of a
        # replay is alive whenever the garbage collector runs (survivors make it scan the whole
        # heap), enough that a query and a flush are shared by many events.
        self._read_batch = read_batch
        self._unavailable: str | None = None
        self._health_changes = 0
        db.on_commit(self._committed)
        db.on_health(self._health_changed)

    # --- writing

    def append_nowait(self, event: AgentEvent) -> int:
        """Assign the next seq and queue the event for the next group commit."""
        if event.seq is not None:
            event = event.model_copy(update={"seq": None})
        rest = envelope_rest(event)
        return self.append_encoded_many(event.request_id, event.event_type.value, [rest])

    def append_encoded_many(
        self, request_id: str, event_type: str, rests: list[str], *, redacted: bool = False
    ) -> int:
        """Append consecutive events of one type, encoded up to their seqs; the first seq."""
        first = self._next.get(request_id)
        if first is None:
            first = self._stored_last(request_id) + 1
        end = first + len(rests)
        self._next[request_id] = end
        head = f'{{"eventType":"{event_type}","seq":'  # encoding.numbered, once per batch
        payloads = [f"{head}{seq},{rest}" for seq, rest in enumerate(rests, first)]
        if not redacted and self.redactor:
            payloads = list(map(self.redactor, payloads))
        if event_type in TERMINAL_EVENT_TYPES:
            self._terminal[request_id] = end - 1
        stream = self._streams.get(request_id)
        base = self._base(request_id, create=True) if stream is None else stream << SEQ_BITS
        self._db.queue_events(base, list(zip(range(first, end), repeat(event_type), payloads)))
        return first

    async def append(self, event: AgentEvent) -> int:
        """Append and return once the event is durable."""
        seq = self.append_nowait(event)
        await self._db.durable()
        return seq

    async def flush(self) -> None:
        """Return once everything appended so far is durable."""
        await self._db.durable()

    def forget(self, request_id: str) -> None:
        """Drop in-memory state of a run nobody follows (its events stay stored)."""
        tail = self._tails.get(request_id)
        if tail is not None and not tail.events:
            del self._tails[request_id]
        self._next.pop(request_id, None)

    def _committed(self, base: int, rows: list[EventRow]) -> None:
        rid = self._requests[base >> SEQ_BITS]
        tail = self._tails.get(rid)
        if tail is None:
            tail = self._tails[rid] = _Tail(rows[0][0] - 1)
        events = tail.events
        events += rows
        tail.last = rows[-1][0]
        ended = self._terminal.get(rid, -1)
        if events and events[0][0] <= ended <= tail.last:
            # A finished segment's events live in the store only, once its followers (who may
            # be behind) have read them from here.
            tail.ended = ended
            if not tail.readers:
                tail.drop_ended()
        if len(events) > 2 * self._tail_size:
            del events[: len(events) - self._tail_size]
        tail.signal.set()
        tail.signal = asyncio.Event()

    def _health_changed(self, reason: str | None) -> None:
        """Wake every follower, so that each tells its client why its stream is quiet."""
        self._unavailable = reason
        self._health_changes += 1
        for tail in self._tails.values():
            tail.signal.set()
            tail.signal = asyncio.Event()

    def _status_row(self, request_id: str) -> EventRow:
        event = AgentEvent(
            event_type=EventType.AGENT_STATUS,
            request_id=request_id,
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

    # --- reading

    def _base(self, request_id: str, *, create: bool = False) -> int:
        """The key of the run's seq 0; -1 when it has no stream yet and ``create`` is false."""
        stream = self._streams.get(request_id)
        if stream is None:
            rows = self._db.query(
                "SELECT stream FROM event_streams WHERE request_id = ?", (request_id,)
            )
            if rows:
                stream = int(rows[0][0])
            elif create:
                # Numbered here and stored with the run's first events, so starting a run does
                # not force a commit of its own.
                if self._last_stream is None:
                    found = self._db.query("SELECT MAX(stream) FROM event_streams")[0][0]
                    self._last_stream = int(found or 0)
                stream = self._last_stream = self._last_stream + 1
                self._db.queue_write(
                    "INSERT INTO event_streams (stream, request_id) VALUES (?, ?)",
                    (stream, request_id),
                )
            else:
                return -1
            self._streams[request_id] = stream
            self._requests[stream] = request_id
        return stream << SEQ_BITS

    def _stored_last(self, request_id: str) -> int:
        base = self._base(request_id)
        if base < 0:
            return -1
        rows = self._db.query(
            "SELECT MAX(key) FROM events WHERE key >= ? AND key < ?",
            (base, base + (1 << SEQ_BITS)),
        )
        value = rows[0][0]
        return -1 if value is None else int(value) - base

    def last_seq(self, request_id: str) -> int:
        """Seq of the last durable event of the run, -1 when it has none."""
        tail = self._tails.get(request_id)
        return tail.last if tail is not None else self._stored_last(request_id)

    def read_after(self, request_id: str, after_seq: int, limit: int = 4096) -> list[StoredEvent]:
        """Durable events with seq > ``after_seq``, in order."""
        return list(map(StoredEvent._make, self._read_rows(request_id, after_seq, limit)))

    def _read_rows(self, request_id: str, after_seq: int, limit: int) -> list[EventRow]:
        upto = self.last_seq(request_id)
        base = self._base(request_id)
        if base < 0:
            return []
        return self._db.read(
            "SELECT key - ?, event_type, payload FROM events WHERE key > ? AND key <= ? "
            "ORDER BY key LIMIT ?",
            (base, base + after_seq, base + upto, limit),
        )

    def last_event(self, request_id: str) -> StoredEvent | None:
        """The last durable event of the run."""
        seq = self.last_seq(request_id)
        if seq < 0:
            return None
        found = self.read_after(request_id, seq - 1, 1)
        return found[0] if found else None

    async def follow(self, request_id: str, after_seq: int) -> AsyncIterator[list[EventRow]]:
        """Batches of ``(seq, event_type, payload)`` after ``after_seq``.

        Stored ones first, then live ones as they commit.
        """
        ticks = self.follow_or_idle(request_id, after_seq, None)
        try:
            async for batch in ticks:
                if batch and batch[0][0] != TRANSIENT_SEQ:
                    yield batch
        finally:
            await ticks.aclose()  # type: ignore[attr-defined]  # stop reading now, not at GC

    async def follow_or_idle(
        self, request_id: str, after_seq: int, idle: float | None
    ) -> AsyncIterator[list[EventRow]]:
        """:meth:`follow`, with an empty batch after each ``idle`` seconds without one.

        A follower that keeps up waits on the run's signal alone: no task or timer of its own
        beyond the idle deadline, since a busy server wakes hundreds of them per commit.
        """
        pos = after_seq
        tail: _Tail | None = None
        told = 0
        self._followers += 1
        try:
            while True:
                if told != self._health_changes:
                    told = self._health_changes
                    if self._unavailable is not None:
                        yield [self._status_row(request_id)]
                current = self._tails.get(request_id)
                if current is None:
                    self._base(request_id, create=True)
                    current = self._tails[request_id] = _Tail(self._stored_last(request_id))
                if current is not tail:
                    if tail is not None:
                        self._leave(request_id, tail)
                    tail = current
                    tail.readers += 1
                if tail.last > pos:
                    # Followers that are behind share each turn of the loop: together they
                    # send about _STEP_EVENTS events per turn, then let others run.
                    limit = max(_MIN_STEP, _STEP_EVENTS // self._followers)
                    batch = tail.after(pos, limit)
                    behind = batch is None or len(batch) == limit
                    if batch is None:
                        batch = self._read_rows(request_id, pos, min(limit, self._read_batch))
                    if batch:
                        pos = batch[-1][0]
                        yield batch
                        if behind:
                            await asyncio.sleep(0)
                        continue
                if idle is None:
                    await tail.signal.wait()
                    continue
                try:
                    async with asyncio.timeout(idle):
                        await tail.signal.wait()
                except TimeoutError:
                    yield []
        finally:
            self._followers -= 1
            if tail is not None:
                self._leave(request_id, tail)

    def _leave(self, request_id: str, tail: _Tail) -> None:
        tail.readers -= 1
        if tail.readers or tail.ended < 0:
            return
        tail.drop_ended()
        if not tail.events and self._tails.get(request_id) is tail:
            del self._tails[request_id]  # made again from the store if anyone asks
