"""Writes to a session's tree, each published as a tree event (seed 002's Session Tree flow).

A change is published on the session's own stream and, when a run made it, on the run's stream
as well. The session's stream follows the tree across runs and carries what no run does (a leaf
switched through the API). It is a log like a run's, keyed by the session's id: its seqs start at
0 and are contiguous, ``lastEventId`` resumes it exactly, and its envelopes carry the session's id
as their ``requestId`` (the stream they belong to, so clients de-duplicate them like any other)
while ``data.requestId`` names the run.

* ``SESSION_ENTRY_ADDED`` for every new entry;
* ``SESSION_LEAF_CHANGED`` whenever the session's current leaf moves (every new entry becomes
  the leaf), so the last one always names the stored leaf;
* ``SESSION_ENTRY_UPDATED`` when an assistant entry's tool calls get their outcomes: each
  result marks its call, and the last one makes the entry ``complete``.
"""

from __future__ import annotations

from typing import Any, Literal

from ...events import (
    AgentEvent,
    EntrySubagent,
    EntryToolCall,
    EventData,
    EventType,
    SessionEntryData,
    SessionLeafData,
)
from ...events.models import SUBAGENT_ANSWER_PREVIEW
from ...store import Entry, EventLog, RecordStore
from ...store.records import EntryRole
from .emitter import RunEmitter

CallOutcome = Literal["completed", "failed", "not_run"]

CALL_OUTCOMES = "call_outcomes"
"""Key of an assistant message holding how its tool calls ended: ``{toolCallId: outcome}``.

Kept beside the message's provider fields, which models never see it among."""

CALL_META = "call_meta"
"""Key of an assistant message holding what its tool calls' events said (duration, failure,
images, sampled process timeline, process logs): ``{toolCallId: {field: value}}``, fields named
as :class:`~neta_jupyter.events.EntryToolCall` names them. A history view rebuilds its tool cards
and timeline from them when the run's events cannot be read."""

PREVIEW_CHARS = 120

SUBAGENT_CHILD = "childRequestId"
"""Key of a ``subagent`` entry's message naming the child run it stands for."""

SUBAGENT_ENDED = frozenset({"completed", "failed"})
"""Statuses of a ``subagent`` entry whose child run has ended (the entry changes no more)."""


def session_stream(session_id: str) -> str:
    """The key of a session's stream of tree events in the event log: the session's id."""
    return session_id


def entry_data(entry: Entry) -> SessionEntryData:
    """The whole node as tree events and the tree snapshot show it."""
    message = entry.message
    outcomes: dict[str, Any] = message.get(CALL_OUTCOMES) or {}
    meta: dict[str, Any] = message.get(CALL_META) or {}
    calls = [
        EntryToolCall.model_validate(
            {
                **(meta.get(call["id"]) or {}),
                "toolCallId": call["id"],
                "toolName": call["name"],
                "arguments": call.get("arguments"),
                "status": outcomes.get(call["id"], "pending"),
            }
        )
        for call in message.get("tool_calls") or []
    ]
    pending = any(c.status == "pending" for c in calls)
    child = message.get(SUBAGENT_CHILD) if entry.role == "subagent" else None
    subagent = subagent_of(message) if child is not None else None
    if child is not None:
        pending = message.get("status") not in SUBAGENT_ENDED
    return SessionEntryData(
        session_id=entry.session_id,
        entry_id=entry.entry_id,
        parent_id=entry.parent_id,
        role=entry.role,
        preview=str(message.get("content", ""))[:PREVIEW_CHARS],
        request_id=entry.request_id,
        status="pending" if pending else "complete",
        tool_calls=calls or None,
        child_request_id=child,
        subagent=subagent,
    )


def subagent_of(message: dict[str, Any]) -> EntrySubagent:
    """A ``subagent`` entry's child run as the tree shows it: once ended, with its result."""
    status = str(message.get("status") or "queued")
    ended = status in SUBAGENT_ENDED
    answer = str(message.get("content") or "") if status == "completed" else ""
    return EntrySubagent(
        status=status,
        agent_id=message.get("agentId"),
        task=message.get("task"),
        answer_preview=answer[:SUBAGENT_ANSWER_PREVIEW] if ended and answer else None,
        answer_truncated=(len(answer) > SUBAGENT_ANSWER_PREVIEW) if ended and answer else None,
        error_code=message.get("errorCode"),
    )


class SessionTree:
    """The session tree's writes: the records first, then their events.

    ``moves_leaf=False`` writes a branch that leaves the session's leaf where it is: a
    sub-agent's entries, while the conversation goes on from the run that delegated.
    """

    def __init__(self, records: RecordStore, log: EventLog, *, moves_leaf: bool = True) -> None:
        self.records = records
        self._log = log
        self.moves_leaf = moves_leaf

    async def add(
        self,
        session_id: str,
        role: EntryRole,
        message: dict[str, Any],
        *,
        request_id: str | None,
        parent_id: str | None,
        entry_id: str | None = None,
        run: RunEmitter | None = None,
    ) -> Entry:
        """Append an entry under ``parent_id``; it becomes the session's leaf."""
        previous = await self._leaf(session_id)
        entry = await self.records.add_entry(
            session_id,
            role,
            message,
            request_id=request_id,
            parent_id=parent_id,
            entry_id=entry_id,
            move_leaf=self.moves_leaf,
        )
        self._publish(session_id, EventType.SESSION_ENTRY_ADDED, entry_data(entry), run)
        self._moved(session_id, entry.entry_id, previous, request_id, run)
        return entry

    async def answer(
        self,
        assistant: Entry,
        call: dict[str, str],
        output: str,
        outcome: CallOutcome,
        *,
        request_id: str,
        parent_id: str | None,
        run: RunEmitter | None,
        meta: dict[str, Any] | None = None,
    ) -> Entry:
        """A tool call's result joins the tree, and its assistant entry records how it ended.

        ``call`` has the call's ``id`` and ``name``; ``meta`` what its events said
        (:data:`CALL_META`). ``assistant`` is updated in place.
        """
        outcomes = {**(assistant.message.get(CALL_OUTCOMES) or {}), call["id"]: outcome}
        assistant.message[CALL_OUTCOMES] = outcomes
        if meta:
            assistant.message[CALL_META] = {
                **(assistant.message.get(CALL_META) or {}),
                call["id"]: meta,
            }
        # The outcome is written before the result: should the process die between the two,
        # the call has no result and recovery answers it as not run, outcome and all.
        await self.records.update_entry(assistant.entry_id, assistant.message)
        entry = await self.add(
            assistant.session_id,
            "tool",
            {"role": "tool", "content": output, "tool_call_id": call["id"], "name": call["name"]},
            request_id=request_id,
            parent_id=parent_id,
            run=run,
        )
        self._publish(
            assistant.session_id, EventType.SESSION_ENTRY_UPDATED, entry_data(assistant), run
        )
        return entry

    async def update(
        self, entry: Entry, message: dict[str, Any], *, run: RunEmitter | None
    ) -> None:
        """Replace an entry's message (its place in the tree stays): SESSION_ENTRY_UPDATED."""
        entry.message = message
        await self._log.open(session_stream(entry.session_id))
        await self.records.update_entry(entry.entry_id, message)
        self._publish(entry.session_id, EventType.SESSION_ENTRY_UPDATED, entry_data(entry), run)

    async def switch(self, session_id: str, entry_id: str | None) -> None:
        """Move the session's leaf to another entry of its tree (the caller checked it is)."""
        previous = await self._leaf(session_id)
        await self.records.set_leaf(session_id, entry_id)
        self._moved(session_id, entry_id, previous, None, None)

    async def replace_path(
        self,
        session_id: str,
        summary: dict[str, Any],
        kept: list[Entry],
        *,
        request_id: str | None,
        run: RunEmitter | None,
    ) -> Entry:
        """:meth:`RecordStore.replace_path`, then the new branch's entries and its leaf."""
        previous = await self._leaf(session_id)
        leaf = await self.records.replace_path(
            session_id, summary, kept, request_id, move_leaf=self.moves_leaf
        )
        for entry in await self.records.path(session_id, leaf.entry_id):
            self._publish(session_id, EventType.SESSION_ENTRY_ADDED, entry_data(entry), run)
        self._moved(session_id, leaf.entry_id, previous, request_id, run)
        return leaf

    async def _leaf(self, session_id: str) -> str | None:
        """The session's leaf, once its stream can be appended to (every write asks first)."""
        await self._log.open(session_stream(session_id))
        session = await self.records.get_session(session_id)
        return session.leaf_entry_id if session is not None else None

    def _moved(
        self,
        session_id: str,
        leaf: str | None,
        previous: str | None,
        request_id: str | None,
        run: RunEmitter | None,
    ) -> None:
        if leaf == previous or not self.moves_leaf:
            return
        data = SessionLeafData(
            session_id=session_id,
            leaf_entry_id=leaf,
            previous_leaf_entry_id=previous,
            request_id=request_id,
        )
        self._publish(session_id, EventType.SESSION_LEAF_CHANGED, data, run)

    def _publish(
        self, session_id: str, event_type: EventType, data: EventData, run: RunEmitter | None
    ) -> None:
        if run is not None:
            run.emit(event_type, data)
        self._log.append_nowait(
            AgentEvent(event_type=event_type, request_id=session_stream(session_id), data=data)
        )
