"""Durable storage: the event log and the records of runs, sessions and attachments."""

from __future__ import annotations

import logging
from pathlib import Path

from ..events.redact import Redactor
from .db import Database, EventRow
from .eventlog import EventLog, SqliteEventLog, StoredEvent
from .health import StorageDamaged, StorageError, StorageUnavailable
from .records import (
    AttachmentRecord,
    Entry,
    RecordStore,
    RunRecord,
    RunStatus,
    SessionRecord,
    new_id,
)


class Store:
    """The event log and the record store over one SQLite database."""

    def __init__(
        self,
        path: str | Path,
        *,
        commit_interval: float = 0.002,
        logger: logging.Logger | None = None,
    ) -> None:
        self.db = Database(path, commit_interval=commit_interval, logger=logger)
        self.events = SqliteEventLog(self.db)
        self.redactor: Redactor = self.events.redactor
        """Shared by the event log, the records and attachments: secrets registered once."""
        self.records = RecordStore(self.db, redactor=self.redactor)

    def close(self) -> None:
        """Commit what is pending and close the database."""
        self.db.close()


__all__ = [
    "AttachmentRecord",
    "Database",
    "Entry",
    "EventLog",
    "EventRow",
    "RecordStore",
    "RunRecord",
    "RunStatus",
    "SessionRecord",
    "SqliteEventLog",
    "StorageDamaged",
    "StorageError",
    "StorageUnavailable",
    "Store",
    "StoredEvent",
    "new_id",
]
