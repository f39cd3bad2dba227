"""The ``delegate`` tool: hand independent parts of a task to sub-agents that work in parallel.

Each task becomes a child run of the calling run (a full run of its own, followable and resumable
like any other); the tool returns once every child has ended, with their answers. Its run's
scope starts them, through the runtime's :class:`Delegator`; this module only says what may be
asked.
"""

from __future__ import annotations

from typing import Annotated, Protocol

from pydantic import Field

from .registry import ToolContext, tool
from .scope import RunScope
from .values import SubTask, ToolResult

MAX_TASKS = 8
"""Children one call may start."""


class Delegator(Protocol):
    """Starts a run's child runs and waits for them (supplied by the runtime)."""

    async def delegate(self, tasks: list[SubTask]) -> ToolResult:
        """Run one child per task, in parallel; their answers once every one has ended."""
        ...


@tool(name="delegate", readonly=True, starts_runs=True)
async def delegate(
    ctx: ToolContext,
    scope: RunScope,
    tasks: Annotated[
        list[SubTask],
        Field(min_length=1, max_length=MAX_TASKS, description="one entry per sub-agent"),
    ],
) -> ToolResult:
    """Hand independent parts of the work to sub-agents that work at the same time.

    Use it when the request has parts that do not depend on each other (one file each, one
    question each); each sub-agent starts fresh with only its task, so say everything it needs.
    Do not use it for a single step you can do yourself.
    """
    return await scope.delegate(tasks)
