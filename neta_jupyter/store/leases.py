"""Who may write a run: the lease a server takes before it starts, resumes or takes over a run.

A store that one server alone uses (SQLite, in-memory) hands every lease to that server: its
runtime already keeps one activation per run. A store shared by several servers (Redis) keeps
the leases itself (:mod:`.redis_lease`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

ControlHandler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Carries out a control message another server handed over (principal, message); its answer."""


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

    @property
    def replica(self) -> str:
        """The name of this server among the servers sharing the store."""
        ...

    async def host_kernel(self, principal: str, kernel_id: str) -> None:
        """Say that this server hosts ``kernel_id`` for ``principal``'s runs."""
        ...

    async def drop_kernel(self, kernel_id: str) -> None:
        """The kernel is gone from this server."""
        ...

    async def kernel_host(self, principal: str, kernel_id: str) -> str | None:
        """The live server hosting ``kernel_id`` for ``principal``'s runs, if any."""
        ...

    def kernels_alive(self, check: Callable[[str], bool]) -> None:
        """Ask ``check`` whether a hosted kernel still runs here whenever leases are renewed."""
        ...

    def on_control(self, handler: ControlHandler) -> None:
        """Carry out the control messages other servers hand this one with ``handler``."""
        ...

    async def send_control(
        self, principal: str, replica: str, message: dict[str, Any], timeout: float
    ) -> dict[str, Any] | None:
        """Hand ``message`` to server ``replica``; its answer, or None if none came in time."""
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

    replica = "local"
    """The only server."""

    async def host_kernel(self, principal: str, kernel_id: str) -> None:
        """Every kernel a run names is this server's, or none's."""

    async def drop_kernel(self, kernel_id: str) -> None:
        """Nothing registered."""

    async def kernel_host(self, principal: str, kernel_id: str) -> str | None:
        """No other server to host it."""
        return None

    def kernels_alive(self, check: Callable[[str], bool]) -> None:
        """Nothing to renew."""

    def on_control(self, handler: ControlHandler) -> None:
        """No other server sends any."""

    async def send_control(
        self, principal: str, replica: str, message: dict[str, Any], timeout: float
    ) -> dict[str, Any] | None:
        """No other server to ask."""
        return None
