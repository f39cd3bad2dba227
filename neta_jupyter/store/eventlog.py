"""The durable event log: append with contiguous seq per run, read after a seq, follow live.

Followers that keep up are served from a bounded in-memory tail of recent committed events; one
that falls behind the tail reads the store instead, so a slow client costs reads, not memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import NamedTuple, Protocol

from ..events import TERMINAL_EVENT_TYPES, AgentEvent, encode_json
from ..events.redact import Redactor
from .db import Database, PendingRow

_TERMINAL = frozenset(str(t) for t in TERMINAL_EVENT_TYPES)


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
        return self.event_type in _TERMINAL


class EventLog(Protocol):
    """What transports and the runtime need of a log (sqlite here; other backends fit the same)."""

    redactor: Redactor
    """Applied to every payload before it is stored."""

    def append_nowait(self, event: AgentEvent) -> int:
        """Assign the next seq and queue the event for the next group commit."""
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

    def follow(self, request_id: str, after_seq: int) -> AsyncIterator[list[StoredEvent]]:
        """Batches of events after ``after_seq``: stored ones, then live ones as they commit."""
        ...


class _Tail:
    """Recent committed events of one run (contiguous seqs) and a signal for waiters.

    The events are kept as the plain rows the store committed: the garbage collector stops
    tracking tuples of strings and numbers, so thousands of recent events per run cost it
    nothing. Followers get them as :class:`StoredEvent`, made once per position for every
    follower that asks from there (all that keep up ask from the same one).
    """

    __slots__ = ("events", "last", "made", "signal")

    def __init__(self, last: int) -> None:
        self.events: list[PendingRow] = []
        self.last = last
        self.signal = asyncio.Event()
        self.made: tuple[int, list[StoredEvent]] | None = None

    def after(self, seq: int) -> list[StoredEvent] | None:
        """Events after ``seq`` if the tail still holds them all, else None."""
        if not self.events or seq + 1 < self.events[0][1]:
            return None
        if self.made is None or self.made[0] != seq:
            rows = self.events[seq + 1 - self.events[0][1] :]
            self.made = seq, [StoredEvent(s, kind, data) for _, s, kind, data in rows]
        return self.made[1]


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
        self._tails: dict[str, _Tail] = {}
        self._tail_size = tail_size
        # Followers behind the tail read this many rows at a time: few enough that little of a
        # replay is alive whenever the garbage collector runs (survivors make it scan the whole
        # heap), enough that a query and a flush are shared by many events.
        self._read_batch = read_batch
        db.on_commit(self._committed)

    # --- writing

    def append_nowait(self, event: AgentEvent) -> int:
        """Assign the next seq and queue the event for the next group commit."""
        rid = event.request_id
        seq = self._next.get(rid)
        if seq is None:
            seq = self._stored_last(rid) + 1
        self._next[rid] = seq + 1
        payload = encode_json(event, seq)
        if self.redactor:
            payload = self.redactor(payload)
        self._db.queue_event((rid, seq, str(event.event_type), payload))
        return seq

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

    def _committed(self, rows: list[PendingRow]) -> None:
        for row in rows:
            rid, seq, event_type, _ = row
            tail = self._tails.get(rid)
            if tail is None:
                tail = self._tails[rid] = _Tail(seq - 1)
            tail.events.append(row)
            tail.last = seq
            if event_type in _TERMINAL:
                # A finished segment's events live in the store only; followers read them there.
                tail.events.clear()
        for rid in {row[0] for row in rows}:
            tail = self._tails[rid]
            if len(tail.events) > 2 * self._tail_size:
                del tail.events[: len(tail.events) - self._tail_size]
            tail.made = None
            tail.signal.set()
            tail.signal = asyncio.Event()

    # --- reading

    def _stored_last(self, request_id: str) -> int:
        rows = self._db.query("SELECT MAX(seq) FROM events WHERE request_id = ?", (request_id,))
        value = rows[0][0]
        return -1 if value is None else int(value)

    def last_seq(self, request_id: str) -> int:
        """Seq of the last durable event of the run, -1 when it has none."""
        tail = self._tails.get(request_id)
        return tail.last if tail is not None else self._stored_last(request_id)

    def read_after(self, request_id: str, after_seq: int, limit: int = 4096) -> list[StoredEvent]:
        """Durable events with seq > ``after_seq``, in order."""
        upto = self.last_seq(request_id)
        rows = self._db.conn.execute(
            "SELECT seq, event_type, payload FROM events WHERE request_id = ? AND seq > ? "
            "AND seq <= ? ORDER BY seq LIMIT ?",
            (request_id, after_seq, upto, limit),
        ).fetchall()
        return list(map(StoredEvent._make, rows))

    def last_event(self, request_id: str) -> StoredEvent | None:
        """The last durable event of the run."""
        seq = self.last_seq(request_id)
        if seq < 0:
            return None
        found = self.read_after(request_id, seq - 1, 1)
        return found[0] if found else None

    async def follow(self, request_id: str, after_seq: int) -> AsyncIterator[list[StoredEvent]]:
        """Batches of events after ``after_seq``: stored ones, then live ones as they commit."""
        pos = after_seq
        while True:
            tail = self._tails.get(request_id)
            if tail is None:
                tail = self._tails[request_id] = _Tail(self._stored_last(request_id))
            if tail.last > pos:
                batch = tail.after(pos) or self.read_after(request_id, pos, self._read_batch)
                if batch:
                    pos = batch[-1].seq
                    yield batch
                    continue
            await tail.signal.wait()
