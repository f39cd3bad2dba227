"""The SQLite store's journal (``store/journal.py``): many runs streaming at once, a little each.

When a group commit holds a token or two of each of many streams, those events are appended to
a journal in commit order and settled into ``events`` later, in bulk. What users rely on: a
server killed while the journal holds events (some of them also written to ``events`` already)
loses nothing that was durable and duplicates nothing; a stopped server, and a quiet spell,
leave every event in ``events``; writes that fail meanwhile lose nothing.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from neta_jupyter.events import AgentEvent, EventType, TextData
from neta_jupyter.store import Store
from tests.notebook_room import until

STREAMS = [f"r_{i}" for i in range(20)]
TIMEOUT = 60
"""A safety bound, never a speed requirement."""

WRITER = """
import asyncio, sys
from neta_jupyter.events import AgentEvent, EventType, TextData
from neta_jupyter.store import Store, db

db._SETTLE_AFTER = 3600.0  # the journal is emptied only when full: it holds events when killed

def delta(stream, text):
    return AgentEvent(event_type=EventType.TEXT_DELTA, request_id=stream, data=TextData(text=text))

async def main(path):
    store = Store(path)
    log = store.events
    streams = [f"r_{i}" for i in range(20)]
    for stream in streams:
        await log.open(stream)
    for i in range(100):
        for stream in streams:
            log.append_nowait(delta(stream, f"{stream}:{i}"))
        await log.flush()
    for i in range(100, 150):  # a burst: r_0 is written to events whole, copies stay journaled
        log.append_nowait(delta("r_0", f"r_0:{i}"))
    await log.flush()
    print(store.db.journal.rows, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1]))
"""


def delta(stream: str, text: str) -> AgentEvent:
    return AgentEvent(event_type=EventType.TEXT_DELTA, request_id=stream, data=TextData(text=text))


async def texts(store: Store, stream: str) -> list[str]:
    events = await store.events.read_after(stream, -1, 100_000)
    assert [e.seq for e in events] == list(range(len(events))), "contiguous, each once"
    return [json.loads(e.payload)["data"]["text"] for e in events]


def table_counts(path: Path) -> tuple[int, int]:
    """Rows in ``events`` and in the journal, read from another connection."""
    conn = sqlite3.connect(path)
    try:
        return (
            conn.execute("SELECT count(*) FROM events").fetchone()[0],
            conn.execute("SELECT count(*) FROM recent_events").fetchone()[0],
        )
    finally:
        conn.close()


async def write_rounds(store: Store, rounds: range) -> None:
    for i in rounds:
        for stream in STREAMS:
            store.events.append_nowait(delta(stream, f"{stream}:{i}"))
        await store.events.flush()


def killed_writer(path: Path) -> int:
    """Runs ``WRITER`` and kills it with SIGKILL once it wrote; how many events it journaled."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None
        return int(writer.stdout.readline())
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(TIMEOUT)


async def test_a_killed_server_loses_nothing_the_journal_held_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "neta.sqlite3"
    assert killed_writer(path) > 0, "the journal held events when the process was killed"
    store = Store(path)
    assert await texts(store, "r_0") == [f"r_0:{i}" for i in range(150)]
    for stream in STREAMS[1:]:
        assert await texts(store, stream) == [f"{stream}:{i}" for i in range(100)]
        assert await store.events.last_seq(stream) == 99
    assert table_counts(path) == (20 * 100 + 50, 0), "settled when the store opened"
    store.close()


async def test_a_stopped_store_keeps_every_event_in_the_events_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neta_jupyter.store import db

    monkeypatch.setattr(db, "_SETTLE_AFTER", 3600.0)  # only the stop empties the journal
    path = tmp_path / "neta.sqlite3"
    store = Store(path)
    for stream in STREAMS:
        await store.events.open(stream)
    await write_rounds(store, range(30))
    assert store.db.journal.rows > 0
    store.close()
    assert table_counts(path) == (20 * 30, 0)


async def test_a_quiet_spell_settles_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neta_jupyter.store import db

    monkeypatch.setattr(db, "_SETTLE_AFTER", 0.2)
    path = tmp_path / "neta.sqlite3"
    store = Store(path)
    for stream in STREAMS:
        await store.events.open(stream)
    await write_rounds(store, range(1))  # one commit: the quiet spell starts after it
    assert table_counts(path) == (0, 20), "the journal holds the events at first"
    await until(lambda: table_counts(path) == (20, 0), "the journal was settled")
    for stream in STREAMS:
        assert await texts(store, stream) == [f"{stream}:0"]
    store.close()


async def test_writes_that_fail_while_the_journal_holds_events_lose_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "neta.sqlite3"
    store = Store(path)
    for stream in STREAMS:
        await store.events.open(stream)
    await write_rounds(store, range(10))
    store.db.conn.execute("PRAGMA query_only = 1")  # every write fails, as on a read-only disk
    for i in range(10, 15):
        for stream in STREAMS:
            store.events.append_nowait(delta(stream, f"{stream}:{i}"))
        await asyncio.sleep(0.01)
    assert await store.events.last_seq("r_3") == 9, "readers see only what is durable"
    store.db.conn.execute("PRAGMA query_only = 0")
    async with asyncio.timeout(TIMEOUT):
        await store.events.flush()
    await write_rounds(store, range(15, 20))
    for stream in STREAMS:
        assert await texts(store, stream) == [f"{stream}:{i}" for i in range(20)]
    store.close()
    assert table_counts(path) == (20 * 20, 0)


async def test_a_salvage_keeps_what_the_journal_held(tmp_path: Path) -> None:
    """``neta-jupyter doctor --salvage`` of a store whose server was killed mid-stream."""
    from neta_jupyter.store.doctor import salvage

    path = tmp_path / "neta.sqlite3"
    assert killed_writer(path) > 0
    result = salvage(path)
    assert not [note for note in result.notes if "lost" in note], result.notes
    assert table_counts(path) == (20 * 100 + 50, 0)
    store = Store(path)
    assert await texts(store, "r_0") == [f"r_0:{i}" for i in range(150)]
    for stream in STREAMS[1:]:
        assert await texts(store, stream) == [f"{stream}:{i}" for i in range(100)]
    store.close()
