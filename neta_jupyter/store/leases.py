"""Who may write a run: the lease a server takes before it starts, resumes or takes over a run.

A store that one server alone uses (SQLite, in-memory) hands every lease to that server: its
runtime already keeps one activation per run. A store shared by several servers (Redis) keeps
the leases itself (:mod:`.redis_lease`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Leases(Protocol):
    """Leases of runs: at most one server writes a run at a time."""

    @property
    def shared(self) -> bool:
        """Whether other servers may hold this store's runs (then a sweeper is needed)."""
        ...

    async def acquire(self, request_id: str) -> bool:
        """Take the run for this server; False when another holds it."""
        ...

    async def release(self, request_id: str) -> None:
        """Let go of a run taken but not activated."""
        ...

    async def held_elsewhere(self, request_id: str) -> bool:
        """Whether another server holds the run's lease."""
        ...

    async def request_stop(self, request_id: str) -> bool:
        """Ask the run's owner to terminate it; False when nobody holds it."""
        ...

    async def expired(self) -> list[str]:
        """Runs left running by a server whose lease on them expired."""
        ...

    def on_lost(self, listener: Callable[[str], None]) -> None:
        """Call ``listener`` with a run this server lost: its activation must write no more."""
        ...

    def on_stop(self, listener: Callable[[str], None]) -> None:
        """Call ``listener`` with a run of this server that another server asked to stop."""
        ...


class LocalLeases:
    """The leases of a store only this server uses: all of them are its own."""

    shared = False

    async def acquire(self, request_id: str) -> bool:
        """Always granted (the runtime keeps one activation per run)."""
        return True

    async def release(self, request_id: str) -> None:
        """Nothing to let go of."""

    async def held_elsewhere(self, request_id: str) -> bool:
        """Never: no other server uses the store."""
        return False

    async def request_stop(self, request_id: str) -> bool:
        """Nobody else to ask."""
        return False

    async def expired(self) -> list[str]:
        """None: runs a crash left are ended at start-up."""
        return []

    def on_lost(self, listener: Callable[[str], None]) -> None:
        """Never lost."""

    def on_stop(self, listener: Callable[[str], None]) -> None:
        """Never asked."""
