"""A person's decision on an escalation: retry, skip with an output, answer, or stop.

Decided once: the escalation is resolved in the crew's log with what was decided, and a second
decision on it changes nothing.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from ..runtime import BadRunRequest, RunApiError, RunNotFound
from .log import Escalation, TaskState

if TYPE_CHECKING:
    from .orchestrator import CrewRun

DECISIONS = ("retry", "skip", "answer", "stop")


async def decide(
    crew: CrewRun,
    *,
    escalation_id: str | None = None,
    decision: str | None = None,
    answer: str | None = None,
    output: str | None = None,
    approved: bool | None = None,
    **_: Any,
) -> None:
    """Apply the decision on the escalation, unless it was decided already (under the lock)."""
    escalation = crew.state.escalations.get(escalation_id or "")
    if escalation is None:
        raise RunNotFound(
            f"no escalation {escalation_id!r} in this crew", code="ESCALATION_NOT_FOUND"
        )
    if decision not in DECISIONS:
        raise BadRunRequest(
            f"decision must be one of {', '.join(DECISIONS)}", code="INVALID_DECISION"
        )
    if escalation.state == "resolved" or crew.state.ended:
        return
    task = crew.state.tasks[escalation.task_id]
    escalation.state, escalation.decision = "resolved", decision  # type: ignore[assignment]
    escalation.answer, escalation.output, escalation.approved = answer, output, approved
    crew.log.escalation(escalation)
    crew.log.line(f"decided: {decision}", task.task_id)
    if decision == "stop":
        await crew.stop()
        return
    if decision == "skip":
        await _skip(crew, task, output or "")
    elif decision == "retry":
        await _again(crew, task, escalation, answer)
    else:
        await _answer(crew, task, escalation, answer, approved)
    await crew.advance()


async def _end_child(crew: CrewRun, task: TaskState) -> None:
    """The task's child, if it still waits or runs, ends (USER_CANCELLED)."""
    watcher = crew.stop_watching(task.task_id)
    if watcher is not None:
        with contextlib.suppress(BaseException):
            await watcher
    if task.child_request_id is None:
        return
    run = await crew.rt.runs.get(task.child_request_id)
    if run is not None and run.status in ("running", "suspended"):
        with contextlib.suppress(RunApiError):
            await crew.rt.terminate(crew.state.principal, task.child_request_id)


async def _skip(crew: CrewRun, task: TaskState, output: str) -> None:
    """Done without (more of) its run: dependents get ``output``."""
    await _end_child(crew, task)
    task.status, task.output = "skipped", output
    task.error_code = task.error_message = None
    crew.log.task(task)


async def _again(crew: CrewRun, task: TaskState, escalation: Escalation, note: str | None) -> None:
    """Another attempt (with the person's note, if any); a failed run goes on where it failed."""
    if escalation.kind in ("question", "permission"):
        await _end_child(crew, task)
    if escalation.kind == "approval_before":
        task.approved = True
    if escalation.kind in ("approval_after", "question", "permission"):
        task.child_request_id = None  # its run completed or was ended: a new one
    if note:
        task.note = note
        task.child_request_id = None  # the note is in the new attempt's prompt
    crew.retry_count(task.task_id, crew.state.definition.task(task.task_id).retries)
    task.status = "ready"
    crew.log.task(task)


async def _answer(
    crew: CrewRun,
    task: TaskState,
    escalation: Escalation,
    answer: str | None,
    approved: bool | None,
) -> None:
    """The task's question answered, or its gate passed (``approved`` false: not passed)."""
    kind = escalation.kind
    if kind == "approval_before":
        if approved is False:
            await _skip(crew, task, answer or "")
            return
        task.approved, task.status = True, "ready"
        crew.log.task(task)
    elif kind == "approval_after":
        if approved is False:
            await _again(crew, task, escalation, answer)
            return
        task.status = "completed"
        crew.log.task(task)
    elif kind == "task_failed":
        await _again(crew, task, escalation, answer)
    else:
        await _resume_child(crew, task, escalation, answer, approved)


async def _resume_child(
    crew: CrewRun,
    task: TaskState,
    escalation: Escalation,
    answer: str | None,
    approved: bool | None,
) -> None:
    """The child's ask is answered and it goes on."""
    assert task.child_request_id is not None
    from .children import view_of

    before = await view_of(crew.rt, task.child_request_id)
    if escalation.kind == "question":
        await crew.rt.resume(
            crew.state.principal,
            task.child_request_id,
            ask_id=escalation.ask_id,
            answer=answer or "",
        )
    else:
        await crew.rt.resume(
            crew.state.principal,
            task.child_request_id,
            ask_id=escalation.ask_id,
            approved=approved is not False,
        )
    task.status = "running"
    crew.log.task(task)
    crew.watch(task, before)
