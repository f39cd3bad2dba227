"""The store contract: the primitives every backend (SQLite, in-memory, …) provides.

Backends know nothing of runs' meaning, followers or redaction: they keep batches of encoded
events per stream and say when each became durable. Seq assignment, encoding and redaction live
in :class:`~neta_jupyter.store.eventlog.EventLog`; fan-out to live followers in
:class:`~neta_jupyter.store.fanout.Fanout`. ``tests/store_contract.py`` is the contract as tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

EventRow = tuple[int, str, str]
"""``(seq, event_type, payload)``: a plain tuple, made once when the event is appended. The
backend writes it, the live tail keeps it and every follower sends that same object; the garbage
collector stops tracking tuples of strings and numbers (not named tuples), so thousands of
recent events cost it nothing."""

DurableListener = Callable[[str, list[EventRow]], None]
"""Told, per stream, the events a write made durable: contiguous, right after the ones before."""
HealthListener = Callable[[str | None], None]
"""Told why writes fail when a spell of failures begins, and ``None`` when it ends."""


class EventBackend(Protocol):
    """Durable streams of events: append a batch, read after a seq.

    Durable before visible: no event is given to a :data:`DurableListener` or returned by a read
    before it is durable, and a write makes its whole batch durable or none of it.
    """

    def queue(self, stream: str, rows: list[EventRow]) -> None:
        """Hold ``rows`` for the next durable write; their seqs continue the stream's.

        Never waits: the event path appends batches without an await per event.
        """
        ...

    def durable(self) -> Awaitable[None]:
        """Resolves once everything queued so far is durable."""
        ...

    def on_durable(self, listener: DurableListener) -> None:
        """Call ``listener`` with the events each write made durable, as soon as it did."""
        ...

    def on_health(self, listener: HealthListener) -> None:
        """Call ``listener`` when writes start failing (with why) and when they work again."""
        ...

    def last_seq(self, stream: str) -> int:
        """Seq of the stream's last durable event, -1 when it has none."""
        ...

    def read_after(self, stream: str, after: int, limit: int) -> list[EventRow]:
        """Up to ``limit`` durable events with seq > ``after``, in order."""
        ...
