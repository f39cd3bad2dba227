"""Executions in the background: the run waits for code without holding an activation.

A tool call that runs work in the background (``python`` with ``background``, a notebook cell)
starts it here and suspends its run with ``ASYNC_TOOL_PENDING``; the call's id is kept in the
run's state (``state.background``). When the work ends, the run goes on by itself under the same
requestId, whoever watches: the call runs again and takes the work's result (or its failure) for
the model. Stopping the run stops the work (the kernel is interrupted).

Work lives in this process only. A server that stops while a run waits leaves the run suspended
with the call's id in its state; the next start resumes it, and the call tells the model that
the code's result was lost with the restart (:data:`LOST`), so the run ends as usual. On a store
several servers share, a starting server cannot tell whether another one still runs the work, so
such a run waits for ``resumeTask`` (which gets the same answer).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ...store import StorageError
from ...tools.values import ToolError, ToolResult
from ..activation.ports import LOST, Work
from ..data.runs import Run
from ..errors import RunConflict

if TYPE_CHECKING:
    from ..host import RunHost


class BackgroundJobs:
    """The background work of the runs of one runtime, one task per waiting call."""

    def __init__(self, runtime: RunHost) -> None:
        self._rt = runtime
        self._jobs: dict[tuple[str, str], asyncio.Task[ToolResult]] = {}
        self._continuing: set[asyncio.Task[None]] = set()
        self._stored: list[tuple[str, str]] = []

    def start(self, run: Run, call_id: str, work: Work, limit: float | None) -> None:
        """Run ``work`` for the run's call; the run goes on by itself once it ends."""
        key = (run.request_id, call_id)
        task = asyncio.ensure_future(work(limit))
        self._jobs[key] = task
        run.state.background = call_id
        task.add_done_callback(lambda done: self._ended(run.request_id, call_id, done))

    def waits(self, request_id: str) -> bool:
        """Whether the run waits for work running here."""
        return any(rid == request_id for rid, _ in self._jobs)

    def lost(self, run: Run, call_id: str) -> bool:
        """Whether the run waited for the call's work and this process has none (a restart)."""
        return run.state.background == call_id and (run.request_id, call_id) not in self._jobs

    async def result(self, run: Run, call_id: str) -> ToolResult:
        """The call's work's result once it has ended (it is forgotten then).

        Raises the work's :class:`ToolError`, or one saying the work was lost.
        """
        task = self._jobs.get((run.request_id, call_id))
        if task is None:
            run.state.background = None
            raise ToolError(LOST)
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._jobs.pop((run.request_id, call_id), None)
                run.state.background = None

    async def cancel(self, request_id: str) -> None:
        """Stop the run's work (it is being stopped)."""
        tasks = [t for (rid, _), t in self._jobs.items() if rid == request_id]
        for key in [k for k in self._jobs if k[0] == request_id]:
            del self._jobs[key]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        """Stop all work: the server shuts down (its runs stay suspended until the next start)."""
        tasks, self._jobs = list(self._jobs.values()), {}
        for task in [*tasks, *self._continuing]:
            task.cancel()
        await asyncio.gather(*tasks, *self._continuing, return_exceptions=True)

    async def recover(self) -> int:
        """At start-up: runs that waited for the last process's work (see :meth:`resume_stored`)."""
        if self._rt.store.leases.shared:
            # Another live server may be running the work: such a run waits for a resume.
            return 0
        found = await self._rt.runs.find(status="suspended", limit=100_000)
        self._stored = [(r.request_id, r.state.background) for r in found if r.state.background]
        return len(self._stored)

    def resume_stored(self) -> None:
        """Continue the runs :meth:`recover` found (their calls report the lost work)."""
        stored, self._stored = self._stored, []
        for request_id, call_id in stored:
            self._continue_later(request_id, call_id)

    # --- internals

    def _ended(self, request_id: str, call_id: str, task: asyncio.Task[ToolResult]) -> None:
        if task.cancelled():
            return
        with contextlib.suppress(BaseException):
            task.exception()  # retrieved by the call that runs again
        self._continue_later(request_id, call_id)

    def _continue_later(self, request_id: str, call_id: str) -> None:
        task = asyncio.ensure_future(self._continue(request_id, call_id))
        self._continuing.add(task)
        task.add_done_callback(self._continuing.discard)

    async def _continue(self, request_id: str, call_id: str) -> None:
        """Resume the run once the activation that started its work has ended."""
        await self._rt.wait(request_id)
        try:
            await self._resume(request_id, call_id)
        except RunConflict:
            pass  # resumed or stopped meanwhile: whoever did it takes the result
        except StorageError as exc:
            self._rt.log.warning("neta: run %s could not go on: %s", request_id, exc)

    async def _resume(self, request_id: str, call_id: str) -> None:
        """Continue the run if it still waits for the call's work (RunConflict if not)."""
        rt, refused = self._rt, f"run {request_id} no longer waits for that work"
        with rt.waiting.claim(request_id):  # not resumed or reclaimed meanwhile
            await rt.takeover.take(request_id, "RUN_NOT_SUSPENDED", refused)
            async with rt.takeover.releasing(request_id):
                run = await rt.runs.get(request_id)
                waits = run is not None and run.status == "suspended"
                if run is None or not waits or run.state.background != call_id:
                    raise RunConflict(refused, code="RUN_NOT_SUSPENDED")
                if rt.is_active(request_id) or rt.stopping:
                    raise RunConflict(refused, code="RUN_NOT_SUSPENDED")
                await rt.continue_run(run)
