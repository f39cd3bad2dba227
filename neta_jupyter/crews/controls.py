"""The controls of a crew: pause, resume, stop and retry (each under the crew's lock).

Each is idempotent: a control that finds the crew already where it would leave it does nothing.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ..runtime import RunConflict, RunNotFound
from .decisions import decide

if TYPE_CHECKING:
    from .orchestrator import CrewRun


def _ended(crew: CrewRun, action: str) -> None:
    if crew.state.ended:
        raise RunConflict(
            f"crew {crew.state.request_id} is {crew.state.status}; it cannot {action}",
            code="CREW_ENDED",
        )


async def pause(crew: CrewRun) -> None:
    """No new task starts; running ones suspend at their next step boundary."""
    if crew.state.status == "paused":
        return
    _ended(crew, "be paused")
    crew.log.run_status("paused", "no new task starts; running ones stop at a step boundary")
    for task in crew.state.tasks.values():
        if task.status in ("running", "retrying") and task.child_request_id:
            # Between activations it is not suspended: it is started again only when resumed.
            with contextlib.suppress(RunConflict):
                await crew.rt.suspend(crew.state.principal, task.child_request_id)


async def resume(crew: CrewRun) -> None:
    """Tasks start again; paused and interrupted ones go on from where they stopped."""
    state = crew.state
    if state.status == "running":
        return
    if state.status == "waiting" and not any(t.status == "ready" for t in state.tasks.values()):
        return  # it waits for decisions, which resuming does not make
    _ended(crew, "be resumed")
    crew.log.run_status("running")
    await crew.advance()


async def stop(crew: CrewRun) -> None:
    """Every task that has not ended ends with USER_CANCELLED; so does the crew."""
    await crew.stop()


async def retry(crew: CrewRun, task_id: str | None) -> None:
    """A failed task (or every failed one) tries again, from where it failed."""
    _ended(crew, "retry")
    failed = [
        t
        for t in crew.state.tasks.values()
        if t.status == "failed" and task_id in (None, t.task_id)
    ]
    if task_id is not None and task_id not in crew.state.tasks:
        raise RunNotFound(f"the crew has no task {task_id!r}", code="CREW_TASK_NOT_FOUND")
    for task in failed:
        open_ = [e for e in crew.state.open_escalations() if e.task_id == task.task_id]
        if open_:
            await decide(crew, escalation_id=open_[0].escalation_id, decision="retry")
        else:
            crew.retry_count(task.task_id, crew.state.definition.task(task.task_id).retries)
            task.status = "ready"
            crew.log.task(task)
    await crew.advance()
