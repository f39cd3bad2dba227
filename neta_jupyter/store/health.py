"""Storage faults in plain words: what the API reports, and one log line per episode of them.

Exceptions (who raises → who catches)::

    StorageError            raised by the store; server/ answers 503 with its code and message
    ├── StorageUnavailable  a write failed for a reason that passes (disk full, I/O error, locked)
    ├── MissingPackage      the configured store needs a package that is not installed (redis)
    └── StorageDamaged      the database file is damaged (``neta-jupyter doctor`` checks, salvages)
    LeaseLost               raised by a shared store: another server took the run over; the
                            activation that wrote it stops without writing (runtime/activations)
"""

from __future__ import annotations

import sqlite3
import struct
import time
from pathlib import Path

SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_SIZE = 100

FIRST_RETRY = 0.05
"""Seconds before a failed write (or checkpoint) is tried again; doubled per failure."""
LAST_RETRY = 2.0
"""The longest wait between tries."""


class StorageError(Exception):
    """The store cannot do what was asked; ``code`` is the API's ``errCode``."""

    status = 503
    code = "STORAGE_UNAVAILABLE"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        """What the API answers."""
        self.reason = reason or message
        """Why, in a few words (the disk is full)."""


class LeaseLost(Exception):
    """Another server holds the run now: this one must write nothing more of it."""


class StorageUnavailable(StorageError):
    """Writes fail for now; what is pending is kept in memory and written when they work again."""

    code = "STORAGE_UNAVAILABLE"


class MissingPackage(StorageError):
    """The configured store needs a package that is not installed (the message says which)."""

    code = "DEPENDENCY_MISSING"


class StorageDamaged(StorageError):
    """The database file is damaged: reads or writes of it fail until it is salvaged."""

    code = "STORAGE_DAMAGED"


_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_PASSING = (
    "SQLITE_FULL",
    "SQLITE_IOERR",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_READONLY",
    "SQLITE_CANTOPEN",
    "SQLITE_NOMEM",
    "SQLITE_PROTOCOL",
)


def storage_error(exc: sqlite3.Error) -> StorageError | None:
    """The storage fault ``exc`` stands for; None when the statement itself was wrong."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    if name.startswith(_DAMAGED):
        return StorageDamaged(f"the database file is damaged ({exc})")
    if not name.startswith(_PASSING):
        return None
    if name == "SQLITE_FULL":
        return StorageUnavailable("the disk is full")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StorageUnavailable("the database is locked by another process")
    if name.startswith("SQLITE_READONLY"):
        return StorageUnavailable("the database file cannot be written (it is read-only)")
    return StorageUnavailable(f"the disk reported an error ({exc})")


DB_NAME = "neta.sqlite3"
"""The database file's name in a data dir."""


def doctor_target(db_path: str | Path) -> str:
    """The ``neta-jupyter doctor`` option that names this database file."""
    path = Path(db_path)
    return f"--data-dir {path.parent}" if path.name == DB_NAME else f"--db {path}"


def recovery_steps(db_path: str | Path) -> str:
    """What to do about a damaged database file, naming the ``doctor`` command that fits it."""
    where = doctor_target(db_path)
    return (
        f"stop the Jupyter server, run `neta-jupyter doctor {where}` to see what is wrong and "
        f"`neta-jupyter doctor --salvage {where}` to move the damaged file aside and rebuild "
        "the store from what can still be read, then start the server again"
    )


def file_problems(path: Path) -> list[str]:
    """What is wrong with the database file itself (its kind, size and header), in plain words.

    Cheap: reads the first 100 bytes. An empty list says nothing about the pages after them.
    """
    if not path.exists():
        return []
    if path.is_dir():
        return [f"{path} is a folder, not a database file"]
    if not path.is_file():
        return [f"{path} is not a regular file"]
    size = path.stat().st_size
    if size == 0:
        return []  # SQLite makes a fresh database in an empty file
    with path.open("rb") as file:
        header = file.read(HEADER_SIZE)
    if len(header) < HEADER_SIZE:
        return [f"{path} is cut short: {size} bytes, less than a database header"]
    if not header.startswith(SQLITE_MAGIC):
        return [f"{path} is not a SQLite database: its header is damaged or overwritten"]
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return [f"{path} has a damaged header (page size {page_size})"]
    pages, counter, valid_for = struct.unpack(">I", header[28:32])[0], header[24:28], header[92:96]
    wal = path.with_name(path.name + "-wal")
    # With a write-ahead log, the newest pages (and a size the header already counts, when a
    # checkpoint ran out of disk) may still be in the log.
    logged = wal.is_file() and wal.stat().st_size > 0
    if counter == valid_for and pages and size < pages * page_size and not logged:
        return [
            f"{path} is cut short: {size} bytes where its header says "
            f"{pages * page_size} (the file was truncated)"
        ]
    return []


class Episode:
    """A spell of failures of one kind of work, told apart from its single failures.

    The caller logs when :meth:`failed` says a spell began and when :meth:`recovered` says it
    ended, so a full disk costs two log lines, not one per event.
    """

    def __init__(self) -> None:
        self.reason: str | None = None
        """Why the work fails, while it does."""
        self.since = 0.0
        self.failures = 0
        self.delay = FIRST_RETRY

    def failed(self, reason: str) -> bool:
        """Count a failure; whether it starts a spell."""
        self.failures += 1
        started = self.reason is None
        if started:
            self.since = time.monotonic()
            self.delay = FIRST_RETRY
        else:
            self.delay = min(self.delay * 2, LAST_RETRY)
        self.reason = reason
        return started

    def recovered(self) -> float | None:
        """End the spell; how long it lasted (None when there was none)."""
        if self.reason is None:
            return None
        self.reason = None
        self.failures = 0
        self.delay = FIRST_RETRY
        return time.monotonic() - self.since
