"""Following one run from the terminal: every envelope to the renderer, every ask answered."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from ..events import (
    AgentEvent,
    ClarifyData,
    EventType,
    MessageData,
    PermissionAskData,
    SubagentData,
    SuspendType,
)
from .backends import Backend, CliError
from .prompts import PromptSurface, Reply, TerminalAsker

EXIT_COMPLETED, EXIT_FAILED, EXIT_ERROR, EXIT_SUSPENDED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
BACKGROUND_POLL = (0.5, 1.0, 2.0, 5.0)
"""Seconds between looks at a server's run that waits for code running in the background."""

Pending = PermissionAskData | ClarifyData


class Renderer(PromptSurface, Protocol):
    """What draws a run: fed envelopes, it shows them and hosts the prompts."""

    def feed(self, payload: str) -> AgentEvent | None:
        """Show one envelope (JSON); the decoded event, or None for one this client ignores."""
        ...

    def flush(self) -> None:
        """Push what was drawn to the terminal."""
        ...

    def close(self) -> None:
        """The command ends: put away what is still live on the screen."""
        ...


class RunFollower:
    """Starts the run, feeds every envelope to the renderer and answers what it asks."""

    def __init__(self, backend: Backend, renderer: Renderer, asker: TerminalAsker) -> None:
        self.backend = backend
        self.renderer = renderer
        self.asker = asker
        self.request_id: str | None = None
        self.last_seq = -1
        self._answered: set[str] = set()
        """The sub-agents' asks answered here (the parent's stream may tell one again)."""

    async def run(self) -> int:
        """Until the run ends, or waits for what nobody here can give; the exit status."""
        self.request_id = await self.backend.start()
        while True:
            end, pending = await self._segment()
            if _waits_for_background(end):
                self.renderer.notice("the run waits for code running in the background")
                end, pending = await self._after_background()
            if end.event_type != EventType.MESSAGE_SUSPENDED:
                completed = end.event_type == EventType.MESSAGE_COMPLETED
                return EXIT_COMPLETED if completed else EXIT_FAILED
            reply = await self._answer(end, pending)
            if reply is None:
                return EXIT_SUSPENDED
            assert pending is not None
            await self.backend.resume(self.request_id, _ask_id(pending), reply)

    async def _answer(self, end: AgentEvent, pending: Pending | None) -> Reply | None:
        """The reply to what the run waits for; None when this terminal cannot give one."""
        assert self.request_id is not None
        reason = end.data.suspend_reason if isinstance(end.data, MessageData) else None
        match reason.type if reason is not None else None, pending:
            case SuspendType.PERMISSION_ASK, PermissionAskData() as ask:
                return await self.asker.permission(ask)
            case SuspendType.CLARIFY_REQUEST, ClarifyData() as question:
                return await self.asker.clarify(question, self.backend.elsewhere(self.request_id))
        what = "is paused" if reason and reason.type == SuspendType.MANUAL_SUSPEND else "waits"
        self.renderer.notice(f"the run {what}; resume it through the API ({self.request_id})")
        return None

    async def _after_background(self) -> tuple[AgentEvent, Pending | None]:
        """The segment the run goes on with once its background code ended, by itself.

        A server's stream of a run at rest ends at once, so it is asked again, less often as
        the wait goes on; an embedded run's stream waits for the run.
        """
        pause = 0
        while True:
            seen = self.last_seq
            with contextlib.suppress(CliError):
                end, pending = await self._segment()
                if not _waits_for_background(end):
                    return end, pending
            if self.last_seq == seen:
                await asyncio.sleep(BACKGROUND_POLL[min(pause, len(BACKGROUND_POLL) - 1)])
                pause += 1
            else:
                pause = 0

    async def _segment(self) -> tuple[AgentEvent, Pending | None]:
        """Show one stream segment; its terminal event and the ask or question it raised."""
        assert self.request_id is not None
        pending: Pending | None = None
        segment = self.backend.segment(self.request_id, self.last_seq)
        async with contextlib.aclosing(segment):
            async for item in segment:
                self.last_seq = item.seq
                event = self.renderer.feed(item.payload)
                self.renderer.flush()
                if event is not None and isinstance(event.data, PermissionAskData | ClarifyData):
                    pending = event.data
                if event is not None and isinstance(event.data, SubagentData):
                    await self._answer_child(event.data)
                if event is not None and event.is_terminal:
                    return event, pending
        raise CliError(f"the stream of run {self.request_id} ended without a terminal event")

    async def _answer_child(self, child: SubagentData) -> None:
        """A sub-agent's ask, put to the user like the run's own; its run gets the reply."""
        ask, rid = child.ask, child.child_request_id
        if ask is None or rid is None or child.status != "suspended":
            return
        if (ask_id := _ask_id(ask)) in self._answered:
            return
        self._answered.add(ask_id)
        self.renderer.notice(f"a sub-agent ({child.agent_id or rid}) asks:")
        reply: Reply | None
        if isinstance(ask, PermissionAskData):
            reply = await self.asker.permission(ask)
        else:
            reply = await self.asker.clarify(ask, self.backend.elsewhere(rid))
        if reply is None:
            self.renderer.notice(f"the sub-agent waits; resume it through the API ({rid})")
            return
        await self.backend.resume(rid, ask_id, reply)

    async def cancel(self) -> int:
        """After Ctrl-C: terminate the run and show how it ended."""
        self.renderer.notice("interrupted: cancelling the run…")
        if self.request_id is not None:
            await self.backend.terminate(self.request_id)
            with contextlib.suppress(CliError, TimeoutError):
                async with asyncio.timeout(10):
                    await self._segment()
        return EXIT_INTERRUPTED


def _ask_id(pending: Pending) -> str:
    return pending.ask_id if isinstance(pending, PermissionAskData) else pending.clarify_id


def _waits_for_background(end: AgentEvent) -> bool:
    """Whether the run suspended until its background code ends (it then goes on by itself)."""
    reason = end.data.suspend_reason if isinstance(end.data, MessageData) else None
    return reason is not None and reason.type == SuspendType.ASYNC_TOOL_PENDING
