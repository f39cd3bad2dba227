"""Crews from the notebook: ``neta_jupyter.crew(...)`` and ``%neta crew run``.

The crew runs where the kernel's runs do (on the Jupyter server, or embedded in the kernel); its
handle follows the crew's log on the kernel's loop and redraws a board below the cell: each
task's status, attempt and tokens, the decisions the crew waits for, the latest log lines. The
handle steers it: ``await crew.decide("task", "retry")``, ``pause()``, ``resume()``, ``stop()``.
"""

from __future__ import annotations

import asyncio
import shlex
import weakref
from collections import deque
from collections.abc import AsyncIterator, Generator
from typing import Any, assert_never

from ..client import TransportError
from ..client.crews import CrewSide, HttpCrews, InProcessCrews
from ..crews import CrewDefinition, CrewDefinitionError, definition_of, resolve_inputs
from ..crews.log import ESCALATION, LOG, RUN_STATUS, TASK_STATUS
from ..crews.manager import Crews
from ..events.crews import CrewTaskData
from ..runtime import RunApiError
from ..runtime.requests import APPROVE_MODES
from ..widgets.board import (
    BoardMessage,
    ControlMessage,
    CrewBoardState,
    DecideMessage,
    board_task,
)
from ..widgets.comm import (
    Action,
    InputAction,
    ResumeAction,
    RetryAction,
    SuspendAction,
    TerminateAction,
)
from .context import current_context
from .crew_html import board_html
from .host import PRINCIPAL, Host, HostError

_LOG_LINES = 12
_embedded_crews: weakref.WeakKeyDictionary[Host, Crews] = weakref.WeakKeyDictionary()


def crew_side(host: Host) -> CrewSide:
    """Where the host's crews run."""
    server = getattr(host, "server", None)
    if server is not None:
        return HttpCrews(server.url, dict(server.headers))
    runtime = getattr(host, "runtime", None)
    if runtime is None:
        raise HostError("this kernel's host cannot run crews")
    crews = _embedded_crews.get(host)
    if crews is None:
        crews = _embedded_crews[host] = Crews(runtime)
    return InProcessCrews(crews, PRINCIPAL)


class TaskRuns:
    """The crew's tasks' runs for the board's views, followed and acted on through the host."""

    def __init__(self, host: Host) -> None:
        self.host = host

    async def follow_run(
        self, request_id: str, after_seq: int = -1
    ) -> AsyncIterator[dict[str, Any]]:
        """The run's envelopes, as a view receives them (a dropped connection ends the segment)."""
        try:
            async for envelope in self.host.follow(request_id, after_seq):
                yield self._outgoing(envelope)
        except TransportError:
            return

    async def perform(self, action: Action) -> None:
        """A view's action on the run it names."""
        match action:
            case ResumeAction():
                await self.host.resume(
                    action.request_id,
                    approved=action.approved,
                    ask_id=action.ask_id,
                    always=action.always,
                    answer=action.answer,
                    digest=action.digest,
                )
            case TerminateAction():
                await self.host.terminate(action.request_id)
            case SuspendAction():
                await self.host.suspend(action.request_id)
            case RetryAction():
                await self.host.retry(action.request_id)
            case InputAction():
                await self.host.add_input(action.request_id, action.content)
            case _:
                assert_never(action)

    def _outgoing(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """Embedded images become data URLs the view can load (as for the run widget)."""
        data = envelope.get("data")
        if self.host.mode != "embedded" or not isinstance(data, dict) or not data.get("images"):
            return envelope
        images = [self.host.image_source(str(p)) for p in data["images"]]
        return {**envelope, "data": {**data, "images": images}}


class CrewHandle:
    """A crew started from this kernel: its board, its outputs, its controls (``await`` it)."""

    def __init__(
        self, side: CrewSide, definition: CrewDefinition, inputs: dict[str, str], approve: str
    ) -> None:
        self.side, self.definition, self.inputs, self.approve = side, definition, inputs, approve
        self.request_id: str | None = None
        self.status = "queued"
        self.message: str | None = None
        self.tasks: dict[str, dict[str, Any]] = {
            t.id: {"taskId": t.id, "agent": t.agent, "status": "pending"} for t in definition.tasks
        }
        self.escalations: dict[str, dict[str, Any]] = {}
        self.log: deque[str] = deque(maxlen=_LOG_LINES)
        self.error: str | None = None
        self._ended = asyncio.Event()
        self._settled = asyncio.Event()
        self._display: Any = None
        self._widget: Any = None
        self._clicks: set[asyncio.Task[dict[str, Any]]] = set()
        self._task: asyncio.Task[None] | None = None
        self.runs: TaskRuns | None = None
        """Where the board's views follow the tasks' runs (set when the crew has a host)."""

    # --- following

    def begin(self) -> None:
        """Start the crew and follow it on the running loop."""
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        try:
            self.request_id = await self.side.start(self.definition, self.inputs, self.approve)
            async for envelope in self.side.follow(self.request_id, -1):
                self._apply(envelope)
                self._refresh()
        except (HostError, RunApiError) as exc:
            self.error = exc.message
        finally:
            self._ended.set()
            self._settled.set()
            self._refresh()

    def _apply(self, envelope: dict[str, Any]) -> None:
        kind, data = envelope.get("eventType"), envelope.get("data") or {}
        if kind == RUN_STATUS:
            self.status, self.message = data.get("status", self.status), data.get("message")
            if self.status in ("waiting", "paused"):
                self._settled.set()
            else:
                self._settled.clear()
        elif kind == TASK_STATUS:
            self.tasks[data["taskId"]] = data
        elif kind == ESCALATION:
            self.escalations[data["escalationId"]] = data
        elif kind == LOG:
            self.log.append(f"{data.get('source')}: {data.get('line')}")

    async def wait(self) -> CrewHandle:
        """Until the crew has ended (completed, failed or stopped)."""
        await self._ended.wait()
        return self

    async def settled(self) -> CrewHandle:
        """Until the crew ends or waits for a person (a decision, a resume)."""
        await self._settled.wait()
        return self

    def __await__(self) -> Generator[Any, None, CrewHandle]:
        return self.wait().__await__()

    @property
    def outputs(self) -> dict[str, str]:
        """Each finished task's output."""
        return {t: d["output"] for t, d in self.tasks.items() if d.get("output") is not None}

    def run(self, task: str, *, display: bool = True) -> Any:
        """The task's current run, live in the run widget (a :class:`RunHandle`)."""
        child = (self.tasks.get(task) or {}).get("childRequestId")
        if not child:
            raise HostError(f"task {task!r} has no run yet")
        prompt = self.definition.task(task).description
        return current_context().attach(child, prompt, display=display)

    @property
    def waiting_for(self) -> list[dict[str, Any]]:
        """The decisions the crew waits for."""
        return [e for e in self.escalations.values() if e.get("state") == "open"]

    # --- steering

    async def _control(self, action: str, **fields: Any) -> dict[str, Any]:
        if self.request_id is None:
            await asyncio.sleep(0)
        if self.request_id is None:
            raise HostError("the crew has not started yet")
        return await self.side.control(self.request_id, action, **fields)

    async def pause(self) -> dict[str, Any]:
        """No new task starts; running ones stop at a step boundary."""
        return await self._control("pause")

    async def resume(self) -> dict[str, Any]:
        """Go on."""
        return await self._control("resume")

    async def stop(self) -> dict[str, Any]:
        """End every task that has not ended."""
        return await self._control("stop")

    async def retry(self, task: str | None = None) -> dict[str, Any]:
        """Try a failed task (default: every failed task) again."""
        return await self._control("retry", **({"task_id": task} if task else {}))

    async def decide(
        self,
        task: str,
        decision: str,
        *,
        answer: str | None = None,
        output: str | None = None,
        approved: bool | None = None,
    ) -> dict[str, Any]:
        """Decide what the crew waits for on ``task`` (or an escalation id).

        ``decision``: retry, skip (``output`` is what its dependents get), answer (``answer``;
        ``approved`` for an approval gate) or stop.
        """
        found = [e for e in self.waiting_for if task in (e["taskId"], e["escalationId"])]
        if not found:
            raise HostError(f"the crew waits for no decision on {task!r}")
        fields = {"answer": answer, "output": output, "approved": approved}
        return await self._control(
            "decide",
            escalation_id=found[0]["escalationId"],
            decision=decision,
            **{k: v for k, v in fields.items() if v is not None},
        )

    # --- the board

    def show(self) -> None:
        """Display the board below the cell; it is redrawn as the crew goes on.

        The live board widget where its module is built (buttons decide and control the crew),
        else an HTML board.
        """
        from IPython.display import display

        from ..widgets.crew_board import CrewBoard, available

        if available():
            self._widget = CrewBoard(self._clicked, self.runs, board=self.board_state())
            display(self._widget)  # type: ignore[no-untyped-call]
            return
        self._display = display(self._bundle(), raw=True, display_id=True)  # type: ignore[no-untyped-call]

    def board_state(self) -> dict[str, Any]:
        """What the board widget shows (its ``board`` trait)."""
        state = CrewBoardState.model_validate(
            {
                "name": self.definition.name,
                "mode": self.runs.host.mode if self.runs else "embedded",
                "status": self.status,
                "message": self.error or self.message or "",
                "escalations": self.waiting_for,
                "log": list(self.log),
            }
        )
        tasks = [board_task(CrewTaskData.model_validate(t)) for t in self.tasks.values()]
        return state.model_copy(update={"tasks": tasks}).model_dump(by_alias=True)

    def _clicked(self, message: BoardMessage) -> None:
        """A button of the board: applied on the kernel's loop."""
        match message:
            case DecideMessage():
                fields = message.model_dump(exclude={"type"}, exclude_unset=True)
                work = self._control("decide", **fields)
            case ControlMessage(action=action):
                work = self._control(action)
            case _:
                assert_never(message)
        task = asyncio.ensure_future(work)
        self._clicks.add(task)
        task.add_done_callback(self._clicked_done)

    def _clicked_done(self, task: asyncio.Task[dict[str, Any]]) -> None:
        self._clicks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.error = getattr(exc, "message", str(exc))
            self._refresh()

    def _bundle(self) -> dict[str, str]:
        """The board, and a line of text where HTML is not shown (a saved notebook's text)."""
        return {"text/html": self.board(), "text/plain": repr(self)}

    def _refresh(self) -> None:
        if self._widget is not None:
            self._widget.board = self.board_state()
        if self._display is not None:
            self._display.update(self._bundle(), raw=True)

    def _repr_html_(self) -> str:
        return self.board()

    def board(self) -> str:
        """The crew as an HTML board."""
        return board_html(
            self.definition.name,
            self.status,
            self.message,
            self.error,
            list(self.tasks.values()),
            self.waiting_for,
            list(self.log),
        )

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for task in self.tasks.values():
            counts[task["status"]] = counts.get(task["status"], 0) + 1
        return f"<crew {self.definition.name} {self.status} {counts}>"


def start_crew(
    host: Host,
    definition: Any,
    inputs: dict[str, str] | None = None,
    *,
    approve: str = "ask",
    display: bool = True,
) -> CrewHandle:
    """Start a crew from the notebook and show its board; returns at once."""
    crew = definition_of(definition)
    resolve_inputs(crew, dict(inputs or {}))  # refused here, before anything starts
    handle = CrewHandle(crew_side(host), crew, dict(inputs or {}), approve)
    handle.runs = TaskRuns(host)
    if display:
        handle.show()
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # terminal IPython: no loop between cells, follow until it settles
        from IPython.core.async_helpers import get_asyncio_loop

        loop = get_asyncio_loop()  # type: ignore[no-untyped-call]
        loop.run_until_complete(_settle(handle))
        return handle
    handle.begin()
    return handle


async def _settle(handle: CrewHandle) -> None:
    handle.begin()
    await handle.settled()


def crew_magic(host: Host, words: list[str], approve: str) -> CrewHandle:
    """``%neta crew run FILE [--input NAME=VALUE]... [--approve auto]``."""
    args = shlex.split(" ".join(words))
    if not args or args[0] != "run" or len(args) < 2:
        raise HostError("usage: %neta crew run FILE [--input NAME=VALUE]... [--approve auto]")
    path, inputs, rest = args[1], {}, args[2:]
    while rest:
        flag, value = rest[0], rest[1] if len(rest) > 1 else ""
        name, _, text = value.partition("=")
        if flag == "--input" and name:
            inputs[name] = text
        elif flag == "--approve" and value in APPROVE_MODES:
            approve = value
        else:
            raise HostError(f"unknown or incomplete option {flag!r} (see %neta help)")
        rest = rest[2:]
    try:
        return start_crew(host, path, inputs, approve=approve)
    except CrewDefinitionError as exc:
        raise HostError(exc.message, code=exc.code) from exc
