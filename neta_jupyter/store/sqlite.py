"""The SQLite backend, the embedded default: one file in WAL mode with group commit.

Events live in one table keyed by ``stream << SEQ_BITS | seq``. Each stream (a run's requestId,
a session's id) gets a number the first time it is written, stored with its first events, so
starting a run does not force a commit of its own. A stream's newest events may be in the
journal instead (``journal.py``): reads take them from the journal's memory after the table's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from .contract import DurableListener, EventRow, HealthListener
from .db import Database
from .retention import EventSweeper
from .schema import SEQ_BITS
from .sqlite_records import SqliteRecords


class SqliteEvents:
    """:class:`~neta_jupyter.store.contract.EventBackend` on the shared :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._streams: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._last_stream: int | None = None
        self._listeners: list[DurableListener] = []
        db.on_commit(self._committed)

    def queue(self, stream: str, rows: list[EventRow]) -> None:
        """Hold ``rows`` for the next group commit."""
        number = self._streams.get(stream)
        base = self._base(stream, create=True) if number is None else number << SEQ_BITS
        self._db.queue_events(base, rows)

    def durable(self) -> asyncio.Future[None]:
        """Resolves once everything queued so far is committed."""
        return self._db.durable()

    def retire(self, stream: str) -> None:
        """Noted with the next group commit: the retention sweep deletes its events later."""
        base = self._base(stream, create=True)
        number = base >> SEQ_BITS
        self._db.journal.release(base)
        self._db.queue_write(
            "INSERT OR REPLACE INTO ended_streams (stream, ended) VALUES (?, ?)",
            (number, time.time()),
        )

    def room(self) -> asyncio.Future[None] | None:
        """``None`` unless many events wait to be committed (only while writes fail)."""
        return self._db.room()

    def on_durable(self, listener: DurableListener) -> None:
        """Call ``listener`` with the events each commit made durable."""
        self._listeners.append(listener)

    def on_health(self, listener: HealthListener) -> None:
        """Call ``listener`` when writes start failing and when they work again."""
        self._db.on_health(listener)

    def _committed(self, base: int, rows: list[EventRow]) -> None:
        stream = self._names[base >> SEQ_BITS]
        for listener in self._listeners:
            listener(stream, rows)

    def _base(self, stream: str, *, create: bool = False) -> int:
        """The key of the stream's seq 0; -1 when it has no number yet and ``create`` is false."""
        number = self._streams.get(stream)
        if number is None:
            rows = self._db.query(
                "SELECT stream FROM event_streams WHERE request_id = ?", (stream,)
            )
            if rows:
                number = int(rows[0][0])
            elif create:
                if self._last_stream is None:
                    found = self._db.query("SELECT MAX(stream) FROM event_streams")[0][0]
                    self._last_stream = int(found or 0)
                number = self._last_stream = self._last_stream + 1
                self._db.queue_write(
                    "INSERT INTO event_streams (stream, request_id) VALUES (?, ?)",
                    (number, stream),
                )
            else:
                return -1
            self._streams[stream] = number
            self._names[number] = stream
        return number << SEQ_BITS

    async def last_seq(self, stream: str) -> int:
        """Seq of the stream's last committed event, -1 when it has none."""
        base = self._base(stream)
        if base < 0:
            return -1
        if held := self._db.journal.unsettled(base):
            return held[-1][0]  # the journal holds the stream's newest events
        rows = self._db.query(
            "SELECT MAX(key) FROM events WHERE key >= ? AND key < ?",
            (base, base + (1 << SEQ_BITS)),
        )
        value = rows[0][0]
        return -1 if value is None else int(value) - base

    async def read_after(self, stream: str, after: int, limit: int) -> list[EventRow]:
        """Up to ``limit`` committed events with seq > ``after``, in order."""
        base = self._base(stream)
        if base < 0:
            return []
        rows = self._db.read(
            "SELECT key - ?, event_type, payload FROM events WHERE key > ? AND key < ? "
            "ORDER BY key LIMIT ?",
            (base, base + after, base + (1 << SEQ_BITS), limit),
        )
        held = self._db.journal.unsettled(base)
        if len(rows) < limit and held and held[-1][0] > after:
            # The journal holds the newest events, after everything in the table.
            rows += [row for row in held if row[0] > after][: limit - len(rows)]
        return rows


class SqliteBackend(SqliteEvents, SqliteRecords):
    """:class:`~neta_jupyter.store.contract.Backend`: events and records in one SQLite file."""

    def __init__(
        self,
        path: str | Path,
        *,
        commit_interval: float = 0.002,
        event_retention: float = 0.0,
        logger: logging.Logger | None = None,
    ) -> None:
        self.db = Database(path, commit_interval=commit_interval, logger=logger)
        """The connection (the doctor and fault tests reach it; the runtime never does)."""
        SqliteEvents.__init__(self, self.db)
        SqliteRecords.__init__(self, self.db)
        self.sweeper: EventSweeper | None = None
        """Deletes finished runs' events after ``event_retention`` seconds (0: kept forever)."""
        if event_retention > 0 and self.db.path != ":memory:":
            self.sweeper = EventSweeper(self.db.path, event_retention, self.db.log)
            self.sweeper.start()

    @property
    def unavailable(self) -> str | None:
        """Why writes fail, while they do."""
        return self.db.unavailable

    def writable(self) -> asyncio.Future[None]:
        """Resolves once writes work (at once when they do)."""
        return self.db.writable()

    def commit(self) -> None:
        """Commit what is pending now, if writes work."""
        self.db.commit()

    def close(self) -> None:
        """Commit what is pending and close the database."""
        if self.sweeper is not None:
            self.sweeper.stop()
        self.db.close()
