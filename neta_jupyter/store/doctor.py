"""The store part of ``neta-jupyter doctor``: check the database file, salvage what can be read.

The check reads the file's header, every page (``PRAGMA integrity_check``) and the layout of its
tables, and says what it found in plain words. ``--salvage`` moves the damaged file aside (it is
kept) and builds a fresh database at its place from every row that can still be read.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import sqlite3
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..events import TERMINAL_EVENT_TYPES
from .health import (
    DB_NAME,
    HEADER_SIZE,
    SQLITE_MAGIC,
    StorageDamaged,
    doctor_target,
    file_problems,
    storage_error,
)
from .journal import JOURNAL_TABLE, settle_left
from .schema import EVENTS_TABLE, SCHEMA, SEQ_BITS

TABLES = ("event_streams", "runs", "sessions", "entries", "inputs", "attachments", "events")
"""Every table of the layout, in the order a salvage copies them."""
ADDED_LATER = ("ended_streams", "recent_events")
"""Tables a store made by an earlier version lacks (it gains them when a server opens it):
copied when present, never reported missing."""
_SHOWN_PROBLEMS = 5
_BATCH = 500


@dataclass
class Report:
    """What a check found."""

    path: Path
    problems: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The report in plain words."""
        lines = [f"Store: {self.path}", *(f"  {fact}" for fact in self.facts)]
        if not self.problems:
            lines.append("No problems found.")
            return "\n".join(lines)
        lines.append("Problems:")
        lines += [f"  - {problem}" for problem in self.problems]
        lines += [
            "What to do: stop the Jupyter server, then run",
            f"  neta-jupyter doctor --salvage {doctor_target(self.path)}",
            "to move the damaged file aside (it is kept) and rebuild the store from what can",
            "still be read.",
        ]
        return "\n".join(lines)


def check(path: Path) -> Report:
    """Check the file at ``path`` without changing it."""
    report = Report(path)
    if not path.exists():
        report.facts.append("there is no store yet (the server makes one when it starts)")
        return report
    report.problems += file_problems(path)
    if report.problems:
        return report
    report.facts.append(_sizes(path))
    try:
        with _reader(path) as conn:
            found = [row[0] for row in conn.execute("PRAGMA integrity_check(100)")]
            if found != ["ok"]:
                report.problems.append(_damage(found))
            report.problems += _layout(conn)
            report.facts += _counts(conn)
    except sqlite3.Error as exc:
        damaged = isinstance(storage_error(exc), StorageDamaged)
        report.problems.append(
            f"the database is damaged: {exc}" if damaged else f"the database cannot be read: {exc}"
        )
    return report


def _sizes(path: Path) -> str:
    size = path.stat().st_size
    wal = path.with_name(path.name + "-wal")
    logged = ""
    if wal.is_file() and wal.stat().st_size:
        logged = f", write-ahead log {_mb(wal.stat().st_size)}"
    return f"{_mb(size)}{logged}"


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _damage(found: list[str]) -> str:
    shown = "; ".join(found[:_SHOWN_PROBLEMS])
    more = f" (and {len(found) - _SHOWN_PROBLEMS} more)" if len(found) > _SHOWN_PROBLEMS else ""
    return f"the database is damaged: {shown}{more}"


def _layout(conn: sqlite3.Connection) -> list[str]:
    present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    missing = [name for name in TABLES if name not in present]
    if not missing:
        return []
    return [f"tables of the store are missing: {', '.join(missing)}"]


def _counts(conn: sqlite3.Connection) -> list[str]:
    facts = []
    for table, what in (("runs", "runs"), ("events", "events"), ("sessions", "conversations")):
        try:
            count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        except sqlite3.Error:
            continue
        facts.append(f"{count:,} {what}")
    return [", ".join(facts)] if facts else []


@contextlib.contextmanager
def _reader(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection: a check never changes the file, nor folds its log into it."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


# --- salvage


@dataclass
class Salvage:
    """What a salvage did."""

    path: Path
    aside: Path
    copied: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, int] = field(default_factory=dict)
    """Per table, the places where rows could not be read (and were skipped)."""
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        """What was done, in plain words."""
        lines = [f"Moved the damaged store aside: {self.aside}", f"Rebuilt {self.path}"]
        if not any(self.copied.values()):
            lines.append("  nothing could be read from the damaged file: the new store is empty")
        for table, count in self.copied.items():
            skipped = self.unreadable.get(table, 0)
            lost = f" (rows at {skipped} damaged place(s) could not be read)" if skipped else ""
            lines.append(f"  {table}: {count:,} row(s) kept{lost}")
        lines += [f"  {note}" for note in self.notes]
        lines.append("The damaged file is kept; delete it once the new store looks right.")
        return "\n".join(lines)


def salvage(path: Path) -> Salvage:
    """Move the file at ``path`` aside and rebuild a store there from its readable rows."""
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        part = path.with_name(path.name + suffix)
        if part.exists():
            part.rename(aside.with_name(aside.name + suffix))
    result = Salvage(path, aside)
    fresh = _fresh(path)
    try:
        if aside.is_file():
            with _readable_copy(aside, result) as source:
                if source is not None:
                    _copy_all(source, fresh, result)
    finally:
        fresh.close()
    return result


def _fresh(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    conn.executescript(EVENTS_TABLE)
    conn.executescript(JOURNAL_TABLE)
    return conn


@contextlib.contextmanager
def _readable_copy(aside: Path, result: Salvage) -> Iterator[sqlite3.Connection | None]:
    """The damaged file opened for reading; a mended copy when its header or end is gone."""
    with tempfile.TemporaryDirectory(prefix="neta-salvage-") as scratch:
        source = aside
        header_damaged, short_by = _header_damaged(aside), _short_by(aside)
        if header_damaged or short_by:
            source = Path(scratch) / DB_NAME
            shutil.copyfile(aside, source)
            wal = aside.with_name(aside.name + "-wal")
            if wal.is_file():
                shutil.copyfile(wal, source.with_name(source.name + "-wal"))
        if short_by:
            # Pages past the end read as empty, so the tables that start before it can be read.
            with source.open("ab") as file:
                file.write(bytes(short_by))
            result.notes.append("the file was cut short: what was before the cut was read")
        if header_damaged:
            if not _rebuild_header(source):
                result.notes.append("the file's header is damaged and could not be rebuilt")
                yield None
                return
            result.notes.append("the file's header was damaged: it was rebuilt to read the rest")
        try:
            conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            result.notes.append(f"the damaged file cannot be opened: {exc}")
            yield None
            return
        try:
            yield conn
        finally:
            conn.close()


def _header_damaged(path: Path) -> bool:
    with path.open("rb") as file:
        header = file.read(HEADER_SIZE)
    return len(header) < HEADER_SIZE or not header.startswith(SQLITE_MAGIC)


def _short_by(path: Path) -> int:
    """Bytes missing at the end of a file with a sound header (0 when none are)."""
    if _header_damaged(path):
        return 0
    with path.open("rb") as file:
        header = file.read(HEADER_SIZE)
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return 0
    size = path.stat().st_size
    expected = -(-size // page_size) * page_size
    if header[24:28] == header[92:96]:  # the header's page count is valid
        expected = max(expected, struct.unpack(">I", header[28:32])[0] * page_size)
    return expected - size


_PAGE_SIZES = (4096, 1024, 2048, 8192, 16384, 32768, 65536, 512)


def _rebuild_header(path: Path) -> bool:
    """Write a plausible header over a damaged one; whether the schema can then be read.

    SQLite's header holds no data of its own: the page size (tried in turn, SQLite's default
    first), the page count (from the file's size) and fixed values are enough to read pages.
    """
    size = path.stat().st_size
    wal = path.with_name(path.name + "-wal").is_file()
    for page_size in _PAGE_SIZES:
        if size < page_size or size % page_size:
            continue
        header = bytearray(HEADER_SIZE)
        header[:16] = SQLITE_MAGIC
        struct.pack_into(">H", header, 16, 1 if page_size == 65536 else page_size)
        header[18:24] = bytes([2 if wal else 1, 2 if wal else 1, 0, 64, 32, 32])
        struct.pack_into(">IIIIIII", header, 24, 1, size // page_size, 0, 0, 1, 4, 0)
        struct.pack_into(">I", header, 56, 1)  # UTF-8
        struct.pack_into(">II", header, 92, 1, 3_045_000)
        with path.open("r+b") as file:
            file.write(header)
        try:
            with _reader(path) as conn:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return True
        except sqlite3.Error:
            continue
    return False


def _copy_all(source: sqlite3.Connection, fresh: sqlite3.Connection, result: Salvage) -> None:
    try:
        present = {
            row[0] for row in source.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    except sqlite3.Error as exc:
        result.notes.append(f"the list of tables cannot be read ({exc}): nothing was kept")
        return
    for table in TABLES + ADDED_LATER:
        if table not in present:
            if table not in ADDED_LATER:
                result.notes.append(f"table {table} was not found in the damaged file")
            continue
        columns = _shared_columns(source, fresh, table)
        if table == "events" and "key" not in columns:
            result.notes.append("events in an earlier version's layout were not copied")
            continue
        result.copied[table], result.unreadable[table] = _copy_table(source, fresh, table, columns)
    settle_left(fresh)  # events the journal held go to ``events`` before the checks below
    gaps = _runs_with_gaps(fresh)
    if gaps:
        result.notes.append(
            f"{gaps} run(s) lost events in the middle: a replay of them skips what was lost"
        )
    ended = _end_open_runs(fresh)
    if ended:
        result.notes.append(
            f"{ended} run(s) lost their last events: they end as interrupted when the server starts"
        )


def _shared_columns(source: sqlite3.Connection, fresh: sqlite3.Connection, table: str) -> list[str]:
    wanted = [row[1] for row in fresh.execute(f"PRAGMA table_info({table})")]
    try:
        have = {row[1] for row in source.execute(f"PRAGMA table_info({table})")}
    except sqlite3.Error:
        return wanted
    return [name for name in wanted if name in have]


def _copy_table(
    source: sqlite3.Connection, fresh: sqlite3.Connection, table: str, columns: list[str]
) -> tuple[int, int]:
    """Copy every readable row in rowid order, stepping over damaged places; (copied, places)."""
    names = ", ".join(columns)
    select = f"SELECT rowid, {names} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?"
    insert = f"INSERT OR IGNORE INTO {table} ({names}) VALUES ({', '.join('?' * len(columns))})"
    copied = places = 0
    after, limit = -(1 << 63), _BATCH
    fresh.execute("BEGIN")
    while True:
        try:
            rows = _rows_after(source, select, after, limit)
        except sqlite3.Error:
            if limit > 1:
                limit = 1  # up to the damaged place, row by row
                continue
            places += 1
            found = _next_readable(select, source, after)
            if found is None:
                break
            after, limit = found, _BATCH
            continue
        if not rows:
            break
        fresh.executemany(insert, [row[1:] for row in rows])
        copied += len(rows)
        after = rows[-1][0]
    fresh.execute("COMMIT")
    return copied, places


def _rows_after(
    source: sqlite3.Connection, select: str, after: int, limit: int
) -> list[tuple[int, ...]]:
    """Rows past rowid ``after``; a damaged tree that leads back counts as unreadable."""
    rows: list[tuple[int, ...]] = source.execute(select, (after, limit)).fetchall()
    if rows and (rows[0][0] <= after or any(a[0] >= b[0] for a, b in itertools.pairwise(rows))):
        raise sqlite3.DatabaseError("rows out of order")
    return rows


def _next_readable(select: str, source: sqlite3.Connection, after: int) -> int | None:
    """A rowid past ``after`` from which a whole row can be read again (None: none can).

    Reading from a rowid seeks straight to its page, so jumps of growing size step over a
    damaged page; a binary search then comes back to the first readable rowid after it.
    """

    def readable(start: int) -> bool:
        try:
            _rows_after(source, select, start, 1)
        except sqlite3.Error:
            return False
        return True

    step = 1
    bad = after
    while not readable(bad + step):
        bad += step
        step *= 2
        if bad + step >= 1 << 63:
            return None
    good = bad + step
    while good - bad > 1:
        middle = (bad + good) // 2
        if readable(middle):
            good = middle
        else:
            bad = middle
    return good


def _runs_with_gaps(fresh: sqlite3.Connection) -> int:
    """Runs whose kept events do not run from seq 0 without a gap."""
    found = fresh.execute(
        f"SELECT count(*) FROM (SELECT key >> {SEQ_BITS} AS stream, count(*) AS n,"
        f" MAX(key & {(1 << SEQ_BITS) - 1}) AS last FROM events GROUP BY stream)"
        " WHERE n != last + 1"
    ).fetchone()
    return int(found[0])


def _end_open_runs(fresh: sqlite3.Connection) -> int:
    """Runs whose stream lost its terminal event become running: the next start ends them."""
    ended = 0
    runs = fresh.execute(
        "SELECT r.request_id, s.stream FROM runs r LEFT JOIN event_streams s USING (request_id)"
        " WHERE r.status != 'running' AND r.imported = 0"
    ).fetchall()
    for request_id, stream in runs:
        last = None
        if stream is not None:
            base = stream << SEQ_BITS
            last = fresh.execute(
                "SELECT event_type FROM events WHERE key >= ? AND key < ? ORDER BY key DESC"
                " LIMIT 1",
                (base, base + (1 << SEQ_BITS)),
            ).fetchone()
        if last is None or last[0] not in TERMINAL_EVENT_TYPES:
            fresh.execute("UPDATE runs SET status = 'running' WHERE request_id = ?", (request_id,))
            ended += 1
    return ended


# --- the command


def examine(path: Path, *, repair: bool) -> int:
    """Check the store at ``path``, and salvage it when damaged and ``repair``; print the report.

    0 when it is sound (or was salvaged), 1 when it is damaged, 2 when a salvage failed.
    """
    report = check(path)
    print(report.text())
    if not report.problems:
        return 0
    if not repair:
        return 1
    print()
    try:
        done = salvage(path)
    except (OSError, sqlite3.Error) as exc:
        print(f"neta-jupyter: error: the salvage failed: {exc}", file=sys.stderr)
        return 2
    print(done.text())
    after = check(path)
    print()
    print(after.text())
    return 0 if not after.problems else 1
