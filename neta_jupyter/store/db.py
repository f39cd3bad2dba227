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
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .backlog import Backlog
from .checkpoint import Checkpointer
from .contract import EventRow, HealthListener
from .health import (
    Episode,
    StorageDamaged,
    StorageError,
    StorageUnavailable,
    file_problems,
    recovery_steps,
    storage_error,
)
from .journal import MANY_STREAMS, Journal, settle_left
from .schema import EVENTS_TABLE, SCHEMA, migrate
from .schema import SEQ_BITS as SEQ_BITS

_COMMIT_SHARE = 0.1
"""Share of the time group commits may take before events wait to share one."""
_COMMIT_BURST = 0.001
"""Seconds of commit time that may be spent at once after a quiet spell."""

_SPACING = 0.005
"""Seconds from one group commit that held many streams (many runs streaming at once) to the
next: at a model's pace each commit would hold a token of a few runs and make a write to each of
their followers, waking the clients for each; spaced, one commit and one burst of writes serve
many (B11: 62 -> 48 µs of the server's CPU per token at 200 runs)."""
_SETTLE_AFTER = 2.0
"""Seconds from a commit that leaves events in the journal to the commit that settles them all."""
_CHECKPOINT_EVERY = 4096
"""Events (a commit counts as 8) after which the WAL is copied into the database file."""


CommitListener = Callable[[int, list[EventRow]], None]
"""Told, per stream, the key base and the events a commit made durable."""
Statements = list[tuple[str, tuple[object, ...]]]


class Database:
    """The connection, the pending event batch and the group-commit timer.

    A write that fails for a reason that passes (a full disk) loses nothing: the pending events
    and writes stay in memory and are tried again after a growing delay until they are written.
    The spell is logged when it begins and when it ends, and health listeners are told, so
    followers can say why the stream is quiet.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        commit_interval: float = 0.002,
        max_batch: int = 2048,
        logger: logging.Logger | None = None,
    ) -> None:
        self.path = str(path)
        self.log = logger or logging.getLogger("neta_jupyter")
        self.conn = self._open()
        self.journal = Journal()
        """Recent events of many streams kept in commit order (``journal.py``)."""
        self._settle = False
        self._settle_timer: asyncio.TimerHandle | None = None
        self._last_streams = 0
        self._last_at = 0.0
        self._checkpointer: Checkpointer | None = None
        self._since_checkpoint = 0
        if self.path != ":memory:":
            self.conn.execute("PRAGMA wal_autocheckpoint=0")
            self._checkpointer = Checkpointer(self.path, self.log)
            self._checkpointer.start()
        self.commit_interval = commit_interval
        self.max_batch = max_batch
        self._pending: dict[int, list[EventRow]] = {}
        self._pending_count = 0
        self._backlog = Backlog()
        self._pending_writes: Statements = []
        self._waiters: list[asyncio.Future[None]] = []
        self._timer: asyncio.Handle | None = None
        self._listeners: list[CommitListener] = []
        self._health_listeners: list[HealthListener] = []
        self._episode = Episode()
        self._fault: StorageError | None = None
        self._writable: list[asyncio.Future[None]] = []
        self._damage_logged = False
        self._commit_cost = 0.0
        self._budget = _COMMIT_BURST
        self._budget_at = time.monotonic()
        self._closed = False

    def _open(self) -> sqlite3.Connection:
        """Connect, bring the layout up to date and check the file; a clear StorageError if not."""
        if self.path != ":memory:":
            file = Path(self.path)
            problems = file_problems(file)
            if problems:
                raise StorageDamaged(problems[0])
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageUnavailable(f"cannot make the folder {file.parent}: {exc}") from exc
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StorageUnavailable(f"cannot open {self.path}: {exc}") from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit survives a process crash (kill -9); only an OS crash
            # or power loss can drop the last group, and then the whole group, never a prefix gap.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=5000")
            # Every page is read once per start: a damaged file is reported now, in plain words,
            # not as a replay that stops in the middle of a run.
            found = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if found != "ok":
                raise StorageDamaged(f"{self.path} is damaged: {found}")
            conn.executescript(SCHEMA)
            migrate(conn)
            conn.executescript(EVENTS_TABLE)
            settle_left(conn)
        except StorageError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            fault = storage_error(exc)
            if isinstance(fault, StorageDamaged):
                raise StorageDamaged(f"{self.path} is damaged: {exc}") from exc
            raise fault or StorageDamaged(f"{self.path} cannot be used: {exc}") from exc
        return conn

    def on_commit(self, listener: CommitListener) -> None:
        """Call ``listener`` with the event rows each commit made durable."""
        self._listeners.append(listener)

    def on_health(self, listener: HealthListener) -> None:
        """Call ``listener`` when writes start failing (with why) and when they work again."""
        self._health_listeners.append(listener)

    @property
    def unavailable(self) -> str | None:
        """Why writes fail, while they do."""
        return self._fault.reason if self._fault is not None else None

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
        if self._fault is not None:
            return  # the retry timer writes them
        if self._pending_count >= self.max_batch:
            self.commit()
        elif self._timer is None:
            self._start_timer()

    def queue_write(self, sql: str, params: tuple[object, ...]) -> None:
        """A write that becomes durable with the next group commit, before its events."""
        self._pending_writes.append((sql, params))
        if self._timer is None and self._fault is None:
            self._start_timer()

    def _start_timer(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.commit()  # no loop to wait on: be durable now
            return
        self._timer = self._schedule_commit(loop)

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
        since = now - self._last_at
        if self._last_streams >= MANY_STREAMS and since < _SPACING:
            return loop.call_later(_SPACING - since, self.commit)
        if shortfall <= 0:
            return loop.call_soon(self.commit)
        return loop.call_later(min(self.commit_interval, shortfall / _COMMIT_SHARE), self.commit)

    def durable(self) -> asyncio.Future[None]:
        """A future that resolves once everything queued so far is committed."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._pending and not self._pending_writes:
            fut.set_result(None)
        else:
            self._waiters.append(fut)
        return fut

    def room(self) -> asyncio.Future[None] | None:
        """``None`` while few events wait for a commit; else resolves once they are committed.

        A group commit is made on the loop's thread once ``max_batch`` events wait, so that
        many are only exceeded while writes fail.
        """
        return self._backlog.room(self._pending_count)

    def writable(self) -> asyncio.Future[None]:
        """A future that resolves once writes work (at once when they do)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._fault is None:
            fut.set_result(None)
        else:
            self._writable.append(fut)
        return fut

    def execute(self, sql: str, params: tuple[object, ...] = ()) -> None:
        """A write that commits at once, together with any pending events."""
        self._write_now([(sql, params)])

    def execute_or_keep(self, sql: str, params: tuple[object, ...] = ()) -> None:
        """:meth:`execute`, or, when writes fail, kept with the pending events for their commit."""
        try:
            self.execute(sql, params)
        except StorageError:
            self._pending_writes.append((sql, params))

    def atomic(self, statements: Statements) -> None:
        """Several writes that become durable together or not at all."""
        self._write_now(statements)

    def _write_now(self, statements: Statements) -> None:
        """Commit ``statements`` with what is pending, or raise :class:`StorageError`.

        While writes fail it raises at once: trying would write every pending event again only
        to fail.
        """
        if self._fault is None:
            try:
                self._transaction(statements)
            except StorageError as fault:
                self._write_failed(fault)
            else:
                self._finish_commit()
                return
        current = self._fault
        assert current is not None
        message = f"the server cannot save anything now: {current.reason}; try again once it can"
        raise type(current)(message, reason=current.reason)

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        """A read of committed data."""
        try:
            cur = self.conn.execute(sql, params)
            cur.row_factory = sqlite3.Row
            rows: list[sqlite3.Row] = cur.fetchall()
        except sqlite3.Error as exc:
            raise self._read_failed(exc) from exc
        return rows

    def read(self, sql: str, params: tuple[object, ...]) -> list[EventRow]:
        """Event rows, as plain tuples."""
        try:
            rows: list[EventRow] = self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._read_failed(exc) from exc
        return rows

    def _read_failed(self, exc: sqlite3.Error) -> Exception:
        fault = storage_error(exc)
        if fault is None:
            return exc
        if isinstance(fault, StorageDamaged) and not self._damage_logged:
            self._damage_logged = True
            steps = recovery_steps(self.path)
            self.log.error("neta: the store %s is damaged (%s); %s", self.path, exc, steps)
        return fault

    def commit(self) -> None:
        """Write and commit the pending events now (while writes fail: when they work again)."""
        if self._closed:
            return
        if not self._pending and not self._pending_writes and not self._settle:
            self._cancel_timer()
            return
        began = time.monotonic()
        try:
            self._transaction([])
        except StorageError as fault:
            self._write_failed(fault)
            return
        self._finish_commit(began)

    def _transaction(self, statements: Statements) -> None:
        """The pending writes and events, then ``statements``, in one transaction."""
        try:
            with self._committing("BEGIN"):
                self._write_pending()
                for sql, params in statements:
                    self.conn.execute(sql, params)
        except BaseException:
            self.journal.rolled_back()
            raise

    @contextlib.contextmanager
    def _committing(self, begin: str) -> Iterator[None]:
        """A transaction committed after the block; a storage fault as :class:`StorageError`."""
        conn = self.conn
        try:
            conn.execute(begin)
            try:
                yield
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite may have rolled back already (a full disk)
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            fault = storage_error(exc)
            if fault is None:
                raise
            raise fault from exc

    def _write_pending(self) -> None:
        for sql, params in self._pending_writes:
            self.conn.execute(sql, params)
        self.journal.write(self.conn, self._pending, self._settle)

    def _finish_commit(self, began: float | None = None) -> None:
        if began is not None:  # a group commit: what it cost is charged to the budget
            self._commit_cost = time.monotonic() - began
            self._budget = max(-_COMMIT_BURST, self._budget - self._commit_cost)
        self.journal.committed()
        self._last_streams = len(self._pending)
        self._last_at = time.monotonic()
        self._settle = False
        if self.journal.rows and self._settle_timer is None:
            with contextlib.suppress(RuntimeError):  # no loop: the next commit or close settles
                loop = asyncio.get_running_loop()
                self._settle_timer = loop.call_later(_SETTLE_AFTER, self._settle_journal)
        pending, self._pending = self._pending, {}
        count, self._pending_count = self._pending_count, 0
        self._backlog.moved(0)
        self._pending_writes = []
        waiters, self._waiters = self._waiters, []
        self._cancel_timer()
        for base, rows in pending.items():
            for listener in self._listeners:
                listener(base, rows)
        if self._fault is not None:
            self._recovered()
        if self._checkpointer is not None:
            self._since_checkpoint += count + 8
            if self._since_checkpoint >= _CHECKPOINT_EVERY:
                self._since_checkpoint = 0
                self._checkpointer.request()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def _settle_journal(self) -> None:
        """Everything in the journal goes to ``events`` with the next commit, made now."""
        self._settle_timer = None
        if self.journal.rows:
            self._settle = True
            self.commit()

    # --- a spell of failed writes

    def _write_failed(self, fault: StorageError) -> None:
        self._fault = fault
        if self._episode.failed(fault.reason):
            steps = ""
            if isinstance(fault, StorageDamaged):
                steps = "; " + recovery_steps(self.path)
            self.log.error(
                "neta: cannot write the store %s: %s. %d event(s) are kept in memory until "
                "they can be saved; new runs are refused meanwhile%s",
                self.path,
                fault.reason,
                self._pending_count,
                steps,
            )
            for listener in self._health_listeners:
                listener(fault.reason)
            if self._checkpointer is not None:
                # A log copied to its end is reused from its start, which needs no more disk.
                self._checkpointer.request()
        self._cancel_timer()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to wait on: the next write tries again
        self._timer = loop.call_later(self._episode.delay, self._retry)

    def _retry(self) -> None:
        self._timer = None
        if self._closed:
            return
        try:
            # A small real write first: cheaper than writing every pending event to find out.
            self._probe()
        except StorageError as fault:
            self._write_failed(fault)
            return
        if self._pending or self._pending_writes:
            self.commit()
        else:
            self._recovered()

    def _probe(self) -> None:
        """A small real write (the header's user version, rewritten as it is)."""
        with self._committing("BEGIN IMMEDIATE"):
            version = int(self.conn.execute("PRAGMA user_version").fetchone()[0])
            self.conn.execute(f"PRAGMA user_version = {version}")

    def _recovered(self) -> None:
        self._fault = None
        lasted = self._episode.recovered()
        if lasted is not None:
            self.log.info("neta: the store %s can be written again after %.1f s", self.path, lasted)
            for listener in self._health_listeners:
                listener(None)
            if self._checkpointer is not None:
                self._checkpointer.request(truncate=True)
        writable, self._writable = self._writable, []
        for fut in writable:
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
        self._settle = True  # the file holds every event in ``events`` once closed
        self.commit()
        self._closed = True
        self._cancel_timer()
        if self._settle_timer is not None:
            self._settle_timer.cancel()
        if self._pending or self._pending_writes:
            self.log.error(
                "neta: %d event(s) could not be written before the store %s closed (%s); the "
                "runs they belong to end as interrupted when the server starts again",
                self._pending_count,
                self.path,
                self.unavailable,
            )
        self._backlog.stop()
        for fut in self._waiters + self._writable:
            fut.cancel()
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self.conn.close()
