"""The in-memory backend: the store contract kept in this process (tests, throwaway runtimes).

:class:`MemoryData` is the "disk": it outlives the :class:`MemoryBackend` opened on it, so a new
backend on the same data is a restart, and what the old one had not yet written is lost as in a
crash. Writes are grouped like SQLite's: events wait for the end of the current callback of the
event loop, a record write takes them with it. :meth:`MemoryBackend.fail_writes` makes writes
fail for a while, as a full disk does.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .backlog import Backlog
from .contract import DurableListener, EventRow, HealthListener, SessionChanges
from .health import StorageUnavailable
from .records import (
    AttachmentRecord,
    Entry,
    RunRecord,
    RunStatus,
    SessionRecord,
    newest_matching,
)

Write = Callable[["MemoryData"], None]


@dataclass
class MemoryData:
    """Everything a memory backend has written (each record a copy no caller holds)."""

    streams: dict[str, list[EventRow]] = field(default_factory=dict)
    runs: dict[str, RunRecord] = field(default_factory=dict)
    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    entries: dict[str, Entry] = field(default_factory=dict)
    """By id, in the order they were added."""
    inputs: dict[str, tuple[str, str, bool]] = field(default_factory=dict)
    """``input_id → (request_id, content, consumed)``, in the order they were added."""
    attachments: dict[str, AttachmentRecord] = field(default_factory=dict)
    notebook_edits: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """``edit_id → (request_id, body)``, in the order they were first stored."""


class MemoryBackend:
    """:class:`~neta_jupyter.store.contract.Backend` over a :class:`MemoryData`."""

    def __init__(self, data: MemoryData | None = None) -> None:
        self.data = data if data is not None else MemoryData()
        self._pending: dict[str, list[EventRow]] = {}
        self._ends: dict[str, int] = {}
        self._kept: list[Write] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._writable: list[asyncio.Future[None]] = []
        self._listeners: list[DurableListener] = []
        self._health_listeners: list[HealthListener] = []
        self._scheduled: asyncio.Handle | None = None
        self._backlog = Backlog()
        self._fault: str | None = None
        self._closed = False
        self._dead = False

    # --- events

    def queue(self, stream: str, rows: list[EventRow]) -> None:
        """Hold ``rows`` for the next write, which the end of the current callback makes."""
        if self._closed:
            raise RuntimeError("the store is closed")
        if self._dead:
            return
        end = self._ends.get(stream)
        if end is None:
            end = len(self.data.streams.get(stream, ()))
        if rows[0][0] != end:
            raise ValueError(f"stream {stream!r} continues at seq {end}, not {rows[0][0]}")
        self._ends[stream] = rows[-1][0] + 1
        self._pending.setdefault(stream, []).extend(rows)
        self._schedule()

    def durable(self) -> asyncio.Future[None]:
        """Resolves once everything queued so far is written."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._pending and not self._kept:
            fut.set_result(None)
        else:
            self._waiters.append(fut)
        return fut

    def retire(self, stream: str) -> None:
        """Nothing: this backend keeps every event for as long as it lives."""

    def room(self) -> asyncio.Future[None] | None:
        """``None`` unless many events wait to be written (only while writes fail)."""
        return self._backlog.room(sum(map(len, self._pending.values())))

    def on_durable(self, listener: DurableListener) -> None:
        """Call ``listener`` with the events each write made durable."""
        self._listeners.append(listener)

    def on_health(self, listener: HealthListener) -> None:
        """Call ``listener`` when writes start failing and when they work again."""
        self._health_listeners.append(listener)

    async def last_seq(self, stream: str) -> int:
        """Seq of the stream's last written event, -1 when it has none."""
        return len(self.data.streams.get(stream, ())) - 1

    async def read_after(self, stream: str, after: int, limit: int) -> list[EventRow]:
        """Up to ``limit`` written events with seq > ``after``, in order."""
        rows = self.data.streams.get(stream, [])
        start = max(after + 1, 0)
        return rows[start : start + limit]

    # --- writing

    def _schedule(self) -> None:
        if self._scheduled is not None or self._fault is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.commit()  # no loop to wait on: be durable now
            return
        self._scheduled = loop.call_soon(self.commit)

    def commit(self) -> None:
        """Write what is pending now, unless writes fail."""
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        if self._fault is None and not self._closed and not self._dead:
            self._write([])

    def _now(self, write: Write, *, keep: bool = False) -> None:
        """``write`` with everything pending, at once; kept for later (or refused) while failing."""
        if self._closed:
            raise RuntimeError("the store is closed")
        if self._dead:
            return
        if self._fault is None:
            self._write([write])
        elif keep:
            self._kept.append(write)
        else:
            raise StorageUnavailable(
                f"the server cannot save anything now: {self._fault}; try again once it can",
                reason=self._fault,
            )

    def _write(self, writes: list[Write]) -> None:
        data = self.data
        for write in [*self._kept, *writes]:
            write(data)
        pending, self._pending = self._pending, {}
        self._kept = []
        self._backlog.moved(0)
        for stream, rows in pending.items():
            data.streams.setdefault(stream, []).extend(rows)
        waiters, self._waiters = self._waiters, []
        for stream, rows in pending.items():
            for listener in self._listeners:
                listener(stream, rows)
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def fail_writes(self, reason: str | None) -> None:
        """Make writes fail (``reason``, as a full disk does) or, with ``None``, work again."""
        was, self._fault = self._fault, reason
        if (was is None) == (reason is None):
            return
        for listener in self._health_listeners:
            listener(reason)
        if reason is None:
            self.commit()
            writable, self._writable = self._writable, []
            for fut in writable:
                if not fut.done():
                    fut.set_result(None)

    @property
    def unavailable(self) -> str | None:
        """Why writes fail, while they do."""
        return self._fault

    def writable(self) -> asyncio.Future[None]:
        """Resolves once writes work (at once when they do)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._fault is None:
            fut.set_result(None)
        else:
            self._writable.append(fut)
        return fut

    def close(self) -> None:
        """Write what is pending; this backend writes nothing more."""
        self.commit()
        self._stop()
        self._closed = True

    def crash(self) -> None:
        """Stop as a killed process would: what is not written yet is lost.

        Whatever this backend is asked to write from now on goes nowhere (its runs may still be
        winding down).
        """
        self._stop()
        self._dead = True

    def _stop(self) -> None:
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        self._pending, self._kept = {}, []
        self._backlog.stop()
        for fut in self._waiters + self._writable:
            fut.cancel()

    # --- runs

    async def insert_run(self, run: RunRecord) -> None:
        """Store a new run."""
        stored = copy.deepcopy(run)
        self._now(lambda data: data.runs.__setitem__(stored.request_id, stored))

    async def update_run(
        self, request_id: str, status: RunStatus, state: dict[str, Any], *, with_events: bool
    ) -> None:
        """Set a run's status and state (with the pending events: kept while writes fail)."""
        state = copy.deepcopy(state)

        def write(data: MemoryData) -> None:
            run = data.runs.get(request_id)
            if run is not None:
                run.status, run.state = status, state

        self._now(write, keep=with_events)

    async def get_run(self, request_id: str) -> RunRecord | None:
        """The run, if it exists."""
        return copy.deepcopy(self.data.runs.get(request_id))

    async def find_runs(
        self,
        *,
        principal: str | None,
        session_id: str | None,
        status: RunStatus | None,
        parent_request_id: str | None,
        limit: int,
    ) -> list[RunRecord]:
        """Runs matching every filter given, newest first."""
        found = newest_matching(
            self.data.runs.values(),
            principal=principal,
            session_id=session_id,
            status=status,
            parent_request_id=parent_request_id,
            limit=limit,
        )
        return copy.deepcopy(found)

    # --- sessions and the tree

    async def insert_session(self, session: SessionRecord) -> SessionRecord:
        """Store ``session``, unless its principal has one of that name: then that one."""
        for existing in self.data.sessions.values():
            if (existing.principal, existing.name) == (session.principal, session.name):
                return copy.deepcopy(existing)
        stored = copy.deepcopy(session)
        self._now(lambda data: data.sessions.__setitem__(stored.session_id, stored))
        return copy.deepcopy(stored)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, if it exists."""
        return copy.deepcopy(self.data.sessions.get(session_id))

    async def find_sessions(self, principal: str) -> list[SessionRecord]:
        """The principal's sessions, newest first."""
        found = [s for s in self.data.sessions.values() if s.principal == principal]
        found.sort(key=lambda session: session.created, reverse=True)
        return copy.deepcopy(found)

    async def update_session(self, session_id: str, changes: SessionChanges) -> None:
        """Set some of a session's fields."""
        changes = copy.deepcopy(changes)

        def write(data: MemoryData) -> None:
            session = data.sessions.get(session_id)
            for name, value in changes.items() if session is not None else ():
                setattr(session, name, value)

        self._now(write)

    async def add_usage(
        self, session_id: str, inputs: int, outputs: int, unknown: bool
    ) -> SessionRecord | None:
        """Add a turn's tokens to the session's totals; the session after."""

        def write(data: MemoryData) -> None:
            session = data.sessions.get(session_id)
            if session is not None:
                session.input_tokens += inputs
                session.output_tokens += outputs
                session.has_unknown_usage = session.has_unknown_usage or unknown

        self._now(write)
        return await self.get_session(session_id)

    async def insert_entries(
        self, session_id: str, entries: list[Entry], *, move_leaf: bool
    ) -> None:
        """Add entries to the tree (the last one its leaf with ``move_leaf``), together."""
        stored = copy.deepcopy(entries)

        def write(data: MemoryData) -> None:
            for entry in stored:
                data.entries[entry.entry_id] = entry
            session = data.sessions.get(session_id)
            if session is not None and move_leaf:
                session.leaf_entry_id = stored[-1].entry_id

        self._now(write)

    async def update_entry(self, entry_id: str, message: dict[str, Any]) -> None:
        """Replace an entry's message."""
        message = copy.deepcopy(message)

        def write(data: MemoryData) -> None:
            entry = data.entries.get(entry_id)
            if entry is not None:
                entry.message = message

        self._now(write)

    async def get_entry(self, entry_id: str) -> Entry | None:
        """One entry."""
        return copy.deepcopy(self.data.entries.get(entry_id))

    async def session_entries(self, session_id: str) -> list[Entry]:
        """Every entry of the session's tree, in the order they were added."""
        found = [e for e in self.data.entries.values() if e.session_id == session_id]
        return copy.deepcopy(found)

    # --- supplementary inputs

    async def insert_input(self, input_id: str, request_id: str, content: str) -> None:
        """Queue input for a run."""
        self._now(lambda data: data.inputs.__setitem__(input_id, (request_id, content, False)))

    async def pending_inputs(self, request_id: str) -> list[tuple[str, str]]:
        """The run's inputs not yet consumed, oldest first."""
        return [
            (input_id, content)
            for input_id, (rid, content, consumed) in self.data.inputs.items()
            if rid == request_id and not consumed
        ]

    async def consume_input(self, input_id: str) -> None:
        """Mark an input consumed."""

        def write(data: MemoryData) -> None:
            found = data.inputs.get(input_id)
            if found is not None:
                data.inputs[input_id] = (found[0], found[1], True)

        self._now(write)

    # --- attachments

    async def put_attachment(self, record: AttachmentRecord) -> None:
        """Store an attachment's record (replacing one at the same virtual path)."""
        stored = copy.deepcopy(record)
        self._now(lambda data: data.attachments.__setitem__(stored.virtual_path, stored))

    async def get_attachment(self, virtual_path: str) -> AttachmentRecord | None:
        """The attachment stored at ``virtual_path``."""
        return copy.deepcopy(self.data.attachments.get(virtual_path))

    # --- notebook edits

    async def put_notebook_edit(self, edit_id: str, request_id: str, body: dict[str, Any]) -> None:
        """Store a notebook edit (replacing the one with the same id)."""
        stored = (request_id, copy.deepcopy(body))
        self._now(lambda data: data.notebook_edits.__setitem__(edit_id, stored))

    async def notebook_edits(self, request_id: str) -> list[dict[str, Any]]:
        """The run's notebook edits, oldest first."""
        found = [b for rid, b in self.data.notebook_edits.values() if rid == request_id]
        return copy.deepcopy(found)

    async def get_notebook_edit(self, edit_id: str) -> dict[str, Any] | None:
        """One notebook edit."""
        found = self.data.notebook_edits.get(edit_id)
        return copy.deepcopy(found[1]) if found is not None else None
