"""The runs executing in this process: one asyncio task per activation, and how each ends.

Whatever ends an activation (finish, suspension, timeout, cancel, a failing step, shutdown)
ends the run's stream with exactly one terminal event, written with the status it implies.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine
from typing import Any

from ...events import ErrorCode, EventType, SuspendReason, SuspendType
from ...providers import ProviderError
from ...providers.base import AuthenticationRequired, ProviderInvalidRequest
from ...store import LeaseLost, StorageError, Store
from ..activation.endings import end_run, fail_run
from ..activation.loop import RunLoop
from ..activation.toolstream import model_auth_event
from ..config import RuntimeConfig
from ..context.fetch import ImportFailed
from ..data.runs import Run, Runs, failure_message, snapshot_problem
from ..data.snapshots import SnapshotInvalid
from ..data.steps import Finish, Step, Suspend
from ..errors import RunConflict
from ..host import CancelReason
from ..log.emitter import RunEmitter
from .pauses import PAUSED, deadline_of

LoopFactory = Callable[[Run, RunEmitter], RunLoop]
Preparation = Callable[[Run, RunEmitter], Awaitable[None]]


class Activations:
    """Starts, cancels and ends the activations of runs."""

    def __init__(
        self,
        store: Store,
        runs: Runs,
        config: RuntimeConfig,
        loop_of: LoopFactory,
        log: logging.Logger,
        on_suspended: Callable[[Run], None] = lambda run: None,
        prepare: Preparation | None = None,
    ) -> None:
        self._store = store
        self._runs = runs
        self._config = config
        self._loop_of = loop_of
        self._log = log
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cancel_reason: dict[str, CancelReason] = {}
        self._pauses: set[str] = set()
        self._on_suspended = on_suspended
        self._prepare = prepare
        self._stopping = False

    async def emitter(self, run: Run) -> RunEmitter:
        """Where the run's events go, numbered from its state, once its stream can take them."""
        await self._store.events.open(run.request_id)
        emitter = RunEmitter(self._store.events, run.request_id)
        emitter.step = run.state.step or None
        emitter.total_tokens = run.state.usage.total_tokens or None
        return emitter

    @property
    def count(self) -> int:
        """How many activations execute now."""
        return len(self._tasks)

    def is_active(self, request_id: str) -> bool:
        """Whether the run's task is executing in this process."""
        return request_id in self._tasks

    async def wait(self, request_id: str) -> None:
        """Until the run's current activation ends."""
        task = self._tasks.get(request_id)
        if task is not None:
            await asyncio.shield(task)

    def launch(self, run: Run, step: Step) -> None:
        """Activate ``run`` from ``step``."""
        self._tasks[run.request_id] = asyncio.create_task(
            self._finally_inactive(run.request_id, self._activate(run, step)),
            name=f"neta-run-{run.request_id}",
        )

    async def cancel(self, request_id: str, reason: CancelReason) -> bool:
        """Cancel the run's activation and wait for its end; False when it has none."""
        task = self._tasks.get(request_id)
        if task is None:
            return False
        self._cancel_reason[request_id] = reason
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return True

    def pause(self, request_id: str) -> bool:
        """Have the run's activation suspend at its next step boundary; False when it has none."""
        if request_id not in self._tasks:
            return False
        self._pauses.add(request_id)
        return True

    def cancel_reason(self, request_id: str) -> CancelReason:
        """Why the run's activation is being cancelled (no reason given: its time ran out)."""
        return self._cancel_reason.get(request_id, "timeout")

    @property
    def stopping(self) -> bool:
        """The runtime is shutting down: no activation starts."""
        return self._stopping

    async def shutdown(self) -> None:
        """Suspend every executing run with SHUTDOWN_INTERRUPT (resumable after restart)."""
        self._stopping = True
        tasks = list(self._tasks.items())
        for request_id, task in tasks:
            self._cancel_reason[request_id] = "shutdown"
            task.cancel()
        await asyncio.gather(*(t for _, t in tasks), return_exceptions=True)

    async def end(self, run: Run, emitter: RunEmitter, outcome: Suspend | Finish) -> None:
        """MESSAGE_SUSPENDED or MESSAGE_COMPLETED."""
        if isinstance(outcome, Suspend):
            run.state.suspend_deadline = deadline_of(run, outcome.reason, self._config)
        await self._settle(lambda: end_run(self._runs, run, emitter, outcome))
        if run.status == "suspended":
            self._on_suspended(run)

    async def fail(
        self,
        run: Run,
        emitter: RunEmitter,
        code: ErrorCode,
        message: str,
        *,
        recoverable: bool,
        network_error: bool = False,
        wait: bool = True,
    ) -> None:
        """MESSAGE_FAILED; ``wait`` for the store when it cannot be written (else raise)."""

        async def write() -> None:
            await fail_run(
                self._runs,
                run,
                emitter,
                code,
                message,
                recoverable=recoverable,
                network_error=network_error,
            )

        if wait:
            await self._settle(write)
        else:
            await write()

    async def refuse_invalid(
        self, run: Run, known: Collection[str], *, retrying: bool = False
    ) -> None:
        """End a run about to be continued whose stored position cannot be loaded.

        MESSAGE_FAILED ``RUN_SNAPSHOT_INVALID``, then RunConflict with the same message.
        ``known``: the tools the runtime offers. A retry is refused so only for a run that could
        be retried (its last failure said so when its state cannot tell).
        """
        problem = snapshot_problem(run, known)
        if problem is None or (retrying and not await self._retryable(run)):
            return
        message = failure_message(problem)
        emitter = await self.emitter(run)
        await self.fail(
            run, emitter, ErrorCode.RUN_SNAPSHOT_INVALID, message, recoverable=False, wait=False
        )
        raise RunConflict(message, code=ErrorCode.RUN_SNAPSHOT_INVALID.value)

    async def _retryable(self, run: Run) -> bool:
        if run.status != "failed":
            return False
        if run.snapshot_error is None:
            return run.state.recoverable
        last = await self._store.events.last_event(run.request_id)
        data = json.loads(last.payload).get("data", {}) if last is not None else {}
        return last is not None and last.terminal and data.get("recoverable") is True

    async def _settle(self, write: Callable[[], Awaitable[None]]) -> None:
        """Make a run's ending, waiting while the store cannot be written.

        An ending emits its terminal event only after every write that can fail, so a retry
        never emits a second one. At shutdown it gives up: the run is still running in the
        store, and the next start ends it with SYSTEM_CRASH.
        """
        while True:
            try:
                await write()
                return
            except StorageError:
                if self._stopping:
                    return
                await self._store.writable()

    async def _finally_inactive(self, request_id: str, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work``; the run stops counting as active before anyone awaiting it resumes."""
        try:
            await work
        finally:
            if self._tasks.get(request_id) is asyncio.current_task():
                del self._tasks[request_id]
                self._pauses.discard(request_id)

    async def _activate(self, run: Run, step: Step) -> None:
        emitter = await self.emitter(run)
        try:
            deadline = asyncio.get_running_loop().time() + self._config.task_timeout
            async with asyncio.timeout_at(deadline):
                if self._prepare is not None:  # e.g. start the MCP servers the run may use
                    await self._prepare(run, emitter)
                loop = self._loop_of(run, emitter)
                outcome = await loop.drive(
                    step, lambda: self._paused(run.request_id), deadline=deadline
                )
            await self.end(run, emitter, outcome)
        except TimeoutError:
            await self.fail(
                run,
                emitter,
                ErrorCode.TASK_TIMEOUT,
                f"the run exceeded its time limit of {self._config.task_timeout:g} s",
                recoverable=False,
            )
        except asyncio.CancelledError:
            await self._cancelled(run, emitter)
        except SnapshotInvalid as exc:
            await self.fail(
                run,
                emitter,
                ErrorCode.RUN_SNAPSHOT_INVALID,
                failure_message(exc.message),
                recoverable=False,
            )
        except ProviderError as exc:
            invalid = isinstance(exc, ProviderInvalidRequest)
            if isinstance(exc, AuthenticationRequired):
                emitter.emit(EventType.TOOL_EVENT, model_auth_event(exc))
            await self.fail(
                run,
                emitter,
                ErrorCode.LLM_INVALID_REQUEST if invalid else ErrorCode.LLM_ERROR,
                f"model call failed: {exc}",
                recoverable=exc.recoverable,
                network_error=exc.network_error,
            )
        except ImportFailed as exc:
            await self.fail(
                run,
                emitter,
                ErrorCode.ATTACHMENT_IMPORT_FAILED,
                str(exc),
                recoverable=exc.transient,
                network_error=exc.transient,
            )
        except LeaseLost:
            self._log.warning("neta: run %s stopped here: another server holds it", run.request_id)
        except StorageError as exc:  # logged once per spell by the store, not once per run
            await self.fail(
                run,
                emitter,
                ErrorCode.INTERNAL_ERROR,
                f"the run was stopped: the server could not save it ({exc.reason})",
                recoverable=False,
            )
        except Exception as exc:
            self._log.exception("run %s failed", run.request_id)
            await self.fail(
                run,
                emitter,
                ErrorCode.INTERNAL_ERROR,
                f"internal error: {type(exc).__name__}",
                recoverable=False,
            )

    def _paused(self, request_id: str) -> SuspendReason | None:
        return PAUSED if request_id in self._pauses else None

    async def _cancelled(self, run: Run, emitter: RunEmitter) -> None:
        reason = self._cancel_reason.pop(run.request_id, "user")
        if reason == "fenced":
            self._log.warning("neta: run %s stopped here: another server holds it", run.request_id)
        elif reason == "shutdown":
            why = SuspendReason(
                type=SuspendType.SHUTDOWN_INTERRUPT,
                message="the server shut down; resume the run to continue",
            )
            await self.end(run, emitter, Suspend(why))
        elif reason == "timeout":
            await self.fail(
                run,
                emitter,
                ErrorCode.TASK_TIMEOUT,
                "the run that delegated this task ran out of time",
                recoverable=False,
            )
        else:
            await self.fail(
                run, emitter, ErrorCode.USER_CANCELLED, "the run was cancelled", recoverable=False
            )
