"""Runs as the runtime works with them: the store's record with typed options and state.

The store keeps a run's options and state as JSON documents and never reads them; this module
turns them into :class:`RunOptions` and :class:`RunState` (upgrading documents of an older
shape) and back.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from ...events.runs import RunSummary
from ...providers.base import ToolCall
from ...store import EventLog, RecordStore, RunRecord, RunStatus
from ...store.retention import FINISHED
from .snapshots import SnapshotInvalid
from .state import (
    CallsOf,
    RunOptions,
    RunState,
    calls_needed,
    load_options,
    load_state,
    no_calls,
    origin_of,
)
from .steps import RunTools


@dataclass(slots=True)
class Run:
    """One run (one requestId)."""

    request_id: str
    """The run."""
    principal: str
    """The user it belongs to."""
    session_id: str
    """Its session."""
    status: RunStatus
    """Where it stands."""
    model: str
    """The model it runs on."""
    created: float
    """When it started (seconds since the epoch)."""
    prompt: str = ""
    """The user's prompt."""
    imported: bool = False
    """A history run registered without a stream."""
    options: RunOptions = field(default_factory=RunOptions)
    """What it was started with."""
    state: RunState = field(default_factory=RunState)
    """Where its loop is."""
    parent_request_id: str | None = None
    """The run that started it as a sub-agent (``None``: a user started it)."""
    snapshot_error: str | None = None
    """Why its stored options or state cannot be loaded (then ``options`` and ``state`` are
    defaults, and the stored documents are written back as they were)."""
    stored: RunRecord | None = field(default=None, repr=False)
    """The record it was loaded from, when ``snapshot_error`` is set."""

    def record(self) -> RunRecord:
        """As the store keeps it."""
        kept = self.stored if self.snapshot_error else None
        return RunRecord(
            request_id=self.request_id,
            principal=self.principal,
            session_id=self.session_id,
            status=self.status,
            model=self.model,
            created=self.created,
            prompt=self.prompt,
            imported=self.imported,
            options=kept.options if kept else self.options.to_document(),
            state=kept.state if kept else self.state.to_document(),
            parent_request_id=self.parent_request_id,
        )

    @classmethod
    def of(cls, record: RunRecord, calls_of: CallsOf = no_calls) -> Run:
        """The run a stored record describes, in whatever shape it was stored.

        ``calls_of`` gives what upgrading a state stored among its tool calls needs to know. A
        record whose options or state cannot be loaded gives a run with ``snapshot_error`` set.
        """
        try:
            options = load_options(record.options)
            state = load_state(record.state, calls_of)
        except SnapshotInvalid as exc:
            return cls._invalid(record, exc.message)
        return cls._loaded(record, options, state)

    @classmethod
    def _invalid(cls, record: RunRecord, problem: str) -> Run:
        return cls._loaded(record, RunOptions(), RunState(), snapshot_error=problem, stored=record)

    @classmethod
    def _loaded(
        cls,
        record: RunRecord,
        options: RunOptions,
        state: RunState,
        *,
        snapshot_error: str | None = None,
        stored: RunRecord | None = None,
    ) -> Run:
        return cls(
            request_id=record.request_id,
            principal=record.principal,
            session_id=record.session_id,
            status=record.status,
            model=record.model,
            created=record.created,
            prompt=record.prompt,
            imported=record.imported,
            options=options,
            state=state,
            parent_request_id=record.parent_request_id,
            snapshot_error=snapshot_error,
            stored=stored,
        )

    def summary(self, last_seq: int, *, events_expired: bool = False) -> RunSummary:
        """What clients are told about the run."""
        ask = self.state.ask
        return RunSummary(
            request_id=self.request_id,
            session_id=self.session_id,
            status=self.status,
            model=self.model,
            prompt=self.prompt,
            created=self.created,
            imported=self.imported,
            last_seq=last_seq,
            events_expired=events_expired,
            step=self.state.step,
            recoverable=self.state.recoverable,
            pending_ask=ask.to_wire() if ask is not None else None,
            suspend_deadline=self.state.suspend_deadline,
            usage=self.state.usage,
            parent_request_id=self.parent_request_id,
            origin=origin_of(self.options),
        )


class Runs:
    """Typed runs over the store's run records."""

    def __init__(self, records: RecordStore) -> None:
        self.records = records

    async def create(self, run: Run) -> None:
        """Persist a new run."""
        await self.records.create_run(run.record())

    async def save(self, run: Run, *, keep: bool = False) -> None:
        """Persist a run's status and state (``keep``: see :meth:`RecordStore.save_run`)."""
        await self.records.save_run(run.record(), keep=keep)

    async def get(self, request_id: str) -> Run | None:
        """The run, if it exists."""
        record = await self.records.get_run(request_id)
        return await self._of(record) if record is not None else None

    async def find(
        self,
        *,
        principal: str | None = None,
        session_id: str | None = None,
        status: RunStatus | None = None,
        parent_request_id: str | None = None,
        limit: int = 200,
    ) -> list[Run]:
        """Runs matching the filters, newest first."""
        found = await self.records.runs(
            principal=principal,
            session_id=session_id,
            status=status,
            parent_request_id=parent_request_id,
            limit=limit,
        )
        return [await self._of(r) for r in found]

    async def _of(self, record: RunRecord) -> Run:
        """The typed run, with the tool calls upgrading its stored state may need read first."""
        wanted = calls_needed(record.state)
        if wanted is None:
            return Run.of(record)
        reply_id, leaf = wanted
        reply = await self.records.get_entry(reply_id)
        raw = reply.message.get("tool_calls", []) if reply is not None else []
        path = await self.records.path(record.session_id, leaf)
        answered = {str(e.message.get("tool_call_id")) for e in path if e.role == "tool"}
        try:
            calls = [ToolCall(**c) for c in raw]
        except (TypeError, ValueError) as exc:
            return Run._invalid(record, f"the tool calls of its stored step cannot be read: {exc}")
        return Run.of(record, lambda _reply, _leaf: (calls, answered))


def missing_tool(run: Run, known: Collection[str]) -> str | None:
    """Why the run cannot go on among its tool calls: a call it waits in names an unknown tool."""
    step = run.state.next
    if not isinstance(step, RunTools):
        return None
    virtual = {v.name for v in run.options.virtual_tools}
    waiting = {step.waiting, step.resumed.tool_call_id if step.resumed else None}
    if run.state.ask is not None:
        waiting.add(run.state.ask.tool_call_id)
    for call in step.calls:
        if call.id in waiting and call.name not in known and call.name not in virtual:
            return (
                f"its stored step waits on a call of the tool {call.name!r}, which this server "
                "no longer offers"
            )
    return None


def snapshot_problem(run: Run, known: Collection[str]) -> str | None:
    """Why the run's stored position cannot be continued (``None``: it can)."""
    return run.snapshot_error or missing_tool(run, known)


def failure_message(problem: str) -> str:
    """The MESSAGE_FAILED ``errorMessage`` of a run whose stored position cannot be loaded."""
    return f"the run cannot be continued: {problem}"


async def events_expired(events: EventLog, run: Run) -> bool:
    """Whether the run's events were deleted once kept long enough after it ended.

    A finished run always has its terminal event, so one with no events left has expired.
    """
    if run.imported or run.status not in FINISHED:
        return False
    return await events.stored_last_seq(run.request_id) < 0
