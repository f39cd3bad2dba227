"""A real jupyter server storing its runs in a real Redis: runs complete over the event stream,
and a restarted server serves what was stored."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from tests.helpers import ApiClient, types
from tests.redis_server import redis_server
from tests.server_process import ServerProcess


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture
def neta_config(redis_url: str) -> dict[str, Any]:
    return {"store_url": redis_url}


async def test_a_run_completes_over_the_event_stream_with_runs_in_redis(
    api: ApiClient, jp_serverapp: Any, redis_url: str
) -> None:
    import redis

    store = jp_serverapp.web_app.settings["neta_runtime"].store
    assert type(store.backend).__name__ == "RedisBackend"
    rid = (await api.start("hello there"))["requestId"]
    events = await api.segment(rid)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    assert (await api.status(rid))["status"] == "completed"
    stored = redis.Redis.from_url(redis_url, decode_responses=True)
    streams = [key for key in stored.scan_iter("neta:*:ev:" + rid)]
    assert len(streams) == 1 and stored.xlen(streams[0]) == len(events), "the events are in Redis"
    stored.close()


def read(server: ServerProcess, rid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with (
        httpx.Client(
            base_url=server.url, headers=server.headers, timeout=30, trust_env=False
        ) as http,
        connect_sse(http, "GET", "neta/api/agent/run/stream", params={"requestId": rid}) as src,
    ):
        for sse in src.iter_sse():
            if sse.event != "HEARTBEAT":
                out.append(json.loads(sse.data))
    return out


def test_a_restarted_server_serves_the_finished_runs_events_from_redis(
    tmp_path: Path, redis_url: str
) -> None:
    server = ServerProcess(tmp_path / "one", {"store_url": redis_url})
    server.start()
    try:
        with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http:
            response = http.post("neta/api/agent/run/async", json={"content": "hello again"})
            assert response.status_code == 200, response.text
            rid = response.json()["requestId"]
        before = read(server, rid)
        assert before[-1]["eventType"] == "MESSAGE_COMPLETED"
        server.shutdown()
        # Another data directory: nothing of the run is on this server's disk, only in Redis.
        server = ServerProcess(tmp_path / "two", {"store_url": redis_url})
        server.start()
        assert read(server, rid) == before
        with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http:
            status = http.get("neta/api/agent/run/status", params={"requestId": rid}).json()
        assert status["status"] == "completed"
    finally:
        server.stop()


def test_a_server_on_a_redis_that_could_lose_runs_refuses_runs_and_says_why(
    tmp_path: Path,
) -> None:
    password = "redis-pass-" + "7" * 12
    with redis_server(
        tmp_path / "redis", "--requirepass", password, settings=["--appendonly", "no"]
    ) as url:
        server = ServerProcess(tmp_path / "server", {"store_url": url})
        server.start()
        try:
            with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http:
                response = http.post("neta/api/agent/run/async", json={"content": "hello"})
            assert response.status_code == 503
            body = response.json()
            assert body["errCode"] == "STORAGE_MISCONFIGURED"
            assert "CONFIG SET appendonly yes" in body["message"]
            logged = (tmp_path / "server" / "server-1.log").read_text()
            assert "appendonly yes" in logged
            assert password not in body["message"] and password not in logged
        finally:
            server.stop()


def test_a_finished_runs_stream_answers_410_once_its_events_expired(
    tmp_path: Path, redis_url: str
) -> None:
    server = ServerProcess(tmp_path / "one", {"store_url": redis_url, "event_retention": 1})
    server.start()
    try:
        with server.client() as http:
            response = http.post("neta/api/agent/run/async", json={"content": "hello"})
            rid = response.json()["requestId"]
            assert read(server, rid)[-1]["eventType"] == "MESSAGE_COMPLETED"
            time.sleep(2.5)  # past the retention of one second
            gone = http.get("neta/api/agent/run/stream", params={"requestId": rid})
            assert gone.status_code == 410, gone.text
            assert gone.json()["errCode"] == "EVENTS_EXPIRED"
            status = http.get("neta/api/agent/run/status", params={"requestId": rid}).json()
            assert status["status"] == "completed", "the run's record stays"
            tree = http.get("neta/api/sessions/tree", params={"sessionId": status["sessionId"]})
            assert [e["role"] for e in tree.json()["entries"]] == ["user", "assistant"]
    finally:
        server.stop()


CREW = {
    "name": "one-note",
    "agents": [{"name": "writer", "role": "writes notes"}],
    "tasks": [{"id": "note", "agent": "writer", "description": "Write a short note"}],
}


@pytest.mark.parametrize("store", ["redis", "sqlite"])
def test_an_ended_crews_stream_answers_410_once_its_events_expired(
    tmp_path: Path, redis_url: str, store: str
) -> None:
    # Five seconds: the first read below comes after the crew's end, and on a slow moment more
    # than one second passed before it (the stream had expired already).
    config: dict[str, Any] = {"event_retention": 5}
    if store == "redis":
        config["store_url"] = redis_url
    server = ServerProcess(tmp_path / "one", config)
    server.start()
    try:
        with server.client() as http:
            started = http.post("neta/api/crew/run", json={"definition": CREW, "inputs": {}})
            assert started.status_code == 200, started.text
            rid = started.json()["requestId"]
            params = {"requestId": rid}
            deadline = time.monotonic() + 120  # a safety bound, not a speed
            while http.get("neta/api/crew/status", params=params).json()["status"] != "completed":
                assert time.monotonic() < deadline, "the crew did not complete"
                time.sleep(0.1)
            kept = http.get("neta/api/crew/stream", params=params)
            assert kept.status_code == 200 and "crew:run:status" in kept.text
            time.sleep(6.5)  # past the retention of five seconds (SQLite sweeps every 0.1 s)
            gone = http.get("neta/api/crew/stream", params=params)
            assert gone.status_code == 410, gone.text
            assert gone.json()["errCode"] == "EVENTS_EXPIRED"
            status = http.get("neta/api/crew/status", params=params)
            assert status.status_code == 410 and status.json()["errCode"] == "EVENTS_EXPIRED"
            crews = http.get("neta/api/crews").json()["crews"]
            assert rid not in [c["requestId"] for c in crews]
    finally:
        server.stop()
