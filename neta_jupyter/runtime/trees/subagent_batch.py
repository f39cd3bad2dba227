"""One ``delegate`` call: its child runs, run a few at a time and followed until every one ends.

The parent follows each child's own stream (the children's logs are the truth) and reports what
changed on its stream: ``SUBAGENT_RUN_STARTED`` once, a ``SUBAGENT_EVENT`` per change of a child,
``SUBAGENT_RUN_COMPLETED`` at the end. A batch is found again by its call: when the parent resumes
after a shutdown or a crash, the same call attaches to the children it started, lets those that
were interrupted continue, waits for those that wait for the user, and ends when they all have.
If the parent stops (terminated, timed out, shut down), so do its children.
"""

from __future__ import annotations

import asyncio
import json
from typing import Protocol

from ...events import EventType, SubagentChild, SubagentData, TokenUsageData, Usage
from ...tools.values import ToolResult
from ..data.runs import Run
from ..host import CancelReason as Stop
from ..host import RunHost
from ..log.emitter import RunEmitter
from ..log.tree import SessionTree
from .subagent_view import ChildView, result_text


class Family(Protocol):
    """What a batch asks of the sub-agents of its runtime."""

    @property
    def runtime(self) -> RunHost:
        """The host the children run on."""
        ...

    async def view(self, run: Run) -> ChildView:
        """The child as its stored events and record show it now."""
        ...

    async def stop(self, request_id: str, how: Stop) -> None:
        """End (or at a shutdown, suspend) a run and, below it, its children."""
        ...


class Batch:
    """The children of one call of one run."""

    def __init__(self, owner: Family, parent: Run, emitter: RunEmitter, call_id: str) -> None:
        self._owner = owner
        self._rt = owner.runtime
        self._records = owner.runtime.store.records
        self._runs = owner.runtime.runs
        self.parent = parent
        self._emitter = emitter
        self.call_id = call_id
        self.batch_id = ""
        self.views: list[ChildView] = []
        self._stopping = False
        self._tree = SessionTree(self._records, emitter.log, moves_leaf=False)

    async def run(self, children: list[Run], *, fresh: bool) -> ToolResult:
        """Follow the children to their ends (starting them as slots free up); their answers."""
        delegated = children[0].options.delegated
        self.batch_id = delegated.batch_id if delegated is not None else ""
        await self._emitter.flush()
        self.views = [await self._owner.view(c) for c in children]
        if fresh:
            await self._fill(tell=False)
            self._announce()
        else:  # attached again: where each child is now
            if not await self._announced():  # the process stopped before the news was stored
                self._announce()
            for view in self.views:
                if view.done:
                    await self._ended(view)
                else:
                    self._tell(view)
            await self._fill()
        watchers = [asyncio.create_task(self._watch(v)) for v in self.views if not v.done]
        try:
            await asyncio.gather(*watchers)
        except (asyncio.CancelledError, Exception) as exc:
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
            how: Stop = "user"
            if isinstance(exc, asyncio.CancelledError):
                how = self._rt.cancel_reason(self.parent.request_id)
            await self._stop(how)
            raise
        return self._complete()

    # --- telling the parent's stream

    def _announce(self) -> None:
        children = [
            SubagentChild(
                request_id=v.request_id,
                agent_id=v.agent_id,
                task=v.task,
                role=v.role,
                model=v.model if v.model != self.parent.model else None,
                status=v.status,
            )
            for v in self.views
        ]
        count = len(children)
        self._emitter.emit(
            EventType.SUBAGENT_RUN_STARTED,
            SubagentData(
                batch_id=self.batch_id,
                status="running",
                message=f"{count} sub-agent{'s' if count != 1 else ''}",
                children=children,
            ),
        )

    async def _announced(self) -> bool:
        """Whether the parent's stream holds this batch's SUBAGENT_RUN_STARTED."""
        events = self._rt.store.events
        after = -1
        while page := await events.read_after(self.parent.request_id, after, 4096):
            for event in page:
                if event.event_type == EventType.SUBAGENT_RUN_STARTED.value:
                    data = json.loads(event.payload).get("data") or {}
                    if data.get("batchId") == self.batch_id:
                        return True
            after = page[-1].seq
        return False

    def _tell(self, view: ChildView) -> None:
        self._emitter.emit(EventType.SUBAGENT_EVENT, view.event(self.batch_id))

    def _complete(self) -> ToolResult:
        statuses = [v.status for v in self.views]
        outcome = "completed" if all(s == "completed" for s in statuses) else "failed"
        self._emitter.emit(
            EventType.SUBAGENT_RUN_COMPLETED,
            SubagentData(
                batch_id=self.batch_id,
                status=outcome,
                message=f"{statuses.count('completed')} of {len(statuses)} completed",
                payload={s: statuses.count(s) for s in ("completed", "failed")},
            ),
        )
        return ToolResult(result_text(self.views))

    # --- running the children

    @property
    def _limit(self) -> int:
        return max(1, self._rt.config.subagent_concurrency)

    async def _fill(self, *, tell: bool = True) -> None:
        """Start queued children while fewer than the limit run."""
        if self._stopping or self._rt.stopping:
            return
        running = sum(v.status == "running" for v in self.views)
        for view in self.views:
            if running >= self._limit:
                return
            if view.status != "queued":
                continue
            run = await self._runs.get(view.request_id)
            if run is None or run.status in ("completed", "failed"):
                continue  # it was ended from outside; its stream says so
            view.status, view.line = "running", "Starting"
            running += 1
            if not self._rt.is_active(run.request_id):
                await self._rt.continue_run(run)
            if tell:
                self._tell(view)

    async def _watch(self, view: ChildView) -> None:
        """Follow one child's stream until it has completed or failed."""
        ticks = self._rt.follow(view.request_id, view.seq)
        try:
            async for batch in ticks:
                for seq, event_type, payload in batch:
                    was = view.status
                    changed = view.apply(seq, event_type, payload)
                    if view.done:
                        await self._ended(view)
                        return
                    if changed:
                        self._tell(view)
                    if was == "running" and view.status != "running":
                        # It waits for the user (or was interrupted): a slot is free.
                        await self._fill()
        finally:
            await ticks.aclose()  # type: ignore[attr-defined]

    async def _ended(self, view: ChildView) -> None:
        """It completed or failed: its answer, its entry, its usage, the parent's stream."""
        if view.answer_id is not None:
            entry = await self._records.get_entry(view.answer_id)
            view.answer = str(entry.message.get("content") or "") if entry is not None else ""
        await self._write_entry(view)
        await self._count_usage(view)
        self._tell(view)
        await self._fill()

    async def _write_entry(self, view: ChildView) -> None:
        entry = await self._records.get_entry(view.entry_id) if view.entry_id else None
        if entry is None:
            return
        content = view.answer if view.status == "completed" else view.error_message
        message = {**entry.message, "status": view.status, "content": content or ""}
        if view.error_code:
            message["errorCode"] = view.error_code
        await self._tree.update(entry, message, run=self._emitter)

    async def _count_usage(self, view: ChildView) -> None:
        """The child's tokens join the parent's totals, once (the session has them already)."""
        state = self.parent.state
        usage = view.usage
        if usage is None or view.request_id in state.subagents_counted:
            return
        state.subagents_counted.append(view.request_id)
        totals = state.usage
        prompt = totals.prompt_tokens + usage.prompt_tokens
        completion = totals.completion_tokens + usage.completion_tokens
        state.usage = Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=totals.cached_tokens + usage.cached_tokens,
            reasoning_tokens=totals.reasoning_tokens + usage.reasoning_tokens,
            total_tokens=prompt + completion,
        )
        self._emitter.total_tokens = state.usage.total_tokens
        session = await self._records.get_session(self.parent.session_id)
        self._emitter.emit(
            EventType.TOKEN_USAGE,
            TokenUsageData(
                input_tokens=usage.prompt_tokens,
                output_tokens=usage.completion_tokens,
                input_source=view.source(0),
                output_source=view.source(1),
                has_unknown_usage=bool(session and session.has_unknown_usage),
                session_input_tokens=session.input_tokens if session else 0,
                session_output_tokens=session.output_tokens if session else 0,
                cached_tokens=usage.cached_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                subagent_request_id=view.request_id,
            ),
        )

    # --- stopping with the parent

    async def _stop(self, how: Stop) -> None:
        """The parent stops: its children end (or, at a shutdown, are suspended) too."""
        self._stopping = True
        for view in self.views:
            if not view.done:
                await self._owner.stop(view.request_id, how)
        if how in ("shutdown", "fenced"):
            return  # the parent's stream ends suspended (or is another server's now)
        for view in self.views:
            if view.done:
                continue
            stored = await self._rt.store.events.read_after(view.request_id, view.seq, 100_000)
            for event in stored:
                view.apply(event.seq, event.event_type, event.payload)
            if view.done:
                await self._ended(view)
        self._emitter.emit(
            EventType.SUBAGENT_RUN_COMPLETED,
            SubagentData(
                batch_id=self.batch_id,
                status="cancelled",
                message="stopped with the run that delegated",
            ),
        )
