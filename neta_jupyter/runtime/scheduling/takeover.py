"""Runs shared by several servers: lost runs, a dead server's runs, stopping another's runs.

Each server holds the lease of the runs it executes (:mod:`neta_jupyter.store.leases`). When it
loses one (another server took the run over, or it could not renew its leases) the run's
activation stops here without writing anything. A sweeper on every server looks for runs whose
owner's lease expired and ends each, once it holds the lease, as the start-up recovery ends a
crashed server's runs: ``SYSTEM_CRASH``, recoverable, with the calls that were executing
answered as interrupted and never run again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, Any

from ..activation.endings import end_crashed
from ..data.runs import Run
from ..errors import RunConflict
from .handoff import Handoff

if TYPE_CHECKING:
    from ..host import RunHost

STOP_WAIT = 120.0
"""Seconds a terminate waits for the server executing the run to end it (a safety bound)."""


class Takeover:
    """What a server does about runs other servers may hold."""

    def __init__(self, runtime: RunHost, *, sweep_interval: float = 5.0) -> None:
        self._rt = runtime
        self._leases = runtime.store.leases
        self.sweep_interval = sweep_interval
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._taken: set[str] = set()
        self._leases.on_lost(self._lost)
        self._leases.on_stop(self._stop_asked)
        self.handoff = Handoff(runtime)
        """Resumes and retries of runs whose kernel another server hosts go there."""

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _lost(self, request_id: str) -> None:
        """Another server took the run over: its activation here stops, writing nothing."""
        if self._rt.is_active(request_id):
            self._spawn(self._rt.cancel(request_id, "fenced"))

    def _stop_asked(self, request_id: str) -> None:
        """Another server was asked to terminate this server's run: USER_CANCELLED, once."""
        if self._rt.is_active(request_id):
            self._spawn(self._rt.cancel(request_id, "user"))

    # --- taking a run

    async def take(self, request_id: str, code: str, refused: str) -> None:
        """Take the run's lease for this server, or refuse: another server runs it."""
        if not await self._rt.store.acquire(request_id):
            raise RunConflict(f"{refused} (another server runs it)", code=code)

    @contextlib.asynccontextmanager
    async def releasing(self, request_id: str) -> AsyncIterator[None]:
        """Let go of the run's lease if what follows taking it fails before the run starts."""
        try:
            yield
        except BaseException:
            if not self._rt.is_active(request_id):
                await self._leases.release(request_id)
            raise

    # --- the sweeper

    def start(self) -> None:
        """Sweep now and then, on the running event loop (only for a shared store)."""
        if self._leases.shared and self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    def stop(self) -> None:
        """Sweep no more."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                taken = await self.sweep()
            except Exception as error:  # the store is down: sweep again later
                self._rt.log.warning("neta: looking for runs to take over failed: %s", error)
                continue
            if taken:
                self._rt.log.warning(
                    "neta: took over %d run(s) of a server that stopped (SYSTEM_CRASH)", taken
                )

    async def sweep(self) -> int:
        """End the runs whose owner's lease expired, each once this server holds it; how many."""
        taken = 0
        for request_id in await self._leases.expired():
            if self._rt.is_active(request_id) or self._rt.stopping:
                continue  # its activation here is being stopped; swept next time
            if not await self._rt.store.acquire(request_id):
                continue  # another server was faster
            run = await self._rt.runs.get(request_id)
            if run is None or run.status != "running":
                await self._leases.release(request_id)
                continue
            await end_crashed(self._rt.runs, run, await self._rt.emitter(run))
            taken += 1
        return taken

    # --- start-up recovery

    async def may_recover(self, run: Run) -> bool:
        """Whether start-up recovery may end or suspend ``run``: nobody else executes it.

        On a shared store the run must hold no live lease, nor the run that delegated to it
        (its children wait for a slot holding none), and this server then takes its lease.
        """
        if not self._leases.shared:
            return True
        if run.request_id in self._taken:
            return True
        parent = run.parent_request_id
        if parent is not None and await self._leases.held_elsewhere(parent):
            return False
        if not await self._rt.store.acquire(run.request_id):
            return False
        self._taken.add(run.request_id)
        return True

    def recovered(self) -> None:
        """Start-up recovery is over."""
        self._taken.clear()

    # --- terminate

    async def stop_elsewhere(self, run: Run) -> bool:
        """Ask the server executing ``run`` to terminate it and wait for the end.

        False when no server holds it.
        """
        if run.status != "running" or not await self._leases.request_stop(run.request_id):
            return False
        deadline = time.monotonic() + STOP_WAIT
        while time.monotonic() < deadline:
            found = await self._rt.runs.get(run.request_id)
            if found is None or found.status != "running":
                return True
            await asyncio.sleep(0.05)
        return True
