"""The SQLite store's write-ahead log stays small while a run streams without a pause.

SQLite starts a log copied by a checkpoint again from its beginning only at the right moment; a
run whose events are committed one after another never gave it one, and its log grew by about
4 KB an event (30 MB in 16 s) until a small disk was full — then the checkpoint itself had no
room, and the run waited for space that nothing would free.
"""

from __future__ import annotations

from pathlib import Path

from neta_jupyter.events import AgentEvent, EventType, TextData
from neta_jupyter.store import Store

EVENTS = 6000
WAL_BOUND = 8 << 20
"""Bytes the log may reach: a few checkpoints' worth (it reached 27 MB for these events)."""


async def test_a_run_streaming_without_a_pause_keeps_the_log_bounded(tmp_path: Path) -> None:
    store = Store(tmp_path / "neta.sqlite3")
    wal = tmp_path / "neta.sqlite3-wal"
    log = store.events
    await log.open("r_1")
    peak = 0
    try:
        for i in range(EVENTS):
            event = AgentEvent(
                event_type=EventType.TEXT_DELTA, request_id="r_1", data=TextData(text=f"word {i} ")
            )
            log.append_nowait(event)
            await log.flush()  # one commit an event: what a steadily streaming run makes
            if wal.exists():
                peak = max(peak, wal.stat().st_size)
        stored = await log.read_after("r_1", -1, EVENTS + 1)
        assert [e.seq for e in stored] == list(range(EVENTS)), "every event, once, in order"
    finally:
        store.close()
    assert peak < WAL_BOUND, f"the write-ahead log grew to {peak} bytes"
