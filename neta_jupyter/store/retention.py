"""How long a finished run's events are kept, and the SQLite sweep that deletes them after.

A live run's stream is never cut: a follower must get exactly the events after its position.
Once a run has finished (completed or failed), its events are kept for the retention, then
deleted; the run's record, its session tree and its attachments stay. A stream request for such
a run is answered ``410 EVENTS_EXPIRED`` (the transcript saved with the notebook remains). A
crew's log, a stream of no run, is kept the retention after the crew ended, then deleted the same
way; its stream then answers 410 too.
Redis expires a finished run's stream by itself (the append script sets its time to live); SQLite
has this sweep, on a thread of its own at a low priority, like the checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time

from .health import Episode
from .schema import SEQ_BITS

DEFAULT_RETENTION = 7 * 24 * 3600.0
"""Seconds a finished run's events are kept unless configured otherwise: a week."""
FINISHED = ("completed", "failed")
"""Statuses after which nothing more is written unless the run is retried."""
_NICENESS = 10
_LONGEST_PAUSE = 3600.0
_ROWS_PER_DELETE = 1000
"""Rows deleted per transaction. The server's own commits wait while one holds the write lock:
measured here, 12 ms for 2,000 rows and 92 ms for 20,000, so about 6 ms at most."""
_BETWEEN_DELETES = 0.02
"""Seconds between two of them, for the server's commits to go first."""

_EXPIRED = f"""
SELECT s.stream FROM runs r JOIN event_streams s ON s.request_id = r.request_id
WHERE r.status IN {FINISHED} AND r.updated < ?1
  AND EXISTS (SELECT 1 FROM events e
              WHERE e.key >= s.stream << {SEQ_BITS} AND e.key < (s.stream + 1) << {SEQ_BITS})
UNION
SELECT d.stream FROM ended_streams d
WHERE d.ended < ?1
  AND EXISTS (SELECT 1 FROM events e
              WHERE e.key >= d.stream << {SEQ_BITS} AND e.key < (d.stream + 1) << {SEQ_BITS})
"""
"""Streams to empty: finished runs' and ended crews' (``ended_streams``) past the retention."""
# The condition is checked again inside each delete: a run retried since the query stays whole.
_STILL_EXPIRED = f"""
    (EXISTS (SELECT 1 FROM runs r JOIN event_streams s ON s.request_id = r.request_id
             WHERE s.stream = ?1 AND r.status IN {FINISHED} AND r.updated < ?2)
     OR EXISTS (SELECT 1 FROM ended_streams d WHERE d.stream = ?1 AND d.ended < ?2))
"""
_DELETE = f"""
DELETE FROM events WHERE key IN (
  SELECT key FROM events WHERE key >= ?1 << {SEQ_BITS} AND key < (?1 + 1) << {SEQ_BITS}
    AND {_STILL_EXPIRED}
  LIMIT {_ROWS_PER_DELETE})
"""
_DELETE_JOURNALED = f"""
DELETE FROM recent_events WHERE key >= ?1 << {SEQ_BITS} AND key < (?1 + 1) << {SEQ_BITS}
  AND {_STILL_EXPIRED}
"""
"""The stream's copies in the journal (``journal.py``), which a start after a crash would settle
back into ``events``."""


def sweep_pause(retention: float) -> float:
    """Seconds between sweeps: an hour, or a tenth of a shorter retention."""
    return min(_LONGEST_PAUSE, max(retention / 10, 0.05))


class EventSweeper(threading.Thread):
    """Deletes the events of runs that finished longer than ``retention`` seconds ago."""

    def __init__(self, path: str, retention: float, log: logging.Logger) -> None:
        super().__init__(name="neta-sqlite-retention", daemon=True)
        self._path = path
        self.retention = retention
        self._log = log
        self._wake = threading.Event()
        self._stopping = False
        self._episode = Episode()
        self.deleted = 0
        """Events deleted so far (tests watch it)."""

    def run(self) -> None:
        """Sweep now, then every :func:`sweep_pause` seconds until stopped."""
        with contextlib.suppress(OSError, AttributeError):  # not on every platform
            # Background work: when cores are scarce, the event loop's thread goes first.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICENESS)
        conn: sqlite3.Connection | None = None
        try:
            while not self._stopping:
                try:
                    if conn is None:
                        conn = sqlite3.connect(
                            self._path, isolation_level=None, check_same_thread=False
                        )
                        conn.execute("PRAGMA busy_timeout=5000")
                    self.deleted += self.sweep(conn)
                    self._succeeded()
                except sqlite3.Error as exc:
                    self._failed(exc)
                self._wake.wait(sweep_pause(self.retention))
                self._wake.clear()
        finally:
            if conn is not None:
                conn.close()

    def sweep(self, conn: sqlite3.Connection) -> int:
        """Delete what has expired, a run (and a bounded chunk) per transaction; how many."""
        cutoff = time.time() - self.retention
        deleted = 0
        for (stream,) in conn.execute(_EXPIRED, (cutoff,)).fetchall():
            while not self._stopping:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    count = conn.execute(_DELETE, (stream, cutoff)).rowcount
                    if count < _ROWS_PER_DELETE:
                        conn.execute(_DELETE_JOURNALED, (stream, cutoff))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                deleted += count
                if count < _ROWS_PER_DELETE:
                    break
                self._wake.wait(_BETWEEN_DELETES)
        return deleted

    def _failed(self, exc: sqlite3.Error) -> None:
        if self._episode.failed(str(exc)):
            self._log.warning(
                "neta: deleting expired events from %s failed (%s); tried again later",
                self._path,
                exc,
            )

    def _succeeded(self) -> None:
        if self._episode.recovered() is not None:
            self._log.info("neta: deleting expired events from %s works again", self._path)

    def request(self) -> None:
        """Sweep soon."""
        self._wake.set()

    def stop(self) -> None:
        """Finish and join."""
        self._stopping = True
        self._wake.set()
        self.join()
