"""Durable storage: the event log and the records of runs, sessions and attachments."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..events.redact import Redactor
from .contract import Backend, EventRow, finish_now
from .db import Database
from .eventlog import EventLog, StoredEvent
from .fanout import Push
from .health import LeaseLost, MissingPackage, StorageDamaged, StorageError, StorageUnavailable
from .leases import Leases, LocalLeases
from .memory import MemoryBackend, MemoryData
from .record_store import RecordStore
from .records import (
    AttachmentRecord,
    Entry,
    RunRecord,
    RunStatus,
    SessionRecord,
    new_id,
)
from .redis_url import is_redis_url, masked_url, url_password
from .sqlite import SqliteBackend

if TYPE_CHECKING:
    from .redis_backend import RedisBackend


def __getattr__(name: str) -> Any:
    # The Redis backend is imported when first asked for: the redis package is an extra.
    if name == "RedisBackend":
        return _redis_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _redis_class() -> type[RedisBackend]:
    """The Redis backend's class, or a :class:`MissingPackage` saying what to install."""
    from ..extras import REDIS

    try:
        from .redis_backend import RedisBackend
    except ImportError as exc:
        module = (exc.name or "redis").split(".")[0]
        raise MissingPackage(REDIS.needed_for("The Redis store (store_url)", module)) from exc
    return RedisBackend


def redis_of(backend: object) -> RedisBackend | None:
    """``backend`` when it is a Redis backend (never importing redis to find out)."""
    module = sys.modules.get(f"{__name__}.redis_backend")
    if module is not None and isinstance(backend, module.RedisBackend):
        return cast("RedisBackend", backend)
    return None


class Store:
    """The event log and the record store over one backend: a SQLite file unless given one."""

    def __init__(
        self,
        where: str | Path | Backend,
        *,
        commit_interval: float = 0.002,
        lease_ttl: float = 15.0,
        event_retention: float = 0,
        store_user: str | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        """Open the store at ``where``.

        ``event_retention``: seconds a finished run's events are kept (0: forever);
        ``store_user``: with Redis, the one user whose runs (and keys) this store keeps.
        """
        secret = None
        if isinstance(where, str) and is_redis_url(where):
            secret = url_password(where)
            where = _redis_class()(
                where,
                commit_interval=commit_interval,
                lease_ttl=lease_ttl,
                event_retention=event_retention,
                user=store_user,
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
        redis = redis_of(where)
        self.leases: Leases = redis if redis is not None else LocalLeases()
        """Who may write which run: this server alone, unless the store is shared."""
        self.redactor = Redactor()
        """Shared by the event log, the records and attachments: secrets registered once."""
        self.secrets: tuple[str, ...] = (secret,) if secret else ()
        """The store's own credentials (a Redis password): the runtime redacts them by value."""
        self.events = EventLog(where, redactor=self.redactor)
        self.records = RecordStore(where, redactor=self.redactor)
        if redis is not None:
            self.events.share(redis, redis.on_remote)

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
        redis = redis_of(self.backend)
        if redis is not None:
            await redis.start()

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
    "MissingPackage",
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
    "redis_of",
]
