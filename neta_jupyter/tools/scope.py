"""What a tool may do to the run that called it: ask the user, suspend, publish side events.

A tool that needs its run declares a parameter typed :class:`RunScope`; the registry fills it
(like the leading ``ToolContext``) and never shows it to the model::

    @tool(readonly=True)
    async def confirm(ctx: ToolContext, scope: RunScope, plan: str) -> str:
        return await scope.ask(f"Go ahead with: {plan}?", ["yes", "no"])

The runtime supplies the scope; the loop knows no tool by name. A scope has exactly these
capabilities (ids and options, a question for the user, a suspension, work in the background,
the todo list, side events, the call's partial output and missing credentials, child runs), so a
tool cannot end, restart or rewrite its run.

Exceptions (who raises → who catches)::

    RunSuspended   raised by RunScope.ask / suspend / in_background inside a tool, caught by the
                   runtime, which suspends the run (the tool runs again from the top when the
                   run resumes)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from ..events import EventData, EventType, SuspendReason, TodoItem

if TYPE_CHECKING:
    from .values import SubTask, ToolResult

SIDE_EVENTS = frozenset(
    {
        EventType.TODO_UPDATE,
        EventType.TOOL_EVENT,
        EventType.SUBAGENT_RUN_STARTED,
        EventType.SUBAGENT_EVENT,
        EventType.SUBAGENT_RUN_COMPLETED,
    }
)
"""The events a tool may publish on its run's stream (the rest belong to the runtime)."""


class RunSuspended(Exception):
    """The tool suspended its run; the runtime turns this into MESSAGE_SUSPENDED."""

    def __init__(self, reason: SuspendReason) -> None:
        super().__init__(reason.message or reason.type)
        self.reason = reason


class RunScope(Protocol):
    """The run a tool call belongs to, as far as the tool may act on it."""

    @property
    def request_id(self) -> str:
        """The run."""
        ...

    @property
    def session_id(self) -> str:
        """Its session."""
        ...

    @property
    def principal(self) -> str:
        """The user it runs for."""
        ...

    @property
    def tool_call_id(self) -> str:
        """The tool call the scope belongs to."""
        ...

    @property
    def resumed(self) -> bool:
        """Whether the call suspended the run before and runs again, from the top, now."""
        ...

    async def ask(self, question: str, options: Sequence[str] = ()) -> str:
        """The user's answer to ``question`` (``options``: suggested answers).

        The first time, the run suspends until the user answers (CLARIFY_REQUEST, then
        MESSAGE_SUSPENDED); when it resumes, the call runs again and this returns the answer.
        """
        ...

    def suspend(self, message: str) -> NoReturn:
        """Suspend the run until it is resumed (MANUAL_SUSPEND); then the call runs again."""
        ...

    async def in_background(
        self, work: Callable[[float | None], Awaitable[ToolResult]], message: str
    ) -> ToolResult:
        """``work``'s result, without holding the run while it runs.

        The first time, ``work(limit)`` starts (``limit``: its time limit in seconds, ``None``
        for none) and the run suspends (MESSAGE_SUSPENDED ``ASYNC_TOOL_PENDING``, ``message``);
        once the work ends the run goes on by itself, the call runs again and this returns the
        result (or raises the work's :class:`~.registry.ToolError`). Nothing the work reports
        is published meanwhile: the run's stream is at rest while it waits.
        """
        ...

    async def set_todo(self, items: Sequence[TodoItem]) -> None:
        """Replace the session's todo list (later prompts show it) and publish TODO_UPDATE."""
        ...

    def emit(self, event_type: EventType, data: EventData) -> None:
        """Publish a side event (one of :data:`SIDE_EVENTS`) on the run's stream."""
        ...

    def stream(self, text: str) -> None:
        """Show output of the call as it comes (TOOL_EVENT ``tool_stream_data``, batched).

        The model still reads the whole output in the call's result; this is for the user.
        """
        ...

    def auth_required(self, user_message: str, payload: dict[str, Any] | None = None) -> None:
        """Tell the user the call lacks credentials and what to do (TOOL_EVENT ``auth_required``).

        ``payload``: what is missing, e.g. ``{"variable": "HF_TOKEN"}`` (never the secret).
        """
        ...

    async def delegate(self, tasks: Sequence[SubTask]) -> ToolResult:
        """Start one child run per task (sub-agents, in parallel); their answers once all ended.

        Each child is a full run of its own; :class:`ToolError` when this run may not start any
        (a sub-agent too deep in its tree).
        """
        ...
