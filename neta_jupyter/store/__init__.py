"""Durable storage: the event log and the records of runs, sessions and attachments."""

from __future__ import annotations

import logging
from pathlib import Path

from ..events.redact import Redactor
from .contract import Backend, EventRow, finish_now
from .db import Database
from .eventlog import EventLog, StoredEvent
from .fanout import Push
from .health import LeaseLost, StorageDamaged, StorageError, StorageUnavailable
from .leases import Leases, LocalLeases
from .memory import MemoryBackend, MemoryData
from .records import (
    AttachmentRecord,
    Entry,
    RecordStore,
    RunRecord,
    RunStatus,
    SessionRecord,
    new_id,
)
from .redis_backend import RedisBackend
from .redis_conn import is_redis_url, masked_url, url_password
from .sqlite import SqliteBackend


class Store:
    """The event log and the record store over one backend: a SQLite file unless given one."""

    def __init__(
        self,
        where: str | Path | Backend,
        *,
        commit_interval: float = 0.002,
        lease_ttl: float = 15.0,
        event_retention: float = 0,
        logger: logging.Logger | None = None,
    ) -> None:
        """``event_retention``: seconds a finished run's events are kept (0: forever)."""
        secret = None
        if isinstance(where, str) and is_redis_url(where):
            secret = url_password(where)
            where = RedisBackend(
                where,
                commit_interval=commit_interval,
                lease_ttl=lease_ttl,
                event_retention=event_retention,
                logger=logger,
            )
        elif isinstance(where, str | Path):
            where = SqliteBackend(
                where,
                commit_interval=commit_interval,
                event_retention=event_retention,
                logger=logger,
            )
        self.backend: Backend = where
        self.leases: Leases = where if isinstance(where, RedisBackend) else LocalLeases()
        """Who may write which run: this server alone, unless the store is shared."""
        self.redactor = Redactor()
        """Shared by the event log, the records and attachments: secrets registered once."""
        self.secrets: tuple[str, ...] = (secret,) if secret else ()
        """The store's own credentials (a Redis password): the runtime redacts them by value."""
        self.events = EventLog(where, redactor=self.redactor)
        self.records = RecordStore(where, redactor=self.redactor)
        if isinstance(where, RedisBackend):
            self.events.share(where, where.on_remote)

    async def acquire(self, request_id: str) -> bool:
        """Take the run's lease for this server; False when another server holds it.

        Once taken, the run's stream is appended to from where the store says it ends: another
        server may have written it since this one last did.
        """
        if not await self.leases.acquire(request_id):
            return False
        if self.leases.shared:
            self.events.forget(request_id)
        return True

    async def start(self) -> None:
        """Check a store across the network before use (a local one needs nothing)."""
        if isinstance(self.backend, RedisBackend):
            await self.backend.start()

    @classmethod
    def in_memory(cls, data: MemoryData | None = None) -> Store:
        """A store kept in this process; on the ``data`` of an earlier one, that one restarted."""
        return cls(MemoryBackend(data))

    @property
    def db(self) -> Database:
        """The database of a SQLite store (for the doctor and fault tests; the runtime never)."""
        if not isinstance(self.backend, SqliteBackend):
            raise AttributeError(f"a {type(self.backend).__name__} store has no SQLite database")
        return self.backend.db

    @property
    def unavailable(self) -> str | None:
        """Why writes fail, while they do."""
        return self.backend.unavailable

    async def writable(self) -> None:
        """Until writes work."""
        await self.backend.writable()

    def commit(self) -> None:
        """Write what is pending now, if writes work."""
        self.backend.commit()

    def close(self) -> None:
        """Write what is pending and close the backend."""
        self.backend.close()


__all__ = [
    "AttachmentRecord",
    "Backend",
    "Database",
    "Entry",
    "EventLog",
    "EventRow",
    "LeaseLost",
    "Leases",
    "MemoryBackend",
    "MemoryData",
    "Push",
    "RecordStore",
    "RedisBackend",
    "RunRecord",
    "RunStatus",
    "SessionRecord",
    "SqliteBackend",
    "StorageDamaged",
    "StorageError",
    "StorageUnavailable",
    "Store",
    "StoredEvent",
    "finish_now",
    "is_redis_url",
    "masked_url",
    "new_id",
]
