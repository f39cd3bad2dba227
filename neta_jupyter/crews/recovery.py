"""A crew found going at start-up: made consistent with its child runs, then left waiting.

The runtime's own recovery has already ended the children a crash left running (crashed, or
suspended when they had not got going). Here each task the crew believed running is set from
its child: a child that completed gives its output (the task is not run again), a child that
waits for a person keeps its escalation, any other is ready to go on when the crew resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .children import answer_of, view_of

if TYPE_CHECKING:
    from .log import TaskState
    from .orchestrator import CrewRun

_UNDER_WAY = frozenset({"running", "retrying", "waiting_approval"})


async def recovered(crew: CrewRun) -> None:
    """Each task as its child run left it; the crew waits to be resumed (under the lock)."""
    for task in crew.state.tasks.values():
        if task.status in _UNDER_WAY:
            await _task(crew, task)
    if crew.state.status in ("queued", "running", "waiting"):
        crew.log.line("the server restarted; the crew waits to be resumed")
        crew.log.run_status("waiting", "the server restarted: resume the crew to continue")


async def _task(crew: CrewRun, task: TaskState) -> None:
    child = task.child_request_id
    view = await view_of(crew.rt, child) if child else None
    asked = any(e.task_id == task.task_id for e in crew.state.open_escalations())
    if view is not None and view.status == "completed":
        if task.status != "waiting_approval":
            crew.add_usage(task, view)
            await crew.completed(task, await answer_of(crew.rt, view))
        return
    if asked and task.status == "waiting_approval":
        return  # its decision is still waited for, and its child (if any) waits with it
    if view is not None and view.status == "suspended" and view.ask is not None:
        crew.ask_person(
            task, view, "CLARIFY_REQUEST" if view.ask.type == "clarify" else "PERMISSION_ASK"
        )
        return
    task.status = "ready"
    crew.log.task(task)
    crew.log.line("interrupted by the restart; goes on when the crew resumes", task.task_id)
