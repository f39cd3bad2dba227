"""How far a backend's writer may fall behind the runs producing events before they wait.

Appending never waits (a delta costs no await), so a run whose model streams faster than the
store writes would pile its events up in the server's memory: a Redis over a disk that fsyncs
every write takes tens of thousands of events a second, a scripted or buffered reply produces
hundreds of thousands. The producer asks :meth:`Backlog.room` between slices of its stream and,
while more than :data:`BACKLOG` queued events are not yet durable, waits until the writer has
made enough of them durable. Nothing is dropped or reordered: the producer only pauses, so
memory stays flat and every event is still durable before any follower sees it.
"""

from __future__ import annotations

import asyncio

BACKLOG = 8192
"""Events queued but not yet durable above which producers wait. A few of the writer's largest
script calls or commits (2,048 events each), so it always has a full batch to send, and a few
megabytes of memory at most."""


class Backlog:
    """The producers waiting for a backend's writer to catch up."""

    def __init__(self, bound: int = BACKLOG) -> None:
        self.bound = bound
        self._waiting: list[asyncio.Future[None]] = []

    def room(self, pending: int) -> asyncio.Future[None] | None:
        """``None`` while ``pending`` (events not yet durable) is under the bound.

        Else a future that resolves once :meth:`moved` reports fewer.
        """
        if pending < self.bound:
            return None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        return fut

    def moved(self, pending: int) -> None:
        """The writer made events durable (or dropped them): ``pending`` are left."""
        if pending < self.bound and self._waiting:
            waiting, self._waiting = self._waiting, []
            for fut in waiting:
                if not fut.done():
                    fut.set_result(None)

    def stop(self) -> None:
        """The backend writes nothing more: nobody waits for it (appending now fails as before)."""
        self.moved(0)
