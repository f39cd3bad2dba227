"""A task's attempts as child runs of the crew: made, continued, followed, stopped.

A child is a full run (its own requestId and log, the crew's requestId as its
``parentRequestId``), so following it, answering its asks, resuming and recovering it are what
any run has. All of a crew's children share one session; each starts its own branch at the
tree's root, so an attempt sees only its task, not the others' conversations.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..runtime import RunApiError
from ..runtime.birth import FirstEntry, begin_run
from ..runtime.data.runs import Run
from ..runtime.data.state import CREW_CALL_PREFIX, Delegated, RunOptions, RunState, new_options
from ..runtime.trees.subagent_view import ChildView
from ..store import new_id
from .definition import CrewTask, fill
from .log import CrewState

if TYPE_CHECKING:
    from ..runtime import Runtime

CREW_PROMPT = (
    "You are one agent of a crew: you do one task of a larger piece of work, and your answer is "
    "handed to the tasks that depend on yours. Answer with the result itself, completely but "
    "without preamble."
)


def prompt_of(crew: CrewState, task: CrewTask, note: str | None) -> str:
    """The task's description with its placeholders filled, what is expected, a person's note."""
    values = dict(crew.inputs)
    for task_id, state in crew.tasks.items():
        if state.output is not None:
            values[task_id] = state.output
    parts = [fill(task.description, values)]
    if task.expected_output:
        parts.append(f"Expected output: {fill(task.expected_output, values)}")
    if note:
        parts.append(f"A person reviewing the crew adds: {note}")
    return "\n\n".join(parts)


async def session_of(rt: Runtime, crew: CrewState) -> str:
    """The session every child of the crew runs in."""
    session = await rt.store.records.get_or_create_session(
        crew.principal, f"crew {crew.request_id}"
    )
    return session.session_id


def options_of(crew: CrewState, task: CrewTask) -> RunOptions:
    """What an attempt of ``task`` runs with: its agent's tools, steps and role."""
    agent = crew.definition.agent(task.agent)
    # A crew's agent may always hand a decision to a person.
    tools = None if agent.tools is None else [*dict.fromkeys([*agent.tools, "escalate"])]
    base = new_options(
        virtual_tools=None,
        tools=tools,
        max_steps=agent.max_steps,
        approve=crew.approve,
        kernel_id=None,
        notebook_path=None,
        thinking_level=None,
        kernel_variables=None,
    )
    delegated = Delegated(
        parent_tool_call_id=f"{CREW_CALL_PREFIX}{task.id}",
        batch_id=crew.request_id,
        agent_id=agent.name,
        index=[t.id for t in crew.definition.tasks].index(task.id),
        role_prompt="\n\n".join(p for p in (CREW_PROMPT, agent.role) if p),
        entry_id="",
        depth=1,
    )
    return base.model_copy(update={"kind": "crew_task", "delegated": delegated})


async def new_child(rt: Runtime, crew: CrewState, task: CrewTask, note: str | None) -> Run:
    """A child run for one attempt of ``task``, with its first events, started."""
    session_id = await session_of(rt, crew)
    child = Run(
        request_id=new_id("r"),
        principal=crew.principal,
        session_id=session_id,
        status="running",
        model=crew.definition.agent(task.agent).model or rt.config.default_model,
        created=time.time(),
        prompt=prompt_of(crew, task, note),
        options=options_of(crew, task),
        state=RunState(assistant_message_id=new_id("e")),
        parent_request_id=crew.request_id,
    )
    await begin_run(rt, child, FirstEntry(None, moves_leaf=False))
    await rt.continue_run(child)
    return child


async def go_on(rt: Runtime, principal: str, request_id: str) -> str | None:
    """Continue a child that was paused, interrupted or failed recoverably.

    How: ``resumed``, ``retried`` (from where it failed), ``running`` (it still is), or ``None``
    when it cannot go on (it ended, or waits for a person) and a new attempt is needed.
    """
    run = await rt.runs.get(request_id)
    if run is None:
        return None
    try:
        if run.status == "suspended" and run.state.ask is None:
            await rt.resume(principal, request_id)
            return "resumed"
        if run.status == "failed" and run.state.recoverable:
            await rt.retry(principal, request_id)
            return "retried"
        if run.status == "running" and not rt.is_active(request_id):
            await rt.continue_run(run)
            return "resumed"
    except RunApiError:
        return None
    return "running" if run.status == "running" else None


async def view_of(rt: Runtime, request_id: str) -> ChildView | None:
    """The child as its log and record show it now."""
    run = await rt.runs.get(request_id)
    return None if run is None else await rt.subagents.view(run)


async def answer_of(rt: Runtime, view: ChildView) -> str:
    """The child's final answer (it completed)."""
    if view.answer_id is None:
        return ""
    entry = await rt.store.records.get_entry(view.answer_id)
    return str(entry.message.get("content") or "") if entry is not None else ""
