"""Runs that wait for a person: a pause asked for while a run works, and how long a wait may last.

A pause (``suspendTask``) is taken at the run's next step boundary: the step under way finishes
(a running tool too), then the activation ends with MESSAGE_SUSPENDED ``MANUAL_SUSPEND`` and the
step after is kept in the run's state, as when a permission ask suspends it; ``resumeTask`` goes
on from there under the same requestId.

A run that suspends waiting for a person (a permission ask, a question, a pause) gets a deadline
in its state: its request's ``suspendTimeout``, or the runtime's ``suspend_timeout``. Past it the
run is reclaimed: MESSAGE_FAILED ``USER_NO_RESPONSE``, not recoverable. The deadline is stored
with the run, so a server that was down when it passed reclaims the run as it starts again
(:meth:`Waiting.recover`) and keeps a timer for the others (:meth:`Waiting.watch_stored`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...events import ErrorCode
from ...store import StorageError
from ..activation.endings import fail_run
from ..data.runs import Run
from ..errors import RunConflict

if TYPE_CHECKING:
    from ..host import RunHost
    from .activations import Activations

BUSY_RETRY = 1.0
"""Seconds before a deadline is looked at again while a resume holds the run."""


class Waiting:
    """Pauses of running runs, and the timers that reclaim runs left waiting too long."""

    def __init__(self, runtime: RunHost, active: Activations) -> None:
        self._rt = runtime
        self._active = active
        self._timers: dict[str, asyncio.Task[None]] = {}
        self._claimed: set[str] = set()
        self._stored: list[tuple[str, float]] = []

    async def pause(self, principal: str, request_id: str) -> Run:
        """Ask a running run to suspend at its next step boundary (it is still running)."""
        run = await self._rt.get_run(principal, request_id)
        if run.status != "running" or not self._active.pause(request_id):
            raise RunConflict(
                f"run {request_id} is {run.status}; only a running run can be paused",
                code="RUN_NOT_RUNNING",
            )
        return run

    @contextlib.contextmanager
    def claim(self, request_id: str) -> Iterator[None]:
        """Hold the run while it is resumed or reclaimed, so that the two never both happen."""
        if request_id in self._claimed:
            raise RunConflict(f"run {request_id} is being resumed or stopped", code="RUN_BUSY")
        self._claimed.add(request_id)
        try:
            yield
        finally:
            self._claimed.discard(request_id)

    # --- deadlines

    def watch(self, run: Run) -> None:
        """Reclaim the suspended run at its deadline, if it has one."""
        deadline = run.state.suspend_deadline
        if run.status != "suspended" or deadline is None:
            return
        self.forget(run.request_id)
        self._timers[run.request_id] = asyncio.create_task(
            self._at(run.request_id, deadline), name=f"neta-deadline-{run.request_id}"
        )

    def forget(self, request_id: str) -> None:
        """The run waits no more (it was resumed): its timer goes."""
        timer = self._timers.pop(request_id, None)
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    async def recover(self) -> int:
        """At start-up: runs whose deadline passed while the server was down are reclaimed.

        The others get their timers from :meth:`watch_stored`, once an event loop runs.
        """
        now, reclaimed = time.time(), 0
        for run in await self._rt.runs.find(status="suspended", limit=100_000):
            deadline = run.state.suspend_deadline
            if deadline is None:
                continue
            if deadline > now:
                self._stored.append((run.request_id, deadline))
                continue
            await self._fail(run)
            reclaimed += 1
        if reclaimed:
            self._rt.log.warning("neta: %d run(s) waited past their deadline", reclaimed)
        return reclaimed

    def watch_stored(self) -> None:
        """Timers for the runs :meth:`recover` found waiting (on the running event loop)."""
        stored, self._stored = self._stored, []
        for request_id, deadline in stored:
            self._timers[request_id] = asyncio.create_task(
                self._at(request_id, deadline), name=f"neta-deadline-{request_id}"
            )

    async def close(self) -> None:
        """Stop every timer (the server shuts down; the deadlines stay stored)."""
        timers, self._timers = list(self._timers.values()), {}
        for timer in timers:
            timer.cancel()
        await asyncio.gather(*timers, return_exceptions=True)

    async def _at(self, request_id: str, deadline: float) -> None:
        try:
            while True:
                await asyncio.sleep(max(0.0, deadline - time.time()))
                if request_id not in self._claimed:
                    break
                deadline = time.time() + BUSY_RETRY  # being resumed: see how that ends
            with self.claim(request_id):
                run = await self._rt.runs.get(request_id)
                stored = run.state.suspend_deadline if run is not None else None
                due = stored is not None and stored <= time.time()
                idle = not self._rt.is_active(request_id)
                if run is not None and run.status == "suspended" and due and idle:
                    await self._fail(run)
        except StorageError as exc:  # the store says why; the next start reclaims the run
            self._rt.log.warning("neta: run %s could not be reclaimed: %s", request_id, exc)
        finally:
            if self._timers.get(request_id) is asyncio.current_task():
                del self._timers[request_id]

    async def _fail(self, run: Run) -> None:
        timeout = run.options.suspend_timeout or self._rt.config.suspend_timeout
        await fail_run(
            self._rt.runs,
            run,
            await self._rt.emitter(run),
            ErrorCode.USER_NO_RESPONSE,
            f"nobody answered within the run's suspend timeout of {timeout:g} s, so it was "
            "stopped; send the prompt again to start over",
            recoverable=False,
        )
        await self._rt.subagents.stop_children(run, "user")
