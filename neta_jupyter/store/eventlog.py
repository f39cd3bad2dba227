"""The durable event log: contiguous seqs per stream, reads after a seq, live following.

What is policy lives here, the same over every backend: numbering, the envelope's seq prefix,
redaction, and (in :class:`~neta_jupyter.store.fanout.Fanout`) the live followers. The backend
(:class:`~neta_jupyter.store.contract.EventBackend`) only keeps batches and says when each is
durable; a follower sees an event only after that.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from itertools import repeat
from typing import NamedTuple

from ..events import TERMINAL_EVENT_TYPES, AgentEvent
from ..events.encoding import envelope_rest
from ..events.redact import Redactor
from .contract import EventBackend, EventRow
from .fanout import Fanout, Push, Watcher

RemoteListener = Callable[[str, list[EventRow]], None]


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


class EventLog:
    """Streams of events (a run's, a session's tree) over one backend, with their followers."""

    def __init__(
        self,
        backend: EventBackend,
        *,
        redactor: Redactor | None = None,
        tail_size: int = 4096,
        read_batch: int = 512,
    ) -> None:
        self._backend = backend
        self.redactor = redactor if redactor is not None else Redactor()
        """Applied to every payload before it is stored."""
        self._next: dict[str, int] = {}
        self._fanout = Fanout(backend, tail_size=tail_size, read_batch=read_batch)
        backend.on_durable(self._fanout.durable)
        backend.on_health(self._fanout.health_changed)

    # --- writing

    async def open(self, stream: str) -> None:
        """Make ready to append to ``stream`` in this process: learn where it ends.

        Appending never waits, so the stream's next seq must be known before the first append.
        """
        if stream not in self._next:
            last = await self._backend.last_seq(stream)
            self._next.setdefault(stream, last + 1)

    def on_durable(self, listener: RemoteListener) -> None:
        """Call ``listener`` with the events this process appended, once each is durable."""
        self._backend.on_durable(listener)

    def share(self, watcher: Watcher, on_remote: Callable[[RemoteListener], None]) -> None:
        """Followers here also get the events other servers write (a shared store's tailer)."""
        self._fanout.watcher = watcher
        on_remote(self._fanout.remote)

    def forget(self, stream: str) -> None:
        """Learn where ``stream`` ends again at the next :meth:`open` (another server wrote it)."""
        self._next.pop(stream, None)

    def append_nowait(self, event: AgentEvent) -> int:
        """Assign the next seq and queue the event for the next durable write; its seq."""
        if event.seq is not None:
            event = event.model_copy(update={"seq": None})
        rest = envelope_rest(event)
        return self.append_encoded_many(event.request_id, event.event_type.value, [rest])

    def append_encoded_many(
        self, stream: str, event_type: str, rests: list[str], *, redacted: bool = False
    ) -> int:
        """Append consecutive events of one type, encoded up to their seqs; the first seq.

        Each of ``rests`` is what :func:`~neta_jupyter.events.encoding.envelope_rest` gives.
        ``redacted`` says their only free text has already been through the redactor.
        """
        first = self._next.get(stream)
        if first is None:
            raise RuntimeError(f"append to {stream!r} before it was opened (EventLog.open)")
        end = first + len(rests)
        self._next[stream] = end
        head = f'{{"eventType":"{event_type}","seq":'  # encoding.numbered, once per batch
        payloads = [f"{head}{seq},{rest}" for seq, rest in enumerate(rests, first)]
        if not redacted and self.redactor:
            payloads = list(map(self.redactor, payloads))
        if event_type in TERMINAL_EVENT_TYPES:
            self._fanout.ending(stream, end - 1)
        self._backend.queue(stream, list(zip(range(first, end), repeat(event_type), payloads)))
        return first

    async def append(self, event: AgentEvent) -> int:
        """Append and return once the event is durable."""
        seq = self.append_nowait(event)
        await self._backend.durable()
        return seq

    async def flush(self) -> None:
        """Return once everything appended so far is durable."""
        await self._backend.durable()

    def retire(self, stream: str) -> None:
        """``stream``, of no run, is written no more (a crew that ended).

        Its events, those appended so far included, are kept the retention, then deleted.
        """
        self._backend.retire(stream)

    def room(self) -> Awaitable[None] | None:
        """``None`` while the store's writer keeps up; else what resolves once it caught up.

        Appending never waits; a producer that can outrun the store (a model's stream) waits
        on this between slices, so what is not yet durable stays bounded in memory.
        """
        return self._backend.room()

    # --- reading

    async def last_seq(self, stream: str) -> int:
        """Seq of the stream's last durable event, -1 when it has none."""
        known = self._fanout.last_seq(stream)
        return known if known is not None else await self._backend.last_seq(stream)

    async def stored_last_seq(self, stream: str) -> int:
        """:meth:`last_seq` as the backend has it now, past what this process remembers.

        A finished run's events may have expired since this process wrote them; what it still
        remembers of such a stream is forgotten.
        """
        last = await self._backend.last_seq(stream)
        if last < 0:
            self._fanout.forget(stream)
        return last

    async def read_after(self, stream: str, after_seq: int, limit: int = 4096) -> list[StoredEvent]:
        """Durable events with seq > ``after_seq``, in order."""
        rows = await self._backend.read_after(stream, after_seq, limit)
        return list(map(StoredEvent._make, rows))

    async def last_event(self, stream: str) -> StoredEvent | None:
        """The stream's last durable event."""
        seq = await self.last_seq(stream)
        if seq < 0:
            return None
        found = await self.read_after(stream, seq - 1, 1)
        return found[0] if found else None

    def follow(
        self,
        stream: str,
        after_seq: int,
        *,
        heartbeat: float | None = None,
        push: Push | None = None,
    ) -> AsyncIterator[list[EventRow]]:
        """Batches of ``(seq, event_type, payload)`` after ``after_seq``: stored, then live.

        See :meth:`Fanout.follow <neta_jupyter.store.fanout.Fanout.follow>` for ``heartbeat``
        and ``push``.
        """
        return self._fanout.follow(stream, after_seq, heartbeat=heartbeat, push=push)
