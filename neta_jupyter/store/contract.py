"""The store contract: the primitives every backend (SQLite, in-memory, …) provides.

Backends know nothing of what runs mean, of followers or of secrets: they keep batches of encoded
events per stream, say when each became durable, and keep records. Numbering, encoding and
redaction live above them in :class:`~neta_jupyter.store.eventlog.EventLog` and
:class:`~neta_jupyter.store.record_store.RecordStore`, fan-out to live followers in
:class:`~neta_jupyter.store.fanout.Fanout`. ``tests/store/contract.py`` is this contract as tests,
and every backend passes it.

Every read is async (a backend may be across a network); appending is not: the event path queues
pre-encoded batches without an await per event, and :meth:`EventBackend.durable` says when they
are durable. Writes that cannot be made raise
:class:`~neta_jupyter.store.health.StorageError`; events queued meanwhile are kept and written
once writes work again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar

if TYPE_CHECKING:
    from .records import AttachmentRecord, Entry, RunRecord, RunStatus, SessionRecord

EventRow = tuple[int, str, str]
"""``(seq, event_type, payload)``: a plain tuple, made once when the event is appended. The
backend writes it, the live tail keeps it and every follower sends that same object; the garbage
collector stops tracking tuples of strings and numbers (not named tuples), so thousands of
recent events cost it nothing."""

DurableListener = Callable[[str, list[EventRow]], None]
"""Told, per stream, the events a write made durable: contiguous, right after the ones before,
each once."""
HealthListener = Callable[[str | None], None]
"""Told why writes fail when a spell of failures begins, and ``None`` when it ends."""

T = TypeVar("T")


def finish_now(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to its end here, where no event loop can be awaited.

    For the few callers that must answer at once (a magic's query in the kernel, the server's
    start-up before it serves): a local backend (SQLite, in-memory) never suspends, so its work
    is done when it first returns. One that would wait (a network store) is refused.
    """
    try:
        work.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    work.close()
    raise RuntimeError("this store cannot answer without waiting; ask it from the event loop")


class EventBackend(Protocol):
    """Durable streams of events: append a batch, read after a seq.

    Durable before visible: no event reaches a :data:`DurableListener` or a read before it is
    durable, and a write makes its whole batch durable or none of it.
    """

    def queue(self, stream: str, rows: list[EventRow]) -> None:
        """Hold ``rows`` for the next durable write; their seqs continue the stream's."""
        ...

    def durable(self) -> Awaitable[None]:
        """Resolves once everything queued so far is durable."""
        ...

    def retire(self, stream: str) -> None:
        """``stream``, of no run, is written no more (a crew that ended).

        Its events are kept for the retention from now, then deleted, as a finished run's.
        """
        ...

    def room(self) -> Awaitable[None] | None:
        """``None`` while the writer keeps up; else resolves once it has caught up enough.

        A producer asks between slices of its stream and waits on what it is given, so the
        events not yet durable stay within a bound (:mod:`~neta_jupyter.store.backlog`).
        """
        ...

    def on_durable(self, listener: DurableListener) -> None:
        """Call ``listener`` with the events each write made durable, as soon as it did."""
        ...

    def on_health(self, listener: HealthListener) -> None:
        """Call ``listener`` when writes start failing (with why) and when they work again."""
        ...

    async def last_seq(self, stream: str) -> int:
        """Seq of the stream's last durable event, -1 when it has none."""
        ...

    async def read_after(self, stream: str, after: int, limit: int) -> list[EventRow]:
        """Up to ``limit`` durable events with seq > ``after``, in order."""
        ...


class SessionChanges(TypedDict, total=False):
    """Fields of a session that are set, not added to."""

    leaf_entry_id: str | None
    always_allow: list[str]
    todo: list[dict[str, Any]]
    thinking_level: str | None


class RecordBackend(Protocol):
    """Records of runs, sessions and their trees, supplementary inputs and attachments.

    What a record holds is written as given (already redacted); what is read back is a fresh
    object the caller may change.
    """

    async def insert_run(self, run: RunRecord) -> None:
        """Store a new run."""
        ...

    async def update_run(
        self, request_id: str, status: RunStatus, state: dict[str, Any], *, with_events: bool
    ) -> None:
        """Set a run's status and state.

        ``with_events``: durable together with every event queued before the call, both or
        neither (a terminal event and the status it implies); it joins them before the call
        first suspends, so no write can take the events without it. When writes fail it is
        kept and written with them instead of raising.
        """
        ...

    async def get_run(self, request_id: str) -> RunRecord | None:
        """The run, if it exists."""
        ...

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
        ...

    async def insert_session(self, session: SessionRecord) -> SessionRecord:
        """Store ``session``, unless its principal has one of that name: then that one."""
        ...

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, if it exists."""
        ...

    async def find_sessions(self, principal: str) -> list[SessionRecord]:
        """The principal's sessions, newest first."""
        ...

    async def update_session(self, session_id: str, changes: SessionChanges) -> None:
        """Set some of a session's fields."""
        ...

    async def add_usage(
        self, session_id: str, inputs: int, outputs: int, unknown: bool
    ) -> SessionRecord | None:
        """Add a turn's tokens to the session's totals (atomically); the session after."""
        ...

    async def insert_entries(
        self, session_id: str, entries: list[Entry], *, move_leaf: bool
    ) -> None:
        """Add entries to the session's tree, atomically; ``move_leaf``: the last is its leaf."""
        ...

    async def update_entry(self, entry_id: str, message: dict[str, Any]) -> None:
        """Replace an entry's message."""
        ...

    async def get_entry(self, entry_id: str) -> Entry | None:
        """One entry."""
        ...

    async def session_entries(self, session_id: str) -> list[Entry]:
        """Every entry of the session's tree, in the order they were added."""
        ...

    async def insert_input(self, input_id: str, request_id: str, content: str) -> None:
        """Queue input for a run."""
        ...

    async def pending_inputs(self, request_id: str) -> list[tuple[str, str]]:
        """``(input_id, content)`` of the run's inputs not yet consumed, oldest first."""
        ...

    async def consume_input(self, input_id: str) -> None:
        """Mark an input consumed."""
        ...

    async def put_attachment(self, record: AttachmentRecord) -> None:
        """Store an attachment's record (replacing one at the same virtual path)."""
        ...

    async def get_attachment(self, virtual_path: str) -> AttachmentRecord | None:
        """The attachment stored at ``virtual_path``."""
        ...

    async def put_notebook_edit(self, edit_id: str, request_id: str, body: dict[str, Any]) -> None:
        """Store a notebook edit of a run (replacing the one with the same id)."""
        ...

    async def notebook_edits(self, request_id: str) -> list[dict[str, Any]]:
        """The run's notebook edits, in the order they were first stored."""
        ...

    async def get_notebook_edit(self, edit_id: str) -> dict[str, Any] | None:
        """One notebook edit."""
        ...


class Backend(EventBackend, RecordBackend, Protocol):
    """One store: its events and its records, written in one order.

    A record write is durable only together with, or after, the events queued before it.
    """

    @property
    def unavailable(self) -> str | None:
        """Why writes fail, while they do."""
        ...

    def writable(self) -> Awaitable[None]:
        """Resolves once writes work (at once when they do)."""
        ...

    def commit(self) -> None:
        """Write what is pending now, if writes work (at shutdown: no waiting)."""
        ...

    def close(self) -> None:
        """Write what is pending and let go of the storage."""
        ...
