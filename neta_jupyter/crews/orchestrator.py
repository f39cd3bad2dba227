"""One crew run in this process: tasks started in dependency order, followed to their ends.

Everything that changes the crew happens under its lock, so two clients' controls, and a task's
end arriving at the same moment, are applied one after the other, each once. What the crew does
next is decided only from its state (:meth:`CrewRun.advance`), which its log holds: a crew
loaded again after a restart goes on from the same place.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING

from ..runtime import RunApiError
from ..runtime.trees.subagent_view import ChildView
from ..store import new_id
from .children import answer_of, go_on, new_child, view_of
from .definition import CrewTask
from .log import DONE_TASK, CrewLog, Escalation, TaskState, TaskUsage

if TYPE_CHECKING:
    from ..runtime import Runtime

_LIVE = frozenset({"running", "retrying"})
_PERSON = frozenset({"PERMISSION_ASK", "CLARIFY_REQUEST"})


class CrewRun:
    """A crew, its lock, and the watchers of its running tasks' child runs."""

    def __init__(self, rt: Runtime, log: CrewLog) -> None:
        self.rt, self.log, self.state = rt, log, log.state
        self.lock = asyncio.Lock()
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._failures: dict[str, int] = {}

    # --- scheduling (every method below runs under the lock)

    def _task(self, task_id: str) -> CrewTask:
        return self.state.definition.task(task_id)

    def busy(self) -> int:
        """Tasks holding a slot: their child run is live."""
        return sum(t.status in _LIVE for t in self.state.tasks.values())

    async def advance(self) -> None:
        """Start what may start; settle the crew's status."""
        state = self.state
        if state.status not in ("running", "waiting"):
            return
        for task in state.definition.tasks:
            current = state.tasks[task.id]
            deps_done = all(state.tasks[d].status in DONE_TASK for d in task.depends_on)
            if current.status == "pending" and deps_done:
                current.status = "ready"
                self.log.task(current)
        for task in state.definition.tasks:
            current = state.tasks[task.id]
            if current.status != "ready" or self.busy() >= state.definition.max_parallel:
                continue
            if task.approval == "before" and not current.approved:
                self._gate(current, "approval_before", f"approve starting task {task.id}")
                continue
            await self._start(current)
        self._settle()

    def _settle(self) -> None:
        state = self.state
        if all(t.status in DONE_TASK for t in state.tasks.values()):
            self.log.line("every task is done")
            self.log.run_status("completed", "every task is done")
            return
        stuck = self.busy() == 0 and not any(t.status == "ready" for t in state.tasks.values())
        if stuck and state.status == "running":
            waits = len(state.open_escalations())
            self.log.run_status("waiting", f"waiting for {waits} decision(s)" if waits else None)
        elif not stuck and state.status == "waiting":
            self.log.run_status("running")

    async def _start(self, task: TaskState) -> None:
        """The task's attempt runs: its child continued when it can, else a new one."""
        child_id = task.child_request_id
        before = await view_of(self.rt, child_id) if child_id else None
        if before is not None and before.status == "completed":  # never run twice
            await self.completed(task, await answer_of(self.rt, before))
            return
        how = await go_on(self.rt, self.state.principal, child_id) if child_id else None
        if how is None:
            task.attempt += 1
            child = await new_child(self.rt, self.state, self._task(task.task_id), task.note)
            task.child_request_id = child.request_id
            task.child_request_ids.append(child.request_id)
            before = None
        elif how == "retried":
            task.attempt += 1
        task.status = "running"
        task.started = task.started or time.time()
        task.error_code = task.error_message = None
        self.log.task(task)
        self.log.line(f"attempt {task.attempt} started", task.task_id)
        self.watch(task, before)

    def _gate(self, task: TaskState, kind: str, message: str, **fields: object) -> None:
        """The task waits for a person's decision."""
        if any(e.task_id == task.task_id for e in self.state.open_escalations()):
            return
        task.status = "waiting_approval"
        self.log.task(task)
        self.escalate(task, kind, message, **fields)

    def escalate(self, task: TaskState, kind: str, message: str, **fields: object) -> None:
        """``crew:escalation``: a decision this crew waits for."""
        options = ["retry", "skip", "answer", "stop"]
        escalation = Escalation.model_validate(
            {
                "escalationId": new_id("esc"),
                "taskId": task.task_id,
                "kind": kind,
                "message": message,
                "childRequestId": task.child_request_id,
                "options": options,
                **fields,
            }
        )
        self.log.escalation(escalation)
        self.log.line(f"escalated: {message}", task.task_id, "warning")

    # --- following a task's child run

    def watch(self, task: TaskState, before: ChildView | None) -> None:
        """Follow the task's child from where ``before`` saw it (from its start: ``None``)."""
        child_id = task.child_request_id
        assert child_id is not None
        self.stop_watching(task.task_id)
        self._watchers[task.task_id] = asyncio.create_task(
            self._follow(task.task_id, child_id, before), name=f"neta-crew-{task.task_id}"
        )

    def stop_watching(self, task_id: str) -> asyncio.Task[None] | None:
        """Stop following the task's child; the watcher, to be awaited."""
        watcher = self._watchers.pop(task_id, None)
        if watcher is not None and watcher is not asyncio.current_task():
            watcher.cancel()
        return watcher

    async def stop_all_watching(self) -> None:
        """No watcher is left."""
        watchers = [w for t in list(self._watchers) if (w := self.stop_watching(t))]
        for watcher in watchers:
            if watcher is not asyncio.current_task():
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watcher

    async def _follow(self, task_id: str, child_id: str, before: ChildView | None) -> None:
        view = before or await view_of(self.rt, child_id)
        if view is None:
            return
        if before is None:
            view.seq, view.status = -1, "queued"
        ticks = self.rt.follow(child_id, view.seq)
        line = view.line
        try:
            async for batch in ticks:
                for seq, event_type, payload in batch:
                    view.apply(seq, event_type, payload)
                    if event_type in ("MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED"):
                        await self._ended(task_id, child_id, view, event_type, payload)
                        return
                    if view.line != line and view.line:
                        line = view.line
                        self.log.line(line, task_id)
        except Exception:  # a watcher that fails leaves the task as it is, to be retried
            self.rt.log.exception("neta: following the child run of crew task %s failed", task_id)
        finally:
            await ticks.aclose()  # type: ignore[attr-defined]

    async def _ended(
        self, task_id: str, child_id: str, view: ChildView, event_type: str, payload: str
    ) -> None:
        async with self.lock:
            task = self.state.tasks[task_id]
            if self._watchers.get(task_id) is not asyncio.current_task():
                return  # stopped meanwhile: whoever stopped it has said what became of the task
            self._watchers.pop(task_id, None)
            self.add_usage(task, view)
            if event_type == "MESSAGE_COMPLETED":
                await self.completed(task, await answer_of(self.rt, view))
            elif event_type == "MESSAGE_FAILED":
                await self._failed(task, view)
            else:
                data = json.loads(payload).get("data") or {}
                self._suspended(task, view, (data.get("suspendReason") or {}).get("type"))
            await self.advance()

    def add_usage(self, task: TaskState, view: ChildView) -> None:
        """The tokens of the child's activation count in the task's usage."""
        if view.usage is None:
            return
        usage = task.usage
        task.usage = TaskUsage(
            prompt_tokens=usage.prompt_tokens + view.usage.prompt_tokens,
            completion_tokens=usage.completion_tokens + view.usage.completion_tokens,
            total_tokens=usage.total_tokens + view.usage.total_tokens,
        )

    async def completed(self, task: TaskState, output: str) -> None:
        """The task's child answered: done, or its output waits for approval."""
        task.output = output
        task.duration_ms = int((time.time() - (task.started or time.time())) * 1000)
        if self._task(task.task_id).approval == "after":
            self._gate(task, "approval_after", f"approve the output of task {task.task_id}")
            return
        task.status = "completed"
        self.log.task(task)
        self.log.line(f"completed (attempt {task.attempt})", task.task_id)

    async def _failed(self, task: TaskState, view: ChildView) -> None:
        task.error_code, task.error_message = view.error_code, view.error_message
        failures = self._failures.get(task.task_id, 0) + 1
        self._failures[task.task_id] = failures
        why = f"{view.error_code}: {view.error_message}"
        if failures <= self._task(task.task_id).retries:
            task.status = "retrying"
            self.log.task(task)
            self.log.line(f"attempt {task.attempt} failed ({why}); retrying", task.task_id)
            if self.state.status == "running":
                await self._start(task)
            else:
                task.status = "ready"
                self.log.task(task)
            return
        task.status = "failed"
        self.log.task(task)
        self.escalate(task, "task_failed", f"task {task.task_id} failed: {why}")

    def _suspended(self, task: TaskState, view: ChildView, reason: str | None) -> None:
        if reason in _PERSON and view.ask is not None:
            self.ask_person(task, view, reason)
            return
        task.status = "ready"  # paused or interrupted: it goes on from there when started
        self.log.task(task)
        self.log.line("paused at a step boundary", task.task_id)

    def ask_person(self, task: TaskState, view: ChildView, reason: str | None) -> None:
        """The task's child asks a question or a permission: the crew's escalation."""
        assert view.ask is not None
        data = view.ask.model_dump(by_alias=True)
        question = data.get("question") or f"may it run {data.get('toolName')}?"
        kind = "question" if reason == "CLARIFY_REQUEST" else "permission"
        ask_id = data.get("clarifyId") or data.get("askId")
        self._gate(task, kind, f"{task.task_id} asks: {question}", askId=ask_id)
        self._watchers.pop(task.task_id, None)

    def retry_count(self, task_id: str, value: int) -> None:
        """Failures counted against the task's retries from now on."""
        self._failures[task_id] = value

    async def stop_children(self) -> None:
        """Every task's live child run ends with USER_CANCELLED."""
        await self.stop_all_watching()
        for task in self.state.tasks.values():
            if task.child_request_id is None or task.status in ("completed", "skipped", "failed"):
                continue
            with contextlib.suppress(RunApiError):
                await self.rt.terminate(self.state.principal, task.child_request_id)

    async def stop(self) -> None:
        """Every task that has not ended ends with USER_CANCELLED; so does the crew."""
        if self.state.ended:
            return
        await self.stop_children()
        for task in self.state.tasks.values():
            if task.status not in ("completed", "skipped", "failed"):
                task.status, task.error_code = "failed", "USER_CANCELLED"
                task.error_message = "the crew was stopped"
                self.log.task(task)
        for escalation in self.state.open_escalations():
            escalation.state, escalation.decision = "resolved", "stop"
            self.log.escalation(escalation)
        self.log.line("stopped")
        self.log.run_status("stopped", "stopped by a person")
