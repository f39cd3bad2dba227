"""What the runtime answers about runs without changing them: its queries, and following a log.

:class:`~neta_jupyter.runtime.manager.Runtime` is one; its actions are in :mod:`.manager`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..store import EventRow, Push, Store, StoredEvent
from .data.runs import Run, Runs
from .errors import RunNotFound
from .log.tree import session_stream
from .scheduling.activations import Activations
from .scheduling.background import BackgroundJobs
from .scheduling.quotas import RunQuota
from .session_ops import own_session


class RunQueries:
    """The runtime's answers about runs; the runtime sets the parts they read."""

    store: Store
    runs: Runs
    quota: RunQuota
    background: BackgroundJobs
    _active: Activations

    # --- queries

    async def get_run(self, principal: str, request_id: str) -> Run:
        """The principal's run; another principal's run does not exist for them."""
        run = await self.runs.get(request_id)
        if run is None or run.principal != principal:
            raise RunNotFound(f"no run with requestId {request_id!r}")
        return run

    async def list_runs(self, principal: str, session_id: str | None = None) -> list[Run]:
        """The principal's runs (of one session when given), newest first."""
        return await self.runs.find(principal=principal, session_id=session_id)

    async def session_stream(self, principal: str, session_id: str) -> str:
        """The key in the event log of the stream of the principal's session's tree events."""
        return session_stream(
            (await own_session(self.store.records, principal, session_id, None)).session_id
        )

    def is_active(self, request_id: str) -> bool:
        """Whether the run's task is executing in this process."""
        return self._active.is_active(request_id)

    def executing(self) -> int:
        """How many runs execute in this process now."""
        return self._active.count

    async def wait(self, request_id: str) -> None:
        """Until the run's current activation ends."""
        await self._active.wait(request_id)

    # --- following: the only way transports read a run's events

    def follow(
        self,
        request_id: str,
        after: int,
        *,
        heartbeat: float | None = None,
        push: Push | None = None,
    ) -> AsyncIterator[list[EventRow]]:
        """The run's events after seq ``after`` as batches of ``(seq, eventType, envelope)``.

        ``request_id`` may also be a session's tree stream (:meth:`session_stream`).

        Stored ones first, then live ones as they become durable; it never ends by itself (a
        resumed run goes on under the same requestId), so close it when done. For a live
        transport, ``heartbeat`` adds an empty batch after each ``heartbeat`` seconds without
        events and, while the store cannot be written, a batch of one unstored AGENT_STATUS
        (seq -1, sent without an id) saying why the stream is quiet. A read that fails raises
        :class:`~neta_jupyter.store.StorageError`. With ``push``, a caught-up transport is handed
        each batch from the commit itself (:data:`~neta_jupyter.store.fanout.Push`).
        """
        return self.store.events.follow(request_id, after, heartbeat=heartbeat, push=push)

    async def last_seq(self, request_id: str) -> int:
        """Seq of the run's last durable event, -1 when it has none."""
        return await self.store.events.last_seq(request_id)

    async def last_event(self, request_id: str) -> StoredEvent | None:
        """The run's last durable event."""
        return await self.store.events.last_event(request_id)

    async def at_rest(self, request_id: str, after: int) -> bool:
        """Whether nothing follows seq ``after`` until the run is resumed or retried.

        Its last event is terminal, ``after`` is at or past it, its activation has wound down,
        and no server has resumed it since (its status says so before its first event). A run
        that waits for code running in the background here is not: it goes on by itself.
        """
        if self.background.waits(request_id):
            return False
        last = await self.last_event(request_id)
        if last is None or not last.terminal or after < last.seq or self.is_active(request_id):
            return False
        run = await self.runs.get(request_id)
        return run is None or run.status != "running"

    async def running_count(self, principal: str) -> int:
        """Runs of ``principal`` going now, counted up to the quota (0 without one)."""
        limit = self.quota.limit
        found = (
            await self.runs.find(principal=principal, status="running", limit=limit)
            if limit
            else []
        )
        return len(found)
