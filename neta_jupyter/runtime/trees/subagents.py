"""Sub-agents: the child runs a run starts with ``delegate``, and the trees of runs they make.

A child is a full run: its own requestId and log, ``parentRequestId`` on its record, followable,
resumable and recoverable like any run. It runs in the parent's session without moving the
session's leaf: its entries hang below a ``subagent`` entry of the parent's, under the reply that
delegated, and its conversation starts there (:func:`..context.builder.messages`).
What the child was asked, and by which call, lives in its options (``delegated``), so a resumed
parent finds its children again by its call.

Stopping a run stops its children (:meth:`Subagents.stop`); at start-up :meth:`Subagents.recover`
makes the trees a crash left consistent: a parent that waited for its children, and children that
had not got going yet, are suspended (resumable) instead of failed; the rest end as crashed.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

from ...events import ErrorCode, SuspendReason, SuspendType
from ...events.models import SubagentStatus
from ...providers import UnknownModel
from ...store import new_id
from ...tools.delegate import Delegator
from ...tools.values import SubTask, ToolError, ToolResult
from ..activation.endings import end_run, fail_run
from ..birth import FirstEntry, begin_run
from ..data.runs import Run
from ..data.state import Delegated, RunOptions, RunState
from ..data.steps import RunTools, Suspend
from ..host import CancelReason as Stop
from ..log.emitter import RunEmitter
from ..log.tree import SessionTree
from .subagent_batch import Batch
from .subagent_view import ChildView

if TYPE_CHECKING:
    from ..host import RunHost

SUBAGENT_PROMPT = (
    "You are a sub-agent: another agent handed you one part of a larger task. Do that part with "
    "your tools and answer with what you found, completely but briefly: your answer goes back to "
    "that agent, which answers the user."
)


_STREAMING = frozenset({"TEXT_START", "REASONING_START", "TOOL_CALL_GENERATING", "TOOL_START"})
_PAGE = 4096


def depth(run: Run) -> int:
    """How deep in its tree the run is (0: started by a user)."""
    delegated = run.options.delegated
    return delegated.depth if delegated is not None else 0


class Subagents:
    """Starts, follows, stops and recovers the child runs of one runtime's runs."""

    def __init__(self, runtime: RunHost) -> None:
        self.runtime = runtime

    # --- what a run may do

    def may_delegate(self, run: Run) -> bool:
        """Whether the run may start children (how deep in its tree it is)."""
        return depth(run) < self.runtime.config.subagent_depth

    def delegator(self, run: Run, emitter: RunEmitter, call_id: str) -> Delegator | None:
        """What the ``delegate`` tool starts children with, for one call of the run."""
        return _Call(self, run, emitter, call_id) if self.may_delegate(run) else None

    def system_prompt(self, base: str, run: Run) -> str:
        """A child's system prompt: the base, what a sub-agent is, and its role."""
        if run.options.delegated is None:
            return base
        role = run.options.delegated.role_prompt
        # A crew's task says what a crew's agent is in its role (it answers the crew, not an agent).
        intro = [] if run.options.kind == "crew_task" else [SUBAGENT_PROMPT]
        return "\n\n".join([base, *intro, *([f"## Your role\n{role}"] if role else [])])

    # --- delegating

    async def delegate(
        self, parent: Run, emitter: RunEmitter, call_id: str, tasks: list[SubTask]
    ) -> ToolResult:
        """Run one child per task (or attach to those this call started before); their answers."""
        batch = Batch(self, parent, emitter, call_id)
        children = await self.children(parent.request_id, call_id)
        fresh = not children
        if len(children) < len(tasks):  # none yet, or the process stopped while making them
            children = await self._create(parent, emitter, call_id, tasks, children)
        return await batch.run(children, fresh=fresh)

    async def children(self, request_id: str, call_id: str | None = None) -> list[Run]:
        """The run's children (of one call), in the order they were asked for."""
        found = [
            c
            for c in await self.runtime.runs.find(parent_request_id=request_id, limit=100_000)
            if c.options.delegated is not None
            and call_id in (None, c.options.delegated.parent_tool_call_id)
        ]
        return sorted(
            found,
            key=lambda c: (c.created, c.options.delegated.index if c.options.delegated else 0),
        )

    async def _create(
        self,
        parent: Run,
        emitter: RunEmitter,
        call_id: str,
        tasks: list[SubTask],
        made: list[Run],
    ) -> list[Run]:
        """The batch's children: those ``made`` already, and the others, made now."""
        rt = self.runtime
        models = [task.model or parent.model for task in tasks]
        for model in models:
            try:
                rt.models.resolve(model)
            except UnknownModel as exc:
                raise ToolError(str(exc)) from exc
        _check_tools(tasks, rt.tools.known(), parent.options.tools)
        origins = [c.options.delegated for c in made if c.options.delegated is not None]
        batch_id = origins[0].batch_id if origins else new_id("batch")
        done = {origin.index for origin in origins}
        names = _names(tasks)
        now = time.time()
        new = [
            await self._child(
                parent, emitter, task, index, call_id, batch_id, names[index], model, now
            )
            for index, (task, model) in enumerate(zip(tasks, models, strict=True))
            if index not in done
        ]
        return sorted([*made, *new], key=_batch_order)

    def _steps(self, task: SubTask, inherited: RunOptions) -> int:
        """The child's model replies: what its task asks for, never more than its parent's."""
        most = inherited.max_steps or self.runtime.config.max_steps
        return min(task.max_steps or most, most)

    async def _child(
        self,
        parent: Run,
        emitter: RunEmitter,
        task: SubTask,
        index: int,
        call_id: str,
        batch_id: str,
        name: str,
        model: str,
        now: float,
    ) -> Run:
        """A child run with its first events and entries, not started yet."""
        records = self.runtime.store.records
        entry_id = new_id("e")
        inherited = parent.options
        child = Run(
            request_id=new_id("r"),
            principal=parent.principal,
            session_id=parent.session_id,
            status="running",
            model=model,
            created=now,
            prompt=task.task,
            options=RunOptions(
                tools=task.tools if task.tools is not None else inherited.tools,
                max_steps=self._steps(task, inherited),
                approve=inherited.approve,
                kernel_id=inherited.kernel_id,
                notebook_path=inherited.notebook_path,
                thinking_level=inherited.thinking_level,
                kernel_variables=inherited.kernel_variables,
                suspend_timeout=inherited.suspend_timeout,
                kind="subagent",
                delegated=Delegated(
                    parent_tool_call_id=call_id,
                    batch_id=batch_id,
                    agent_id=name,
                    index=index,
                    role_prompt=task.role,
                    entry_id=entry_id,
                    depth=depth(parent) + 1,
                ),
            ),
            state=RunState(assistant_message_id=new_id("e")),
            parent_request_id=parent.request_id,
        )
        branch = SessionTree(records, emitter.log, moves_leaf=False)

        async def subagent_entry() -> None:
            await branch.add(
                parent.session_id,
                "subagent",
                {
                    "role": "subagent",
                    "content": task.task,
                    "childRequestId": child.request_id,
                    "agentId": name,
                    "task": task.task,
                    "agentRole": task.role,
                    "batchId": batch_id,
                    "toolCallId": call_id,
                    "status": "queued",
                },
                request_id=parent.request_id,
                parent_id=parent.state.last_assistant,
                entry_id=entry_id,
                run=emitter,
            )

        first = FirstEntry(entry_id, moves_leaf=False)
        await begin_run(self.runtime, child, first, before_entry=subagent_entry)
        return child

    async def view(self, run: Run) -> ChildView:
        """The child as its stored events and record show it now."""
        delegated = run.options.delegated
        view = ChildView(
            request_id=run.request_id,
            agent_id=delegated.agent_id if delegated else run.request_id,
            task=run.prompt,
            role=delegated.role_prompt if delegated else None,
            model=run.model,
            entry_id=delegated.entry_id if delegated else None,
            created=run.created,
        )
        events = self.runtime.store.events
        while page := await events.read_after(run.request_id, view.seq, _PAGE):
            for event in page:
                view.apply(event.seq, event.event_type, event.payload)
            if len(page) < _PAGE:
                break
        view.status = self.status_of(run)
        return view

    def status_of(self, run: Run) -> SubagentStatus:
        """Where a child stands: ``queued`` when it waits to be (re)started by its batch."""
        if run.status in ("completed", "failed"):
            return run.status
        if run.status == "suspended":
            # Waiting for a person (an ask, a pause) is theirs to end; an interruption, the batch's.
            waits = run.state.ask is not None or run.state.suspend_deadline is not None
            return "suspended" if waits else "queued"
        return "running" if self.runtime.is_active(run.request_id) else "queued"

    # --- stopping

    async def stop(self, request_id: str, how: Stop) -> None:
        """End (or at a shutdown, suspend) a run and, below it, its children."""
        rt = self.runtime
        run = await rt.runs.get(request_id)
        if run is None or run.status in ("completed", "failed"):
            return
        if rt.is_active(request_id):
            if how != "shutdown":  # a shutdown cancels every activation itself
                await rt.cancel(request_id, how)
            await rt.wait(request_id)
            return
        if how == "fenced":
            return  # another server holds the tree now: nothing is written here
        if how == "shutdown":
            if run.status == "running":  # queued: it had not started
                await self._suspend(run, "the server shut down before this sub-agent started")
            return
        code = ErrorCode.USER_CANCELLED if how == "user" else ErrorCode.TASK_TIMEOUT
        message = (
            "the run was cancelled"
            if how == "user"
            else "the run that delegated this task ran out of time"
        )
        await fail_run(rt.runs, run, await rt.emitter(run), code, message, recoverable=False)
        await self.stop_children(run, how)

    async def stop_children(self, run: Run, how: Stop) -> None:
        """Every child of the run that has not ended, stopped too."""
        for child in await self.children(run.request_id):
            await self.stop(child.request_id, how)

    async def _suspend(self, run: Run, message: str) -> None:
        reason = SuspendReason(type=SuspendType.SHUTDOWN_INTERRUPT, message=message)
        await end_run(self.runtime.runs, run, await self.runtime.emitter(run), Suspend(reason))

    # --- start-up

    async def recover(self, take: Callable[[Run], Awaitable[bool]] | None = None) -> int:
        """Runs a crash left running that can go on: suspended, not failed; how many.

        A parent waiting for its children goes on waiting once resumed; a child that had not
        streamed anything yet (queued, or just starting) continues with it. Any other run left
        running is ended as crashed by the caller.
        """
        recovered = 0
        for run in await self.runtime.runs.find(status="running", limit=100_000):
            if take is not None and not await take(run):
                continue  # another server executes it
            if run.parent_request_id is not None and await self._untouched(run):
                await self._suspend(run, "the server stopped before this sub-agent got going")
            elif await self._waiting(run):
                await self._suspend(
                    run, "the server stopped while this run waited for its sub-agents"
                )
            else:
                continue
            recovered += 1
        return recovered

    async def _untouched(self, run: Run) -> bool:
        """Nothing of its current activation was streamed (clients saw no part of a reply)."""
        events = self.runtime.store.events
        streamed, after = False, -1
        while page := await events.read_after(run.request_id, after, _PAGE):
            for event in page:
                if event.terminal:
                    streamed = False
                elif event.event_type in _STREAMING:
                    streamed = True
            after = page[-1].seq
            if len(page) < _PAGE:
                break
        return not streamed

    async def _waiting(self, run: Run) -> bool:
        """It was among its tool calls, with a call whose children it waited for."""
        step = run.state.next
        if not isinstance(step, RunTools):
            return False
        records = self.runtime.store.records
        path = await records.path(run.session_id, run.state.leaf)
        answered = {e.message.get("tool_call_id") for e in path if e.role == "tool"}
        pending = {c.id for c in step.calls} - answered
        return any(
            c.options.delegated is not None and c.options.delegated.parent_tool_call_id in pending
            for c in await self.children(run.request_id)
        )


class _Call:
    """The :class:`Delegator` of one tool call of one run."""

    def __init__(self, owner: Subagents, run: Run, emitter: RunEmitter, call_id: str) -> None:
        self._owner, self._run, self._emitter, self._call_id = owner, run, emitter, call_id

    async def delegate(self, tasks: list[SubTask]) -> ToolResult:
        return await self._owner.delegate(self._run, self._emitter, self._call_id, tasks)


def _batch_order(run: Run) -> tuple[float, int]:
    return run.created, run.options.delegated.index if run.options.delegated else 0


def _names(tasks: list[SubTask]) -> list[str]:
    """Each task's name, unique within the batch."""
    names: list[str] = []
    for index, task in enumerate(tasks, 1):
        name = (task.name or "").strip() or f"sub-agent {index}"
        names.append(name if name not in names else f"{name} ({index})")
    return names


def _check_tools(tasks: list[SubTask], known: Collection[str], allowed: list[str] | None) -> None:
    """A ToolError unless every task's tools exist and are tools its parent may use."""
    for task in tasks:
        if unknown := sorted(t for t in set(task.tools or []) if t not in known):
            raise ToolError(
                f"unknown tools {', '.join(unknown)}; available: {', '.join(sorted(known))}"
            )
        if allowed is not None and (wider := sorted(set(task.tools or []) - set(allowed))):
            raise ToolError(
                f"a sub-agent may use only tools this run may use ({', '.join(sorted(allowed))}); "
                f"not {', '.join(wider)}"
            )
