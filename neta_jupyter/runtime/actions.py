"""The run API's actions: one table that every transport and document reads.

Each action is declared once: its name (the client's and the widget's word), its REST route under
``neta/api/``, its WebSocket frame type, its request model (:mod:`.requests`) and what the runtime
does with it, answered as JSON. The server registers its ``POST`` routes and its WebSocket frames
from this table, the OpenAPI document describes it, the client's in-process transport answers it,
:class:`~neta_jupyter.client.RunClient` finds its routes in it, and the TypeScript client
(``js/src/api.ts``, ``python -m neta_jupyter.runtime.actions``) is generated from it. A new action
is one row here and the runtime method it calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from . import reads
from .requests import (
    CompactRequest,
    ImportRequest,
    InputRequest,
    LeafRequest,
    RequestRef,
    ResumeRequest,
    StartRequest,
    ThinkingLevelRequest,
    resume_run,
    retry_run,
    start_run,
)

if TYPE_CHECKING:
    from .data.runs import Run
    from .manager import Runtime

__all__ = ["ACTIONS", "Action", "action_named"]

B = TypeVar("B", bound=BaseModel)
Answer = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Action(Generic[B]):
    """One action of the run API, as every transport offers it."""

    name: str
    """The client's method and the widget's action (``resume``)."""
    route: str
    """The REST route under ``neta/api/`` (``POST``)."""
    frame: str
    """The WebSocket frame type that does it."""
    request: type[B]
    """The body of the route and the fields of the frame."""
    perform: Callable[[Runtime, str, B], Awaitable[Answer]]
    """Do it for a principal; the answer's fields (the same on every transport)."""
    summary: str
    """One line for the OpenAPI document and the TypeScript client."""
    follows: bool = False
    """It starts a run that the WebSocket then follows (answered ``started``, not ``ack``)."""
    also_frames: tuple[str, ...] = ()
    """Other frame types that do it too (older names still accepted)."""
    extra_errors: tuple[int, ...] = ()
    """Error statuses beyond the ones every route has."""

    async def answer(self, runtime: Runtime, principal: str, body: BaseModel) -> Answer:
        """Do it with a body already validated as :attr:`request`."""
        if not isinstance(body, self.request):
            raise TypeError(f"{self.name} takes a {self.request.__name__}")
        return await self.perform(runtime, principal, body)


def _started(run: Run) -> Answer:
    return {"requestId": run.request_id, "sessionId": run.session_id, "status": run.status}


def _status(run: Run) -> Answer:
    return {"requestId": run.request_id, "status": run.status}


async def _start(runtime: Runtime, principal: str, body: StartRequest) -> Answer:
    if body.leaf_entry_id is not None and body.session_id is not None:
        await runtime.switch_leaf(principal, body.session_id, body.leaf_entry_id)
    return _started(await start_run(runtime, principal, body))


async def _resume(runtime: Runtime, principal: str, body: ResumeRequest) -> Answer:
    return _status(await resume_run(runtime, principal, body))


async def _retry(runtime: Runtime, principal: str, body: RequestRef) -> Answer:
    return _status(await retry_run(runtime, principal, body))


async def _terminate(runtime: Runtime, principal: str, body: RequestRef) -> Answer:
    return _status(await runtime.terminate(principal, body.request_id))


async def _suspend(runtime: Runtime, principal: str, body: RequestRef) -> Answer:
    return _status(await runtime.suspend(principal, body.request_id))


async def _input(runtime: Runtime, principal: str, body: InputRequest) -> Answer:
    input_id = await runtime.add_input(principal, body.request_id, body.content)
    return {"requestId": body.request_id, "inputId": input_id}


async def _import(runtime: Runtime, principal: str, body: ImportRequest) -> Answer:
    run = await runtime.import_run(
        principal, body.session_name, body.content, body.answer, body.tool_calls
    )
    return _started(run)


async def _compact(runtime: Runtime, principal: str, body: CompactRequest) -> Answer:
    run = await runtime.compact_session(
        principal, body.session_id, instructions=body.instructions, model=body.model
    )
    return _started(run)


async def _leaf(runtime: Runtime, principal: str, body: LeafRequest) -> Answer:
    await runtime.switch_leaf(principal, body.session_id, body.leaf_entry_id)
    return await reads.tree_now(runtime, principal, body.session_id)


async def _thinking_level(runtime: Runtime, principal: str, body: ThinkingLevelRequest) -> Answer:
    await runtime.set_thinking_level(principal, body.session_id, body.level)
    return {"sessionId": body.session_id, "level": body.level}


ACTIONS: tuple[Action[Any], ...] = (
    Action(
        "start",
        "agent/run/async",
        "chat",
        StartRequest,
        _start,
        "Start a run",
        follows=True,
        extra_errors=(429,),
    ),
    Action(
        "resume",
        "agent/run/resumeTask",
        "resume",
        ResumeRequest,
        _resume,
        "Resume a suspended run",
        also_frames=("clarify_response",),
    ),
    Action(
        "retry", "agent/run/retryTask", "retry", RequestRef, _retry, "Retry a recoverable failure"
    ),
    Action(
        "terminate", "agent/run/terminateTask", "terminate", RequestRef, _terminate, "Cancel a run"
    ),
    Action(
        "suspend",
        "agent/run/suspendTask",
        "suspend",
        RequestRef,
        _suspend,
        "Pause a running run at its next step boundary",
    ),
    Action(
        "input",
        "agent/run/addSupplementaryInput",
        "supplementary_input",
        InputRequest,
        _input,
        "Add input to a running run",
    ),
    Action(
        "import",
        "agent/run/import",
        "import",
        ImportRequest,
        _import,
        "Register a history run without a stream",
    ),
    Action(
        "compact",
        "sessions/compact",
        "compact",
        CompactRequest,
        _compact,
        "Compact a session now",
        follows=True,
    ),
    Action(
        "leaf",
        "sessions/leaf",
        "switch_leaf",
        LeafRequest,
        _leaf,
        "Move a session's current leaf; the session's tree",
    ),
    Action(
        "thinking_level",
        "sessions/thinkingLevel",
        "set_thinking_level",
        ThinkingLevelRequest,
        _thinking_level,
        "Set how hard the model thinks in a session's next runs",
    ),
)
"""Every action of the run API, in the order the documents list them."""

_BY_NAME = {action.name: action for action in ACTIONS}


def action_named(name: str) -> Action[Any]:
    """The action called ``name`` (a ``KeyError`` for none)."""
    return _BY_NAME[name]
