"""A crew across a kill -9 and a graceful shutdown of its server: consistent, then resumable."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from httpx_sse import connect_sse

from tests.server_process import ServerProcess

CREW = {
    "name": "notes",
    "agents": [{"name": "reader", "role": "You read files and say what is in them."}],
    "tasks": [
        {"id": "first", "agent": "reader", "description": "read notes.txt"},
        {"id": "left", "agent": "reader", "description": "read data.csv", "depends_on": ["first"]},
        {
            "id": "right",
            "agent": "reader",
            "description": "read README.md",
            "depends_on": ["first"],
        },
        {
            "id": "last",
            "agent": "reader",
            "description": "read notes.txt again, after: {left} {right}",
            "depends_on": ["left", "right"],
        },
    ],
    "max_parallel": 2,
}


@pytest.fixture
def server(tmp_path: Any) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path, {"demo_pace": 0.02})
    (proc.root / "notes.txt").write_text("first note\nsecond note\n")
    (proc.root / "data.csv").write_text("a,b\n1,2\n3,4\n")
    (proc.root / "README.md").write_text("# Title\n\nSome readme text here.\n")
    proc.start()
    yield proc
    proc.stop()


def _status(server: ServerProcess, rid: str) -> dict[str, Any]:
    with server.client() as http:
        response = http.get("neta/api/crew/status", params={"requestId": rid})
        assert response.status_code == 200, response.text
        return dict(response.json())


def _until(server: ServerProcess, rid: str, check: Callable[[dict[str, Any]], bool]) -> Any:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        body = _status(server, rid)
        if check(body):
            return body
        time.sleep(0.05)
    raise AssertionError(f"the crew never got there: {_status(server, rid)}")


def _control(server: ServerProcess, rid: str, action: str) -> dict[str, Any]:
    with server.client() as http:
        response = http.post("neta/api/crew/control", json={"requestId": rid, "action": action})
        assert response.status_code == 200, response.text
        return dict(response.json())


def _log(server: ServerProcess, rid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with (
        server.client() as http,
        connect_sse(http, "GET", "neta/api/crew/stream", params={"requestId": rid}) as src,
    ):
        for sse in src.iter_sse():
            if sse.event != "HEARTBEAT":
                out.append(json.loads(sse.data))
            if out and out[-1]["seq"] == _status(server, rid)["lastEventId"]:
                break
    return out


def _run(server: ServerProcess, rid: str) -> dict[str, Any]:
    with server.client() as http:
        response = http.get("neta/api/agent/run/status", params={"requestId": rid})
        assert response.status_code == 200, response.text
        return dict(response.json())


def _start_and_wait_for_two_running(server: ServerProcess) -> str:
    with server.client() as http:
        response = http.post("neta/api/crew/run", json={"definition": CREW, "approve": "auto"})
        assert response.status_code == 200, response.text
        rid = str(response.json()["requestId"])
    _until(server, rid, lambda s: s["counts"].get("running") == 2)
    time.sleep(0.3)  # both are under way
    return rid


def _tasks(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["taskId"]: t for t in body["tasks"]}


def test_kill_9_mid_crew_leaves_it_consistent_and_resumable_to_completion(
    server: ServerProcess,
) -> None:
    rid = _start_and_wait_for_two_running(server)
    first_child = _tasks(_status(server, rid))["first"]["childRequestId"]
    server.kill9()
    server.start()
    body = _status(server, rid)
    assert body["status"] == "waiting"
    tasks = _tasks(body)
    assert tasks["first"]["status"] == "completed"
    assert {tasks[t]["status"] for t in ("left", "right")} == {"ready"}, "no task without owner"
    assert tasks["last"]["status"] == "pending"
    for task in tasks.values():
        for child in task["childRequestIds"]:
            assert _run(server, child)["status"] in ("completed", "failed", "suspended")
    log = _log(server, rid)
    assert [e["seq"] for e in log] == list(range(len(log)))

    assert _control(server, rid, "resume")["status"] == "running"
    body = _until(server, rid, lambda s: s["status"] == "completed")
    tasks = _tasks(body)
    assert tasks["first"]["childRequestIds"] == [first_child], "a completed task never reruns"
    assert all(t["status"] == "completed" for t in tasks.values())
    for task in tasks.values():
        assert _run(server, task["childRequestId"])["status"] == "completed"
    log = _log(server, rid)
    assert [e["seq"] for e in log] == list(range(len(log)))
    assert log[-1]["data"]["status"] == "completed"


def test_graceful_shutdown_suspends_the_crew_and_resume_continues_the_same_runs(
    server: ServerProcess,
) -> None:
    rid = _start_and_wait_for_two_running(server)
    before = _tasks(_status(server, rid))
    server.shutdown()
    server.start()
    body = _status(server, rid)
    assert body["status"] == "paused"
    tasks = _tasks(body)
    for task_id in ("left", "right"):
        assert tasks[task_id]["status"] == "ready"
        child = _run(server, tasks[task_id]["childRequestId"])
        assert child["status"] == "suspended"
    _control(server, rid, "resume")
    body = _until(server, rid, lambda s: s["status"] == "completed")
    tasks = _tasks(body)
    for task_id in ("first", "left", "right"):  # the interrupted runs went on, none started over
        assert tasks[task_id]["childRequestIds"] == before[task_id]["childRequestIds"]
