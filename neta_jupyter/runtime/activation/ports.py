"""What one activation asks of the rooms above it: background work and sub-agents.

The loop names these protocols, not the classes that answer them
(:class:`..scheduling.background.BackgroundJobs`, :class:`..trees.subagents.Subagents`), so the
activation's code imports nothing of the scheduling or of run trees. What both sides say of
background work (why a run waits for it, the result of work a restart lost) is here too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from ...events import SuspendReason, SuspendType
from ...tools.delegate import Delegator
from ...tools.values import ToolResult
from ..data.runs import Run
from ..log.emitter import RunEmitter

Work = Callable[[float | None], Awaitable[ToolResult]]
"""A call's work in the background, given the seconds it may take (``None``: no limit)."""

LOST = (
    "the server restarted while this code ran in the background, so its result was lost; the "
    "kernel may have finished it or been restarted: check its variables before running it again"
)
"""The result of a background call whose work did not survive a server restart."""


def pending(message: str) -> SuspendReason:
    """Why a run waits for its background work."""
    return SuspendReason(type=SuspendType.ASYNC_TOOL_PENDING, message=message)


class Jobs(Protocol):
    """Work of a run's calls that goes on without holding an activation."""

    def start(self, run: Run, call_id: str, work: Work, limit: float | None) -> None:
        """Run ``work`` for the run's call; the run goes on by itself once it ends."""
        ...

    def lost(self, run: Run, call_id: str) -> bool:
        """Whether the run waited for the call's work and this process has none."""
        ...

    async def result(self, run: Run, call_id: str) -> ToolResult:
        """The call's work's result once it has ended."""
        ...


class Delegation(Protocol):
    """Starts a run's child runs for a ``delegate`` call."""

    def delegator(self, run: Run, emitter: RunEmitter, call_id: str) -> Delegator | None:
        """What the ``delegate`` tool starts children with (``None``: the run may not)."""
        ...
