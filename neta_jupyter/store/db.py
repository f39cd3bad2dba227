"""One SQLite connection in WAL mode, shared by the event log and the record store.

Writes are grouped: events wait in memory for a short interval (or until enough pile up) and are
committed together. While commits take only a small share of the time, a batch commits on the
next turn of the event loop, so a trickle of tokens is not held back for the window. A record
write commits at once and takes pending events with it. Listeners are told what became durable
only after the commit, so no transport can send an event the store could lose.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from itertools import chain
from pathlib import Path

_EVENTS_TABLE = """
CREATE TABLE IF NOT EXISTS events (
    key INTEGER PRIMARY KEY,
    event_type TEXT NOT NULL,
    payload TEXT NOT NULL
);
"""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS event_streams (
    stream INTEGER PRIMARY KEY,
    request_id TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS runs (
    request_id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,
    model TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    imported INTEGER NOT NULL DEFAULT 0,
    prompt TEXT NOT NULL DEFAULT '',
    options TEXT NOT NULL DEFAULT '{}',
    state TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS runs_by_principal ON runs (principal, created);
CREATE INDEX IF NOT EXISTS runs_by_session ON runs (session_id, created);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    name TEXT NOT NULL,
    created REAL NOT NULL,
    leaf_entry_id TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    has_unknown_usage INTEGER NOT NULL DEFAULT 0,
    always_allow TEXT NOT NULL DEFAULT '[]',
    todo TEXT NOT NULL DEFAULT '[]',
    thinking_level TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS sessions_by_name ON sessions (principal, name);
CREATE TABLE IF NOT EXISTS entries (
    entry_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    parent_id TEXT,
    role TEXT NOT NULL,
    message TEXT NOT NULL,
    request_id TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_session ON entries (session_id, created);
CREATE TABLE IF NOT EXISTS inputs (
    input_id TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    content TEXT NOT NULL,
    created REAL NOT NULL,
    consumed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS attachments (
    attachment_id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    virtual_path TEXT NOT NULL UNIQUE,
    file_name TEXT NOT NULL,
    content_type TEXT NOT NULL,
    file_size INTEGER NOT NULL,
    disk_path TEXT NOT NULL,
    created REAL NOT NULL
);
"""

_COMMIT_SHARE = 0.1
"""Share of the time group commits may take before events wait to share one."""
_COMMIT_BURST = 0.001
"""Seconds of commit time that may be spent at once after a quiet spell."""

SEQ_BITS = 32
"""An event's ``key`` is ``stream << SEQ_BITS | seq``: the run's stream number and its seq packed
into the table's integer primary key. Appends then extend one B-tree at its end and a replay is
a range of it, about half the cost of a (request_id, seq) key."""

_CHECKPOINT_NICENESS = 10
_CHECKPOINT_EVERY = 4096
"""Events (a commit counts as 8) after which the WAL is copied into the database file."""


EventRow = tuple[int, str, str]
"""``(seq, event_type, payload)``: a plain tuple, made once when the event is appended. The group
commit writes it, the live tail keeps it and every follower sends that same object; the garbage
collector stops tracking tuples of strings and numbers (not named tuples), so thousands of
recent events cost it nothing."""


_ROWS_PER_INSERT = 256


@functools.cache
def _insert(rows: int) -> str:
    """An INSERT of ``rows`` events of one stream (``?1`` is the stream's key base).

    SQLite inserts many rows of one statement in one step: about 40% less per event than a
    statement per event (``executemany``).
    """
    return "INSERT INTO events (key, event_type, payload) VALUES " + ",".join(
        ["(?1 + ?, ?, ?)"] * rows
    )


CommitListener = Callable[[int, list[EventRow]], None]
"""Told, per stream, the key base and the events a commit made durable."""


class _Checkpointer(threading.Thread):
    """Copies the write-ahead log into the database file on its own thread and connection.

    SQLite would otherwise do it inside whichever commit crosses its threshold, on the event
    loop's thread: about 40% of the cost of appending a streamed event.
    """

    def __init__(self, path: str) -> None:
        super().__init__(name="neta-sqlite-checkpoint", daemon=True)
        self._path = path
        self._wake = threading.Event()
        self._stopping = False

    def run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # not on every platform
            # Background work: when cores are scarce, the event loop's thread goes first.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _CHECKPOINT_NICENESS)
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=5000")
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                # PASSIVE never blocks the writer; what it cannot copy now, a later one will.
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            conn.close()

    def request(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self.join()


class Database:
    """The connection, the pending event batch and the group-commit timer."""

    def __init__(
        self,
        path: str | Path,
        *,
        commit_interval: float = 0.002,
        max_batch: int = 2048,
    ) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a commit survives a process crash (kill -9); only an OS crash or
        # power loss can drop the last group, and then the whole group, never a prefix gap.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=5000")
        self.conn.executescript(_SCHEMA)
        self._migrate()
        self.conn.executescript(_EVENTS_TABLE)
        self._checkpointer: _Checkpointer | None = None
        self._since_checkpoint = 0
        if self.path != ":memory:":
            self.conn.execute("PRAGMA wal_autocheckpoint=0")
            self._checkpointer = _Checkpointer(self.path)
            self._checkpointer.start()
        self.commit_interval = commit_interval
        self.max_batch = max_batch
        self._pending: dict[int, list[EventRow]] = {}
        self._pending_count = 0
        self._pending_writes: list[tuple[str, tuple[object, ...]]] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._timer: asyncio.Handle | None = None
        self._listeners: list[CommitListener] = []
        self._commit_cost = 0.0
        self._budget = _COMMIT_BURST
        self._budget_at = time.monotonic()
        self._closed = False

    def _migrate(self) -> None:
        """Bring a database an earlier version created to this version's layout."""
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(sessions)")}
        if "todo" not in columns:
            self.conn.execute("ALTER TABLE sessions ADD COLUMN todo TEXT NOT NULL DEFAULT '[]'")
        if "thinking_level" not in columns:
            self.conn.execute("ALTER TABLE sessions ADD COLUMN thinking_level TEXT")
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(events)")}
        if "request_id" in columns:  # events keyed by (request_id, seq)
            self.conn.executescript(
                f"""
                BEGIN;
                ALTER TABLE events RENAME TO events_by_request;
                {_EVENTS_TABLE}
                INSERT INTO event_streams (request_id)
                    SELECT DISTINCT request_id FROM events_by_request ORDER BY request_id;
                INSERT INTO events (key, event_type, payload)
                    SELECT (s.stream << {SEQ_BITS}) | e.seq, e.event_type, e.payload
                    FROM events_by_request e JOIN event_streams s USING (request_id);
                DROP TABLE events_by_request;
                COMMIT;
                """
            )

    def on_commit(self, listener: CommitListener) -> None:
        """Call ``listener`` with the event rows each commit made durable."""
        self._listeners.append(listener)

    def queue_events(self, base: int, events: list[EventRow]) -> None:
        """Hold events of the stream whose seq 0 has key ``base`` for the next group commit."""
        if self._closed:
            raise RuntimeError("the store is closed")
        rows = self._pending.get(base)
        if rows is None:
            self._pending[base] = events
        else:
            rows += events
        self._pending_count += len(events)
        if self._pending_count >= self.max_batch:
            self.commit()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.commit()  # no loop to wait on: be durable now
                return
            self._timer = self._schedule_commit(loop)

    def queue_write(self, sql: str, params: tuple[object, ...]) -> None:
        """A write that becomes durable with the next group commit, before its events."""
        self._pending_writes.append((sql, params))

    def _schedule_commit(self, loop: asyncio.AbstractEventLoop) -> asyncio.Handle:
        """Commit when the current callback returns if the commit budget allows, else later.

        Commits may take ``_COMMIT_SHARE`` of the time (with a small burst): a trickle of tokens
        is committed, and so sent, at once; under load events wait (at most one window) and
        share a commit.
        """
        now = time.monotonic()
        self._budget = min(_COMMIT_BURST, self._budget + (now - self._budget_at) * _COMMIT_SHARE)
        self._budget_at = now
        shortfall = self._commit_cost - self._budget
        if shortfall <= 0:
            return loop.call_soon(self.commit)
        return loop.call_later(min(self.commit_interval, shortfall / _COMMIT_SHARE), self.commit)

    def durable(self) -> asyncio.Future[None]:
        """A future that resolves once everything queued so far is committed."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._pending:
            fut.set_result(None)
        else:
            self._waiters.append(fut)
        return fut

    def execute(self, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor:
        """A write that commits at once, together with any pending events."""
        self.conn.execute("BEGIN")
        try:
            self._write_pending()
            cur = self.conn.execute(sql, params)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self._finish_commit()
        return cur

    def atomic(self, statements: list[tuple[str, tuple[object, ...]]]) -> None:
        """Several writes that become durable together or not at all."""
        self.conn.execute("BEGIN")
        try:
            self._write_pending()
            for sql, params in statements:
                self.conn.execute(sql, params)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self._finish_commit()

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        """A read of committed data."""
        cur = self.conn.execute(sql, params)
        cur.row_factory = sqlite3.Row
        return cur.fetchall()

    def commit(self) -> None:
        """Write and commit the pending events now."""
        if self._closed:
            return
        if not self._pending:
            self._cancel_timer()
            return
        began = time.monotonic()
        self.conn.execute("BEGIN")
        try:
            self._write_pending()
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self._finish_commit(began)

    def _write_pending(self) -> None:
        if self._pending_writes:
            for sql, params in self._pending_writes:
                self.conn.execute(sql, params)
            self._pending_writes = []
        for base, rows in self._pending.items():
            start = 0
            while start < len(rows):
                # Sizes are powers of two, so only a handful of statements are ever prepared.
                size = min(_ROWS_PER_INSERT, 1 << ((len(rows) - start).bit_length() - 1))
                values = [base, *chain.from_iterable(rows[start : start + size])]
                self.conn.execute(_insert(size), values)
                start += size

    def _finish_commit(self, began: float | None = None) -> None:
        self.conn.execute("COMMIT")
        if began is not None:  # a group commit: what it cost is charged to the budget
            self._commit_cost = time.monotonic() - began
            self._budget = max(-_COMMIT_BURST, self._budget - self._commit_cost)
        pending, self._pending = self._pending, {}
        count, self._pending_count = self._pending_count, 0
        waiters, self._waiters = self._waiters, []
        self._cancel_timer()
        for base, rows in pending.items():
            for listener in self._listeners:
                listener(base, rows)
        if self._checkpointer is not None:
            self._since_checkpoint += count + 8
            if self._since_checkpoint >= _CHECKPOINT_EVERY:
                self._since_checkpoint = 0
                self._checkpointer.request()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        """Commit what is pending and close."""
        if self._closed:
            return
        self.commit()
        self._closed = True
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self.conn.close()
