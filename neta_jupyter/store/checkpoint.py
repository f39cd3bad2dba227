"""The checkpoint thread: copies the write-ahead log into the database file, and survives faults."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading

from .health import Episode, storage_error

_NICENESS = 10
WAL_RESTART_FRAMES = 512
"""A log of this many frames (2 MiB of 4 KiB pages) is copied whole and started again from its
beginning (RESTART)."""
_BUSY_TIMEOUT_MS = 5000
_RESTART_PATIENCE_MS = 50


class Checkpointer(threading.Thread):
    """Copies the write-ahead log into the database file on its own thread and connection.

    SQLite would otherwise do it inside whichever commit crosses its threshold, on the event
    loop's thread: about 40% of the cost of appending a streamed event. A checkpoint that fails
    (a full disk) is tried again after a growing delay until one succeeds; the failure and the
    recovery are logged once each. After a spell of failures the log is also truncated, since
    it grew while it could not be copied, and that is space a full disk needs back.
    """

    def __init__(self, path: str, log: logging.Logger) -> None:
        super().__init__(name="neta-sqlite-checkpoint", daemon=True)
        self._path = path
        self._log = log
        self._wake = threading.Event()
        self._stopping = False
        self._truncate = False
        self._episode = Episode()
        self.checkpoints = 0
        """Checkpoints that succeeded (tests watch it)."""

    def run(self) -> None:
        """Wait for requests (or, while failing, the retry delay) and checkpoint."""
        with contextlib.suppress(OSError, AttributeError):  # not on every platform
            # Background work: when cores are scarce, the event loop's thread goes first.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICENESS)
        conn: sqlite3.Connection | None = None
        try:
            while True:
                # While checkpoints fail, or a truncation waits for a moment when the whole log
                # is copied, try again after a delay even if nobody asks.
                waiting = self._episode.reason is not None or self._truncate
                self._wake.wait(self._episode.delay if waiting else None)
                self._wake.clear()
                if self._stopping:
                    return
                try:
                    if conn is None:
                        conn = sqlite3.connect(
                            self._path, isolation_level=None, check_same_thread=False
                        )
                        conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
                    self._checkpoint(conn)
                except sqlite3.Error as exc:
                    self._failed(exc)
                    continue
                self._succeeded()
        finally:
            if conn is not None:
                conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        # PASSIVE never blocks the writer; what it cannot copy now, a later one will.
        busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if self._truncate and not busy and frames == copied:
            # Everything is copied: truncating now holds writers back only for a moment.
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            self._truncate = bool(busy)
        elif frames >= WAL_RESTART_FRAMES:
            # While a run streamed without a pause, PASSIVE checkpoints copied the whole log time
            # after time, yet SQLite never started it again from its beginning: it grew by 30 MB
            # in 16 s (on a small disk, until the disk was full). RESTART makes it start again,
            # holding the event loop's writer back for a few milliseconds, never long.
            # Counted in frames since the log last started, not by the file's size, which stays
            # at its largest: by size, every checkpoint after the first large log would restart.
            conn.execute(f"PRAGMA busy_timeout={_RESTART_PATIENCE_MS}")
            try:
                conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            finally:
                conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")

    def _failed(self, exc: sqlite3.Error) -> None:
        fault = storage_error(exc)
        reason = fault.reason if fault is not None else str(exc)
        if self._episode.failed(reason):
            self._log.error(
                "neta: the checkpoint of %s failed (%s); it is tried again until it succeeds",
                self._path,
                reason,
            )

    def _succeeded(self) -> None:
        self.checkpoints += 1
        lasted = self._episode.recovered()
        if lasted is not None:
            self._log.info("neta: checkpoints of %s succeed again after %.1f s", self._path, lasted)
            self._truncate = True
            self._wake.set()  # truncate at once rather than at the next request

    def request(self, *, truncate: bool = False) -> None:
        """Checkpoint soon; with ``truncate``, also give the log's disk space back."""
        self._truncate = self._truncate or truncate
        self._wake.set()

    def stop(self) -> None:
        """Finish and join."""
        self._stopping = True
        self._wake.set()
        self.join()
