"""A full disk during a run: the run ends with one terminal event, nothing is lost, it is said.

The first test fills a real (tmpfs) disk under a real server in a subprocess; mounting needs root,
so it is skipped with a message elsewhere (never under CI). The second makes SQLite's own "disk
is full" error happen in an in-process server by capping the database's size, so the same
promises are checked without root.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse, connect_sse

from neta_jupyter.runtime import Runtime
from tests.helpers import TERMINAL, ApiClient
from tests.server_process import ServerProcess

DELTA = "word " * 20


def script(path: Path, deltas: int, delay: float) -> str:
    path.write_text(json.dumps({"turns": [{"repeat": [DELTA, deltas], "delay": delay}]}))
    return f"scripted:{path}"


def wait_for(condition: Any, what: str, timeout: float = 120.0) -> None:
    """Until ``condition()`` holds; a generous safety timeout, not a speed requirement."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A small RAM disk mounted at ``path``."""
    if os.geteuid() != 0:
        message = "mounting a tmpfs needs root: the full-disk test runs as root (as in CI)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        message = f"cannot mount a tmpfs here: {mounted.stderr.strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder: Path) -> Path:
    """A file that takes every free byte of the disk ``folder`` is on."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (1 << 16, 1 << 12, 1 << 9, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, bytes(chunk))
    finally:
        os.close(fd)
    return filler


class Reader(threading.Thread):
    """Follows a run's SSE stream in the background, keeping every message."""

    def __init__(self, server: ServerProcess, request_id: str) -> None:
        super().__init__(daemon=True)
        self.server, self.request_id = server, request_id
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        timeout = httpx.Timeout(30, read=300)
        try:
            with (
                httpx.Client(
                    base_url=self.server.url, headers=self.server.headers, timeout=timeout
                ) as http,
                connect_sse(
                    http, "GET", "neta/api/agent/run/stream", params={"requestId": self.request_id}
                ) as source,
            ):
                for sse in source.iter_sse():
                    if sse.event != "HEARTBEAT":
                        self.messages.append((sse.event, json.loads(sse.data)))
        except BaseException as exc:  # the test reports it
            self.error = exc

    def statuses(self) -> list[dict[str, Any]]:
        return [m for kind, m in self.messages if kind == "AGENT_STATUS"]

    def stored(self) -> list[dict[str, Any]]:
        return [m for kind, m in self.messages if "seq" in m]


def read_all(server: ServerProcess, request_id: str) -> list[dict[str, Any]]:
    with (
        httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http,
        connect_sse(
            http, "GET", "neta/api/agent/run/stream", params={"requestId": request_id}
        ) as source,
    ):
        return [json.loads(s.data) for s in source.iter_sse() if s.event != "HEARTBEAT"]


def status_of(server: ServerProcess, request_id: str) -> str:
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http:
        answer = http.get("neta/api/agent/run/status", params={"requestId": request_id})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["status"])


@pytest.mark.parametrize("size", ["24m", "6m"])
def test_a_disk_filled_during_a_run(tmp_path: Path, size: str) -> None:
    """On a disk with room to spare, and on one barely larger than the server's own files."""
    with tmpfs(tmp_path / "neta-data", size) as data:
        server = ServerProcess(tmp_path)
        server.start()
        try:
            check_full_disk(server, data, tmp_path)
        finally:
            server.stop()


def check_full_disk(server: ServerProcess, data: Path, tmp_path: Path) -> None:
    db = data / "neta.sqlite3"
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http:
        started = http.post(
            "neta/api/agent/run/async",
            json={"content": "write a lot", "model": script(tmp_path / "s.json", 4000, 0.002)},
        )
        assert started.status_code == 200, started.text
        rid = started.json()["requestId"]
        reader = Reader(server, rid)
        reader.start()
        wait_for(lambda: len(reader.messages) > 300, "the run to stream")
        filler = fill(data)

        # While the disk is full the stream says why it is quiet, and new runs are refused.
        wait_for(lambda: reader.statuses(), "an AGENT_STATUS about the disk")
        status = reader.statuses()[0]
        assert status["data"]["code"] == "STORAGE_UNAVAILABLE"
        assert status["data"]["level"] == "ERROR"
        assert "disk is full" in status["data"]["message"]
        assert "seq" not in status, "a live status is never stored"
        refused = http.post("neta/api/agent/run/async", json={"content": "another"})
        assert refused.status_code == 503
        assert refused.json()["errCode"] == "STORAGE_UNAVAILABLE"
        assert "disk is full" in refused.json()["message"]
        # Nothing is saved meanwhile: the run's status and its saved log agree that it goes on.
        assert status_of(server, rid) == "running"
        assert not [e for e in reader.stored() if e["eventType"] in TERMINAL]
        db_while_full = db.stat().st_size
        wait_for(lambda: "the checkpoint of" in server.log_text(), "a checkpoint to fail")
        filler.unlink()

        reader.join(300)
        assert not reader.is_alive() and reader.error is None, reader.error
    events = reader.stored()
    assert [e["seq"] for e in events] == list(range(len(events))), "nothing lost, nothing twice"
    terminals = [e for e in events if e["eventType"] in TERMINAL]
    assert len(terminals) == 1 and terminals[0] is events[-1]
    expected = {"MESSAGE_COMPLETED": "completed", "MESSAGE_FAILED": "failed"}
    assert status_of(server, rid) == expected[terminals[0]["eventType"]]

    # The checkpoint thread lives on: the write-ahead log is copied into the database file again
    # (when it dies, the file stays as it was and the log grows without end).
    wait_for(lambda: db.stat().st_size > db_while_full, "a checkpoint into the database file")
    log = server.log_text()
    assert log.count("cannot write the store") == 1, "logged once per episode, not per event"
    assert log.count("can be written again after") == 1
    assert log.count("the checkpoint of") == 1
    assert log.count("succeed again after") == 1
    assert "Traceback" not in log

    server.shutdown()
    server.start()
    assert read_all(server, rid) == events, "a restart adds nothing"
    assert status_of(server, rid) == expected[terminals[0]["eventType"]]


# --- the same promises in process, with SQLite's own "full" error and no root needed


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"commit_interval": 0.002}


async def until(condition: Any, what: str, timeout: float = 120.0) -> None:
    """:func:`wait_for` on the event loop."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.01)


async def live_frames(api: ApiClient, rid: str, into: list[tuple[str, dict[str, Any]]]) -> None:
    async with aconnect_sse(
        api.http, "GET", "neta/api/agent/run/stream", params={"requestId": rid}
    ) as source:
        async for sse in source.aiter_sse():
            if sse.event != "HEARTBEAT":
                into.append((sse.event, json.loads(sse.data)))


async def test_writes_that_fail_are_kept_and_the_run_ends_once(
    api: ApiClient, runtime: Runtime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = runtime.store.db
    runtime.log.addHandler(caplog.handler)  # the server's loggers do not propagate to the root
    rid = (
        await api.start("write a lot", model=script(tmp_path / "s.json", deltas=2000, delay=0.002))
    )["requestId"]
    frames: list[tuple[str, dict[str, Any]]] = []
    follower = asyncio.ensure_future(live_frames(api, rid, frames))
    await until(lambda: len(frames) > 100, "the run to stream")
    pages = db.conn.execute("PRAGMA page_count").fetchone()[0]
    db.conn.execute(f"PRAGMA max_page_count = {pages}")  # the database cannot grow: "full"
    await until(lambda: any(kind == "AGENT_STATUS" for kind, _ in frames), "an AGENT_STATUS")
    refused = await api.post("async", {"content": "another"})
    assert refused.status_code == 503 and refused.json()["errCode"] == "STORAGE_UNAVAILABLE"
    await asyncio.sleep(1)
    db.conn.execute("PRAGMA max_page_count = 1073741823")
    await asyncio.wait_for(follower, 120)

    stored = [m for _, m in frames if "seq" in m]
    assert [e["seq"] for e in stored] == list(range(len(stored)))
    terminals = [e for e in stored if e["eventType"] in TERMINAL]
    assert len(terminals) == 1 and terminals[0] is stored[-1]
    status = (await api.status(rid))["status"]
    assert (
        status
        == {"MESSAGE_COMPLETED": "completed", "MESSAGE_FAILED": "failed"}[terminals[0]["eventType"]]
    )
    failures = [r for r in caplog.records if "cannot write the store" in r.getMessage()]
    assert len(failures) == 1 and failures[0].levelname == "ERROR"
    assert sum("can be written again after" in r.getMessage() for r in caplog.records) == 1
    assert not [r for r in caplog.records if r.exc_info], "no traceback per failed write"
    runtime.log.removeHandler(caplog.handler)
    await runtime.recover()
    assert [json.loads(e.payload) for e in await runtime.store.events.read_after(rid, -1)] == stored
