"""What the steps of one activation share: the run, where it writes, and how it ends a turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...events import EventType, FinishReason, TextData
from ...store import Entry, RecordStore
from ...store.records import EntryRole
from ..config import RuntimeConfig
from ..data.runs import Run, Runs
from ..data.steps import Finish
from ..log.emitter import RunEmitter
from ..log.tree import CallOutcome, SessionTree


@dataclass(slots=True)
class Turn:
    """One activation of a run, as its steps see it."""

    run: Run
    """The run (its state changes as the steps go)."""
    runs: Runs
    """Where the run is saved."""
    tree: SessionTree
    """Where its messages go."""
    emitter: RunEmitter
    """Where its events go."""
    config: RuntimeConfig
    """How runs behave."""

    @property
    def records(self) -> RecordStore:
        """The store's records (sessions, entries, inputs)."""
        return self.runs.records

    async def save(self) -> None:
        """Persist the run's status and state."""
        await self.runs.save(self.run)

    async def add_entry(self, role: EntryRole, message: dict[str, Any]) -> Entry:
        """Append a message to the conversation (the turn's first reply takes its reserved id)."""
        state = self.run.state
        entry_id = None
        if role == "assistant" and not state.assistant_used:
            entry_id = state.assistant_message_id
            state.assistant_used = True
        entry = await self.tree.add(
            self.run.session_id,
            role,
            message,
            request_id=self.run.request_id,
            parent_id=state.leaf,
            entry_id=entry_id,
            run=self.emitter,
        )
        state.leaf = entry.entry_id
        return entry

    async def answer(
        self,
        reply: Entry,
        call_id: str,
        name: str,
        output: str,
        outcome: CallOutcome,
        *,
        meta: dict[str, Any] | None = None,
    ) -> None:
        """A call's result joins the tree; the reply records how the call ended (and ``meta``)."""
        entry = await self.tree.answer(
            reply,
            {"id": call_id, "name": name},
            output,
            outcome,
            request_id=self.run.request_id,
            parent_id=self.run.state.leaf,
            run=self.emitter,
            meta=meta,
        )
        self.run.state.leaf = entry.entry_id

    async def finish_with_notice(self, reason: FinishReason, text: str) -> Finish:
        """End the run with a text the system wrote, saved like an answer."""
        self.emitter.emit(EventType.TEXT_START, TextData(text=text, synthetic=True))
        self.emitter.emit(EventType.TEXT_END, TextData())
        entry = await self.add_entry("assistant", {"role": "assistant", "content": text})
        self.run.state.last_assistant = entry.entry_id
        return Finish(reason, text)
