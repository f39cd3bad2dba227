"""Durable storage: the event log and the records of runs, sessions and attachments."""

from __future__ import annotations

import logging
from pathlib import Path

from ..events.redact import Redactor
from .contract import EventRow
from .db import Database
from .eventlog import EventLog, StoredEvent
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
from .sqlite import SqliteEvents


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
        self.redactor = Redactor()
        """Shared by the event log, the records and attachments: secrets registered once."""
        self.events = EventLog(SqliteEvents(self.db), redactor=self.redactor)
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
    "StorageDamaged",
    "StorageError",
    "StorageUnavailable",
    "Store",
    "StoredEvent",
    "new_id",
]
