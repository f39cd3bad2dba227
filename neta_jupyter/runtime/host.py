"""The host the runtime's helpers work for: what scheduling and run trees may ask of the runtime.

Waiting, takeover, hand-off, background work and sub-agents type against :class:`RunHost`, not
against :class:`~neta_jupyter.runtime.manager.Runtime`, so none of them imports the runtime and
each can be exercised with the small host of :mod:`.fake_host`. The runtime satisfies the protocol
by its shape; nothing registers it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Literal, Protocol

from ..providers import ModelRegistry
from ..store import EventRow, Push, Store
from ..tools import ToolRegistry
from ..tools.registry import KernelBridge, RunNotebook
from .config import RuntimeConfig
from .data.runs import Run, Runs
from .log.emitter import RunEmitter

CancelReason = Literal["user", "timeout", "shutdown", "fenced"]
"""Why an activation is cancelled: the user stopped it (USER_CANCELLED), the run that delegated
to it ran out of time (TASK_TIMEOUT), the server shuts down (suspended, resumable), or another
server took the run over (fenced: nothing more is written)."""

KernelFactory = Callable[[Run], KernelBridge | None]
NotebookFactory = Callable[[Run], RunNotebook | None]


class LiveRun(Protocol):
    """A run that a live client drives (an MCP session, whose calls wait while it asks).

    Such a run is never suspended: its asks' answers go to the calls waiting for them, through the
    same ``resume`` as any other and checked the same way, and ``terminate`` ends it.
    """

    async def answer(
        self,
        principal: str,
        *,
        approved: bool | None,
        ask_id: str | None,
        always: bool,
        answer: str | None,
        digest: str | None,
    ) -> Run:
        """Decide a pending ask of the run; the run as it is then."""
        ...

    async def stop(self, principal: str) -> Run:
        """End the run (USER_CANCELLED), its calls under way cancelled first."""
        ...


class Claims(Protocol):
    """Runs being resumed or stopped right now (one claim at a time per run)."""

    def claim(self, request_id: str) -> AbstractContextManager[None]:
        """Hold the run while it is resumed or stopped (refused while another holds it)."""
        ...


class Leases(Protocol):
    """The leases of runs shared by several servers."""

    async def take(self, request_id: str, code: str, refused: str) -> None:
        """Take the run's lease from a server that lost it, or refuse with ``code``."""
        ...

    def releasing(self, request_id: str) -> AbstractAsyncContextManager[None]:
        """Hold the run's lease while the block runs and let it go after."""
        ...


class Children(Protocol):
    """A run's child runs."""

    async def stop_children(self, run: Run, how: CancelReason) -> None:
        """Stop every child run of ``run``."""
        ...


class RunHost(Protocol):
    """What the runtime offers its helpers."""

    store: Store
    runs: Runs
    config: RuntimeConfig
    log: logging.Logger
    models: ModelRegistry
    tools: ToolRegistry
    kernels: KernelFactory | None

    @property
    def stopping(self) -> bool:
        """The process shuts down: no activation starts."""
        ...

    @property
    def waiting(self) -> Claims:
        """Claims on runs being resumed or stopped."""
        ...

    @property
    def takeover(self) -> Leases:
        """Leases of runs shared by several servers."""
        ...

    @property
    def subagents(self) -> Children:
        """The child runs of runs."""
        ...

    def is_active(self, request_id: str) -> bool:
        """Whether an activation of the run is executing in this process."""
        ...

    def cancel_reason(self, request_id: str) -> CancelReason:
        """Why the run's activation is being cancelled."""
        ...

    async def cancel(self, request_id: str, reason: CancelReason) -> None:
        """Cancel the run's activation in this process."""
        ...

    async def wait(self, request_id: str) -> None:
        """Return once the run's activation in this process has ended."""
        ...

    def follow(
        self,
        request_id: str,
        after: int,
        *,
        heartbeat: float | None = None,
        push: Push | None = None,
    ) -> AsyncIterator[list[EventRow]]:
        """The run's stored events after ``after``, batch by batch, as they are written."""
        ...

    async def continue_run(self, run: Run) -> None:
        """Start an activation of a run from its stored step."""
        ...

    async def emitter(self, run: Run) -> RunEmitter:
        """Where the run's events are written."""
        ...

    async def get_run(self, principal: str, request_id: str) -> Run:
        """The principal's run (``RunNotFound`` for another's)."""
        ...

    async def resume(
        self,
        principal: str,
        request_id: str,
        *,
        approved: bool | None = None,
        ask_id: str | None = None,
        always: bool = False,
        answer: str | None = None,
        digest: str | None = None,
    ) -> Run:
        """Answer the run's pending ask and continue it."""
        ...

    async def retry(self, principal: str, request_id: str) -> Run:
        """Start the run again from its last step."""
        ...
