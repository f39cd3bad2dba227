"""The runtime's side of :class:`~neta_jupyter.tools.scope.RunScope`: one per tool call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NoReturn

from ...events import (
    ClarifyData,
    EventData,
    EventType,
    SuspendReason,
    SuspendType,
    TodoData,
    TodoItem,
)
from ...providers.base import ToolCall
from ...store import RecordStore, new_id
from ...tools.delegate import Delegator
from ...tools.scope import SIDE_EVENTS, RunSuspended
from ...tools.values import SubTask, ToolError, ToolResult
from ..data.runs import Run
from ..data.state import Ask
from ..log.emitter import RunEmitter
from .ports import Jobs, pending
from .toolstream import ToolOutputStream, auth_required_event


class CallScope:
    """What one tool call may do to its run (it satisfies ``RunScope``).

    ``answer`` is the user's answer when the run was resumed with one for this call, and
    ``resumed`` says the call suspended the run before, so it is running again. ``delegator``
    starts the run's child runs (``None``: this run may not start any).
    """

    def __init__(
        self,
        run: Run,
        call: ToolCall,
        *,
        emitter: RunEmitter,
        records: RecordStore,
        resumed: bool = False,
        answer: str | None = None,
        delegator: Delegator | None = None,
        jobs: Jobs | None = None,
        background_limit: float | None = None,
    ) -> None:
        self._run = run
        self._call = call
        self._emitter = emitter
        self._records = records
        self._resumed = resumed
        self._answer = answer
        self._delegator = delegator
        self._jobs = jobs
        self._background_limit = background_limit
        self._output: ToolOutputStream | None = None

    @property
    def request_id(self) -> str:
        """The run."""
        return self._run.request_id

    @property
    def session_id(self) -> str:
        """Its session."""
        return self._run.session_id

    @property
    def principal(self) -> str:
        """The user it runs for."""
        return self._run.principal

    @property
    def tool_call_id(self) -> str:
        """The tool call the scope belongs to."""
        return self._call.id

    @property
    def resumed(self) -> bool:
        """Whether the call suspended the run before and runs again now."""
        return self._resumed

    async def ask(self, question: str, options: Sequence[str] = ()) -> str:
        """The answer, or suspend the run until there is one."""
        if self._answer is not None:
            return self._answer
        ask_id = new_id("clr")
        self._run.state.ask = Ask(
            kind="question", ask_id=ask_id, tool_call_id=self._call.id, tool_name=self._call.name
        )
        self._emitter.emit(
            EventType.CLARIFY_REQUEST,
            ClarifyData(
                clarify_id=ask_id,
                question=question,
                options=list(options),
                tool_call_id=self._call.id,
            ),
        )
        raise RunSuspended(
            SuspendReason(type=SuspendType.CLARIFY_REQUEST, ask_id=ask_id, message=question)
        )

    def suspend(self, message: str) -> NoReturn:
        """Suspend until the run is resumed."""
        raise RunSuspended(SuspendReason(type=SuspendType.MANUAL_SUSPEND, message=message))

    async def in_background(
        self, work: Callable[[float | None], Awaitable[ToolResult]], message: str
    ) -> ToolResult:
        """The work's result; the first time, start it and suspend (ASYNC_TOOL_PENDING)."""
        if self._jobs is None:
            raise ToolError("this run cannot wait for work in the background")
        if self._resumed:
            return await self._jobs.result(self._run, self._call.id)
        self._jobs.start(self._run, self._call.id, work, self._background_limit)
        raise RunSuspended(pending(message))

    async def set_todo(self, items: Sequence[TodoItem]) -> None:
        """Store the session's todo list and show it."""
        await self._records.set_todo(self._run.session_id, [i.model_dump() for i in items])
        self._emitter.emit(EventType.TODO_UPDATE, TodoData(items=list(items)))

    def emit(self, event_type: EventType, data: EventData) -> None:
        """Publish a side event."""
        if event_type not in SIDE_EVENTS:
            raise ValueError(f"a tool may not publish {event_type}; side events only")
        self._emitter.emit(event_type, data)

    def stream(self, text: str) -> None:
        """Publish partial output, batched."""
        if self._output is None:
            self._output = ToolOutputStream(self._emitter, self._call.id, self._call.name)
        self._output.write(text)

    def auth_required(self, user_message: str, payload: dict[str, Any] | None = None) -> None:
        """Publish the credentials the call lacks."""
        self._emitter.emit(
            EventType.TOOL_EVENT,
            auth_required_event(self._call.id, self._call.name, user_message, payload),
        )

    def close_output(self) -> None:
        """The call ended: the output it streamed goes out before its TOOL_COMPLETED/FAILED."""
        if self._output is not None:
            self._output.close()

    async def delegate(self, tasks: Sequence[SubTask]) -> ToolResult:
        """Child runs of this run, one per task; their answers once every one has ended."""
        if self._delegator is None:
            raise ToolError("sub-agents cannot be started from this run")
        return await self._delegator.delegate(list(tasks))
