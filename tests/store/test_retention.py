"""A finished run's events are kept for a configured time, then deleted; a live run's never are.

Real servers (SQLite, and Redis on a real redis-server), real SSE and WebSocket clients. The
retention is one second here; the waits below are safety bounds, not speeds.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from websockets.sync.client import connect

from tests.redis_server import redis_server
from tests.server_process import ServerProcess

RETENTION = 1.0
STREAM = "neta/api/agent/run/stream"

COUNTER = """
import json, sys, time
args = json.loads(sys.stdin.read() or "{}")
with open(args["counter"], "a") as out:
    out.write("ran\\n")
time.sleep(float(args["seconds"]))
print(json.dumps({"type": "result", "output": "counted"}), flush=True)
"""


@pytest.fixture(params=["sqlite", "redis"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    config: dict[str, Any] = {"event_retention": RETENTION}
    with redis_or_not(request.param, tmp_path) as url:
        if url:
            config["store_url"] = url
        process = ServerProcess(tmp_path / "server", config)
        process.redis_url = url  # type: ignore[attr-defined]
        install_counter(process.root)
        process.start()
        try:
            yield process
        finally:
            process.stop()


class redis_or_not:
    def __init__(self, backend: str, tmp_path: Path) -> None:
        self._cm = redis_server(tmp_path / "redis") if backend == "redis" else None

    def __enter__(self) -> str:
        return self._cm.__enter__() if self._cm is not None else ""

    def __exit__(self, *exc: object) -> None:
        if self._cm is not None:
            self._cm.__exit__(*exc)


def install_counter(root: Path) -> None:
    skill = root / ".neta" / "skills" / "counter"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: counter\ndescription: counts its runs\nentry: {python} main.py\n---\n"
    )
    (skill / "main.py").write_text(COUNTER)


def scripted(path: Path, turns: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def start(server: ServerProcess, model: str) -> str:
    with server.client() as http:
        response = http.post(
            "neta/api/agent/run/async", json={"content": "go", "model": model, "approve": "auto"}
        )
        assert response.status_code == 200, response.text
        return str(response.json()["requestId"])


def until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def stream_status(server: ServerProcess, rid: str, after: int | None = None) -> httpx.Response:
    params: dict[str, Any] = {"requestId": rid}
    if after is not None:
        params["lastEventId"] = after
    with server.client() as http:
        return http.get(STREAM, params=params)


def subscribe(server: ServerProcess, rid: str, after: int | None = None) -> list[dict[str, Any]]:
    """Subscribe on the WebSocket; the reply, then the pong of a ping sent after it."""
    url = server.url.replace("http://", "ws://") + "neta/ws"
    frame: dict[str, Any] = {"type": "subscribe", "requestId": rid, "id": "s1"}
    if after is not None:
        frame["lastEventId"] = after
    with connect(url, additional_headers=server.headers) as ws:
        ws.send(json.dumps(frame))
        reply = json.loads(ws.recv(timeout=30))
        ws.send(json.dumps({"type": "ping"}))
        pong = json.loads(ws.recv(timeout=30))
    return [reply, pong]


def test_a_finished_runs_events_expire_and_its_stream_answers_410_on_both_transports(
    server: ServerProcess, tmp_path: Path
) -> None:
    rid = start(server, scripted(tmp_path / "t.json", [{"text": "Done."}]))
    log = server.read(rid)
    assert log[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert stream_status(server, rid, log[-1]["seq"]).status_code == 204  # kept for now

    until(lambda: stream_status(server, rid).status_code == 410, "the events to expire")
    for after in (None, log[-1]["seq"], log[-1]["seq"] + 5):  # a position in the deleted log
        body = stream_status(server, rid, after).json()
        assert (body["errCode"], body["requestId"]) == ("EVENTS_EXPIRED", rid)
        assert "deleted" in body["message"]
    reply, pong = subscribe(server, rid, log[-1]["seq"])
    assert reply["type"] == "error" and reply["errCode"] == "EVENTS_EXPIRED", reply
    assert reply["replyTo"] == "s1"
    assert pong == {"type": "pong"}, "the socket stays up"
    with server.client() as http:  # the run's record stays
        status = http.get("neta/api/agent/run/status", params={"requestId": rid})
    assert status.status_code == 200
    assert status.json()["status"] == "completed"


def test_a_live_runs_events_are_never_deleted(server: ServerProcess, tmp_path: Path) -> None:
    counter = tmp_path / "count.txt"
    call = {"name": "run_skill", "arguments": {"name": "counter", "args": {
        "counter": str(counter), "seconds": 5 * RETENTION}}}  # fmt: skip
    model = scripted(tmp_path / "t.json", [{"toolCalls": [call]}, {"text": "All counted."}])
    rid = start(server, model)
    until(counter.exists, "the tool to start")
    time.sleep(3 * RETENTION)  # several retentions (and sweeps) while the run executes
    url = getattr(server, "redis_url", "")
    if url:
        assert stream_ttl(url, rid) == -1, "a live run's stream has no time to live"
    log = server.read(rid)
    assert [e["seq"] for e in log] == list(range(len(log))), "whole, from seq 0"
    assert log[-1]["eventType"] == "MESSAGE_COMPLETED"
    if url:
        assert 0 < stream_ttl(url, rid) <= RETENTION * 1000, "a finished run's stream expires"


def stream_ttl(url: str, rid: str) -> int:
    """Milliseconds the run's stream has left in Redis (-1: no time to live)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        (key,) = client.keys(f"neta:*:ev:{rid}")
        return int(client.pttl(key))
    finally:
        client.close()


def test_a_last_event_id_past_the_end_is_an_error_on_both_transports(
    server: ServerProcess, tmp_path: Path
) -> None:
    rid = start(server, scripted(tmp_path / "t.json", [{"text": "Done."}]))
    last = server.read(rid)[-1]["seq"]
    response = stream_status(server, rid, last + 3)
    assert response.status_code == 416
    assert response.json()["errCode"] == "LAST_EVENT_ID_OUT_OF_RANGE"
    reply, pong = subscribe(server, rid, last + 3)
    assert reply["errCode"] == "LAST_EVENT_ID_OUT_OF_RANGE", reply
    assert pong == {"type": "pong"}


def test_a_failed_run_whose_events_expired_is_not_retried_into_a_log_with_a_gap(
    tmp_path: Path,
) -> None:
    server = ServerProcess(
        tmp_path / "server", {"event_retention": RETENTION, "llm_max_retries": 0}
    )
    server.start()
    try:
        down = {"error": {"kind": "unavailable", "message": "503 overloaded"}}
        rid = start(server, scripted(tmp_path / "t.json", [down, {"text": "Back."}]))
        failed = server.read(rid)[-1]
        assert failed["eventType"] == "MESSAGE_FAILED" and failed["data"]["recoverable"] is True
        until(lambda: stream_status(server, rid).status_code == 410, "the events to expire")
        with server.client() as http:
            refused = http.post("neta/api/agent/run/retryTask", json={"requestId": rid})
            status = http.get("neta/api/agent/run/status", params={"requestId": rid}).json()
        assert refused.status_code == 409, refused.text
        assert refused.json()["errCode"] == "RUN_NOT_RETRYABLE"
        assert "deleted" in refused.json()["message"]
        assert status["status"] == "failed" and status["eventsExpired"] is True
        assert status["lastSeq"] == -1
    finally:
        server.stop()


async def test_the_in_process_client_is_told_the_same_once_the_sweep_deleted_the_events(
    tmp_path: Path,
) -> None:
    from neta_jupyter.client import Gone, InProcessTransport, RunClient
    from neta_jupyter.runtime import Runtime, RuntimeConfig
    from neta_jupyter.store import SqliteBackend, Store

    store = Store(tmp_path / "db", event_retention=0.2)
    runtime = Runtime(store, RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path, demo_pace=0.0))
    client = RunClient(InProcessTransport(runtime, "owner"))
    try:
        run = await runtime.start("owner", "hello", model="demo")
        await runtime.wait(run.request_id)
        assert [item async for item in client.follow(run.request_id)][-1].terminal
        assert isinstance(store.backend, SqliteBackend) and store.backend.sweeper is not None
        sweeper = store.backend.sweeper
        deadline = time.monotonic() + 60
        while not sweeper.deleted:
            assert time.monotonic() < deadline, "timed out waiting for the sweep"
            await asyncio.sleep(0.05)
        status = client.status(run.request_id)
        assert (status["eventsExpired"], status["lastSeq"]) == (True, -1)
        with pytest.raises(Gone) as refused:
            async for _ in client.follow(run.request_id):
                pass
        assert refused.value.code == "EVENTS_EXPIRED"
        assert await store.records.get_run(run.request_id) is not None, "the record stays"
    finally:
        store.close()


def events_per_run(conn: Any) -> dict[str, int]:
    """How many events each run has in the ``events`` table."""
    from neta_jupyter.store.schema import SEQ_BITS

    return dict(
        conn.execute(
            "SELECT s.request_id, COUNT(e.key) FROM event_streams s LEFT JOIN events e "
            f"ON e.key >> {SEQ_BITS} = s.stream GROUP BY s.request_id"
        ).fetchall()
    )


def test_the_sqlite_sweep_deletes_only_finished_runs_events_past_the_retention(
    tmp_path: Path,
) -> None:
    import logging
    import sqlite3

    from neta_jupyter.store import Database
    from neta_jupyter.store.retention import EventSweeper
    from neta_jupyter.store.schema import SEQ_BITS

    path = tmp_path / "db"
    Database(path).close()  # the layout
    conn = sqlite3.connect(path, isolation_level=None)
    now, old = time.time(), time.time() - 3600
    runs = {"r_done": ("completed", old), "r_live": ("running", old), "r_new": ("failed", now),
            "r_waits": ("suspended", old), "r_failed": ("failed", old)}  # fmt: skip
    conn.execute("BEGIN")
    for number, (rid, (status, updated)) in enumerate(runs.items(), 1):
        conn.execute(
            "INSERT INTO runs (request_id, principal, session_id, status, model, created, updated)"
            " VALUES (?, 'owner', 's', ?, 'demo', ?, ?)",
            (rid, status, updated, updated),
        )
        conn.execute("INSERT INTO event_streams VALUES (?, ?)", (number, rid))
        rows = [((number << SEQ_BITS) + seq, "TEXT_DELTA", "{}") for seq in range(2500)]
        conn.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
        # Copies a journal still holds (journal.py), as a server killed before emptying it left.
        conn.executemany(
            "INSERT INTO recent_events (key, event_type, payload) VALUES (?, ?, ?)", rows[-20:]
        )
    conn.execute("COMMIT")
    sweeper = EventSweeper(str(path), 60.0, logging.getLogger("test"))
    assert sweeper.sweep(conn) == 2 * 2500  # in several transactions of a bounded size
    left = events_per_run(conn)
    assert left == {"r_done": 0, "r_failed": 0, "r_live": 2500, "r_new": 2500, "r_waits": 2500}
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 5, "records stay"
    conn.close()
    Database(path).close()  # a start settles the journal: what expired does not come back
    conn = sqlite3.connect(path, isolation_level=None)
    left = events_per_run(conn)
    assert left == {"r_done": 0, "r_failed": 0, "r_live": 2500, "r_new": 2500, "r_waits": 2500}
    assert conn.execute("SELECT COUNT(*) FROM recent_events").fetchone()[0] == 0
    conn.close()
