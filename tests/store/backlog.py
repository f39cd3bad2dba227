"""The store contract, continued: a producer faster than its store keeps a bounded backlog.

A run's model can stream events far faster than a store takes them (a Redis that fsyncs every
write, a disk that is full for a while). Appending never waits, so the producer asks the log for
room between slices, as a run's reply streamer does, and waits while the store is behind: the
events queued but not yet durable stay within :data:`~neta_jupyter.store.backlog.BACKLOG`
(counted in events), and none is lost, repeated or reordered.
"""

from __future__ import annotations

import asyncio

from neta_jupyter.store import EventRow, Store
from neta_jupyter.store.backlog import BACKLOG
from tests.store.contract import TIMEOUT, Place, delta

SLICE = 64
"""Events a producer appends between two questions for room."""


class Producer:
    """Appends deltas to one stream, asking for room between slices, as a reply streamer does."""

    def __init__(self, store: Store, stream: str) -> None:
        self.log = store.events
        self.stream = stream
        self.appended = 0
        self.durable = 0
        """Events of the stream the store said were durable."""
        self.most_behind = 0
        """The most events ever appended and not yet durable."""
        self.waiting = asyncio.Event()
        """Set when the log first answered "wait"."""
        self.log.on_durable(self._durable)

    def _durable(self, stream: str, rows: list[EventRow]) -> None:
        if stream == self.stream:
            self.durable = rows[-1][0] + 1

    async def run(self, total: int) -> None:
        while self.appended < total:
            for _ in range(SLICE):
                self.log.append_nowait(delta(self.stream, str(self.appended)))
                self.appended += 1
            self.most_behind = max(self.most_behind, self.appended - self.durable)
            behind = self.log.room()
            if behind is None:
                await asyncio.sleep(0)
            else:
                self.waiting.set()
                await behind
        await self.log.flush()


async def first_of(*aws: asyncio.Future[object] | asyncio.Task[object]) -> None:
    await asyncio.wait(aws, timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED)


class BacklogContract:
    """The backlog part of the contract; a subclass provides the ``place`` fixture."""

    async def test_a_producer_faster_than_the_store_keeps_a_bounded_backlog(
        self, place: Place
    ) -> None:
        store = place.open()
        await store.events.open("r_bp")
        producer = Producer(store, "r_bp")
        total = 5 * BACKLOG

        # The slowest store: it takes nothing for a while. The producer stops, bounded.
        place.break_writes(store)
        task = asyncio.ensure_future(producer.run(total))
        waiting = asyncio.ensure_future(producer.waiting.wait())
        await first_of(task, waiting)
        assert not task.done(), "the producer ran on while the store took nothing"
        stopped_at = producer.appended
        assert BACKLOG <= stopped_at <= BACKLOG + SLICE
        for _ in range(20):
            await asyncio.sleep(0.01)  # loop turns: the retrying writer runs, the producer not
        assert producer.appended == stopped_at, "it waits for as long as the store is behind"

        # Writes work again: it goes on, never further behind than the bound, and every event
        # is durable, in order, once.
        place.mend_writes(store)
        await asyncio.wait_for(task, TIMEOUT)
        assert producer.most_behind <= BACKLOG + SLICE
        stored = await store.events.read_after("r_bp", -1, total + 1)
        assert [e.seq for e in stored] == list(range(total))
        assert [e.payload.count(f'"text":"{e.seq}"') for e in stored] == [1] * total
        store.close()
