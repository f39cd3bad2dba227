"""The event log: contiguous seq, durability before delivery, followers, slow followers."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from neta_jupyter.events import AgentEvent, EventType, MessageData, TextData
from neta_jupyter.providers import ModelRegistry
from neta_jupyter.runtime import Runtime, RuntimeConfig
from neta_jupyter.runtime.scheduling.admission import StartGate
from neta_jupyter.store import EventRow, MemoryBackend, MemoryData, Store
from tests.helpers import TERMINAL


def delta(rid: str, text: str) -> AgentEvent:
    return AgentEvent(event_type=EventType.TEXT_DELTA, request_id=rid, data=TextData(text=text))


def done(rid: str) -> AgentEvent:
    return AgentEvent(
        event_type=EventType.MESSAGE_COMPLETED,
        request_id=rid,
        data=MessageData(finish_reason="STOP"),
    )


def committed_rows(path: Path, rid: str) -> list[int]:
    with sqlite3.connect(path) as other:  # a second connection sees only committed data
        return [
            r[0]
            for r in other.execute(
                "SELECT e.key - (s.stream << 32) FROM events e JOIN event_streams s "
                "ON e.key >> 32 = s.stream WHERE s.request_id = ? ORDER BY e.key",
                (rid,),
            )
        ]


async def test_seq_is_contiguous_per_run_and_append_returns_when_durable(tmp_path: Path) -> None:
    store = Store(tmp_path / "log.sqlite3", commit_interval=0.05)
    log = store.events
    await log.open("a")
    await log.open("b")
    assert [log.append_nowait(delta("a", str(i))) for i in range(3)] == [0, 1, 2]
    assert log.append_nowait(delta("b", "x")) == 0
    assert committed_rows(tmp_path / "log.sqlite3", "a") == [], "not yet committed"
    assert await log.last_seq("a") == -1, "readers see only durable events"
    assert await log.append(delta("a", "3")) == 3
    assert committed_rows(tmp_path / "log.sqlite3", "a") == [0, 1, 2, 3]
    assert [e.seq for e in await log.read_after("a", 1)] == [2, 3]
    store.close()
    reopened = Store(tmp_path / "log.sqlite3")
    await reopened.events.open("a")
    assert reopened.events.append_nowait(delta("a", "4")) == 4, "seq continues after a restart"
    reopened.close()


async def test_followers_get_only_durable_events_in_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "log.sqlite3", commit_interval=0.01)
    log = store.events
    await log.open("r")
    got: list[int] = []

    async def follow() -> None:
        async for batch in log.follow("r", -1):
            for seq, _, _ in batch:
                assert seq in committed_rows(tmp_path / "log.sqlite3", "r")
                got.append(seq)
            if batch[-1][1] == "MESSAGE_COMPLETED":
                return

    task = asyncio.create_task(follow())
    for i in range(500):
        log.append_nowait(delta("r", str(i)))
        if i % 50 == 0:
            await asyncio.sleep(0.005)
    await log.append(done("r"))
    await asyncio.wait_for(task, 60)
    assert got == list(range(501))
    store.close()


async def test_a_slow_follower_reads_the_store_and_memory_stays_bounded(tmp_path: Path) -> None:
    store = Store(tmp_path / "log.sqlite3", commit_interval=0.001)
    log = store.events
    await log.open("r")
    follower = log.follow("r", -1)
    for i in range(30_000):
        log.append_nowait(delta("r", str(i)))
    await log.flush()
    tail = log._fanout._tails["r"]
    assert len(tail.events) <= 2 * 4096, "the in-memory window is bounded"
    seqs: list[int] = []
    async for batch in follower:  # starts reading only now: far behind the window
        seqs += [seq for seq, _, _ in batch]
        if seqs[-1] == 29_999:
            break
    assert seqs == list(range(30_000))
    store.close()


async def test_a_database_of_the_earlier_layout_is_migrated(tmp_path: Path) -> None:
    """Events stored under (request_id, seq) keys by an earlier version replay unchanged."""
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as old:
        old.execute(
            "CREATE TABLE events (request_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "event_type TEXT NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (request_id, seq)) "
            "WITHOUT ROWID"
        )
        old.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?)",
            [(rid, seq, "TEXT_DELTA", f"{rid}:{seq}") for rid in ("a", "b") for seq in range(3)],
        )
    store = Store(path)
    log = store.events
    assert [(e.seq, e.payload) for e in await log.read_after("b", -1)] == [
        (0, "b:0"),
        (1, "b:1"),
        (2, "b:2"),
    ]
    assert await log.last_seq("a") == 2
    await log.open("a")
    assert log.append_nowait(delta("a", "next")) == 3, "seq continues where the old layout ended"
    store.close()
    reopened = Store(path)
    assert [e.seq for e in await reopened.events.read_after("a", 1)] == [2, 3]
    reopened.close()


async def test_followers_behind_at_the_end_read_everything_then_the_tail_is_freed(
    tmp_path: Path,
) -> None:
    # A run ends while its followers are far behind: they still get every event once, in order,
    # and when the last of them is done the run's events are no longer held in memory.
    store = Store(tmp_path / "log.sqlite3")
    log = store.events
    await log.open("r_behind")
    await log.append(delta("r_behind", "first"))
    readers = [log.follow("r_behind", -1) for _ in range(3)]
    firsts = [await anext(r) for r in readers]  # each is now a reader of the run's tail
    assert [[row[0] for row in batch] for batch in firsts] == [[0]] * 3
    for i in range(1, 3000):
        log.append_nowait(delta("r_behind", str(i)))
    await log.append(done("r_behind"))
    for reader, first in zip(readers, firsts, strict=True):
        seqs = [row[0] for row in first]
        async for batch in reader:
            seqs += [row[0] for row in batch]
            if batch[-1][1] == "MESSAGE_COMPLETED":
                break
        await reader.aclose()
        assert seqs == list(range(3001))  # 3,000 deltas and the terminal event
    assert "r_behind" not in log._fanout._tails
    store.close()


async def test_the_first_starts_of_a_window_go_ahead_at_once() -> None:
    gate = StartGate(per_window=4, window=60)  # the rest would wait a minute
    admitted: list[int] = []

    async def start(i: int) -> None:
        await gate()
        admitted.append(i)

    tasks = [asyncio.create_task(start(i)) for i in range(10)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert admitted == [0, 1, 2, 3]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_burst_of_starts_is_spread_over_windows() -> None:
    gate = StartGate(per_window=4, window=0.05)
    loop = asyncio.get_running_loop()
    began = loop.time()
    admitted: list[float] = []

    async def start() -> None:
        await gate()
        admitted.append(loop.time() - began)

    await asyncio.gather(*(start() for _ in range(10)))
    admitted.sort()
    assert all(t >= 0.045 for t in admitted[4:])
    assert all(t >= 0.095 for t in admitted[8:])


async def test_runs_on_the_in_memory_store_end_once_and_a_restart_recovers_them(
    tmp_path: Path,
) -> None:
    data = MemoryData()
    store = Store.in_memory(data)
    config = RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path)
    runtime = Runtime(store, config, models=ModelRegistry(scripts=tmp_path))
    quick = tmp_path / "quick.json"
    quick.write_text(json.dumps({"turns": [{"repeat": ["word ", 300]}]}))
    done_run = await runtime.start("owner", "hello", model=f"scripted:{quick}")
    await runtime.wait(done_run.request_id)
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"turns": [{"repeat": ["word ", 100_000], "delay": 0.002}]}))
    cut = await runtime.start("owner", "go on", model=f"scripted:{slow}", session_name="other")
    follower = runtime.follow(cut.request_id, -1)
    async for batch in follower:
        if batch[-1][0] >= 20:
            break
    await follower.aclose()  # type: ignore[attr-defined]
    assert isinstance(store.backend, MemoryBackend)
    store.backend.crash()  # the process dies mid-run: nothing more is written
    await runtime.terminate("owner", cut.request_id)  # its task winds down into the void

    restarted = Runtime(Store.in_memory(data), RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path))
    assert await restarted.recover() == 1
    for rid, ending, status in (
        (done_run.request_id, "MESSAGE_COMPLETED", "completed"),
        (cut.request_id, "MESSAGE_FAILED", "failed"),
    ):
        events = [json.loads(p) for _, _, p in await first_segment(restarted, rid)]
        assert [e["seq"] for e in events] == list(range(len(events)))
        assert [e["eventType"] for e in events if e["eventType"] in TERMINAL] == [ending]
        assert (await restarted.get_run("owner", rid)).status == status
    assert events[-1]["data"]["errorCode"] == "SYSTEM_CRASH"


async def first_segment(runtime: Runtime, request_id: str) -> list[EventRow]:
    """What a follower of the run from the start gets up to its terminal event."""
    got: list[EventRow] = []
    follower = runtime.follow(request_id, -1)
    async for batch in follower:
        got += batch
        if batch[-1][1] in TERMINAL:
            break
    await follower.aclose()  # type: ignore[attr-defined]
    return got


async def test_a_follower_gets_heartbeats_only_while_its_stream_is_quiet(tmp_path: Path) -> None:
    # Its heartbeat deadline moves with every batch it sends; once the stream goes quiet it
    # gets heartbeats again, and an idle stream does not pile up a waiter per heartbeat.
    store = Store(tmp_path / "log.sqlite3")
    log = store.events
    await log.open("r_beat")
    follower = log.follow("r_beat", -1, heartbeat=1.0)
    got: list[list[EventRow]] = []

    async def read() -> None:
        async for batch in follower:
            got.append(batch)
            if sum(1 for b in got if not b) == 3:
                return

    reading = asyncio.create_task(read())
    for i in range(100):  # 2 s of events, far closer together than the heartbeat
        log.append_nowait(delta("r_beat", str(i)))
        await asyncio.sleep(0.02)
    await log.flush()
    await asyncio.sleep(0.05)
    live = list(got)
    assert all(live) and sum(len(b) for b in live) == 100, "no heartbeat while events flow"
    await asyncio.wait_for(reading, timeout=60)
    assert got[len(live) :] == [[], [], []]
    assert len(log._fanout._tails["r_beat"].waiters) <= 1
    await follower.aclose()  # type: ignore[attr-defined]
    store.close()
