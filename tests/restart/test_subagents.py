"""Run trees across a crash and a graceful shutdown: every run ends or can be resumed, and a
resumed parent finishes with its children."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from httpx_sse import connect_sse

from tests.server_process import ServerProcess

TERMINAL = ("MESSAGE_COMPLETED", "MESSAGE_SUSPENDED", "MESSAGE_FAILED")
PROMPT = "compare notes.txt, data.csv and README.md"


@pytest.fixture
def server(tmp_path: Any) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path, {"demo_pace": 0.01, "subagent_concurrency": 2})
    (proc.root / "notes.txt").write_text("first note\nsecond note\n")
    (proc.root / "data.csv").write_text("a,b\n1,2\n3,4\n")
    (proc.root / "README.md").write_text("# Title\n\nSome readme text here.\n")
    proc.start()
    yield proc
    proc.stop()


def whole_log(server: ServerProcess, rid: str) -> list[dict[str, Any]]:
    """Every event of the run: its segments read one after the other."""
    log = server.read(rid)
    while len(log) - 1 < status(server, rid)["lastSeq"]:
        log += server.read(rid, log[-1]["seq"])
    return log


def status(server: ServerProcess, rid: str) -> dict[str, Any]:
    with server.client() as http:
        response = http.get("neta/api/agent/run/status", params={"requestId": rid})
        assert response.status_code == 200, response.text
        return dict(response.json())


def start_and_wait_for_answers(server: ServerProcess) -> tuple[str, list[str]]:
    """Start the delegating run; return once two children are writing their answers."""
    with server.client() as http:
        response = http.post("neta/api/agent/run/async", json={"content": PROMPT})
        assert response.status_code == 200, response.text
        rid = str(response.json()["requestId"])
    children: list[str] = []
    writing: set[str] = set()
    params = {"requestId": rid}
    with (
        server.client() as http,
        connect_sse(http, "GET", "neta/api/agent/run/stream", params=params) as src,
    ):
        for sse in src.iter_sse():
            event = json.loads(sse.data) if sse.event != "HEARTBEAT" else {}
            data = event.get("data") or {}
            if event.get("eventType") == "SUBAGENT_RUN_STARTED":
                children = [c["requestId"] for c in data["children"]]
            if data.get("message") == "Writing its answer":
                writing.add(data["childRequestId"])
            if len(writing) == 2:
                return rid, children
    raise AssertionError("the run ended before its children were writing")


def assert_consistent(server: ServerProcess, runs: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Every run ended or waits to be resumed; each log is contiguous and ends a segment."""
    logs = {}
    for rid in runs:
        state = status(server, rid)
        assert state["status"] in ("completed", "failed", "suspended"), (rid, state["status"])
        log = whole_log(server, rid)
        assert [e["seq"] for e in log] == list(range(len(log)))
        assert log[-1]["eventType"] in TERMINAL
        logs[rid] = log
    return logs


def resume(server: ServerProcess, rid: str) -> None:
    with server.client() as http:
        response = http.post("neta/api/agent/run/resumeTask", json={"requestId": rid})
        assert response.status_code == 200, response.text


def test_kill_9_mid_delegation_leaves_a_consistent_tree_that_finishes_when_resumed(
    server: ServerProcess,
) -> None:
    rid, children = start_and_wait_for_answers(server)
    server.kill9()
    server.start()
    logs = assert_consistent(server, [rid, *children])
    parent = logs[rid]
    assert parent[-1]["eventType"] == "MESSAGE_SUSPENDED", "it waited for its children"
    assert parent[-1]["data"]["suspendReason"]["type"] == "SHUTDOWN_INTERRUPT"
    ends = {c: logs[c][-1] for c in children}
    crashed = [c for c, end in ends.items() if end["data"].get("errorCode") == "SYSTEM_CRASH"]
    waiting = [c for c, end in ends.items() if end["eventType"] == "MESSAGE_SUSPENDED"]
    assert len(crashed) == 2, "the two that were writing had streamed: they end as crashed"
    assert len(waiting) == 1, "the one waiting for a slot had not started: it can go on"

    resume(server, rid)
    rest = server.read(rid, parent[-1]["seq"])
    assert rest[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert [e["seq"] for e in parent + rest] == list(range(len(parent) + len(rest)))
    finals = {
        e["data"]["childRequestId"]: e["data"]["status"]
        for e in rest
        if e["eventType"] == "SUBAGENT_EVENT"
    }
    assert finals == {**dict.fromkeys(crashed, "failed"), waiting[0]: "completed"}
    assert status(server, waiting[0])["status"] == "completed"
    answer = "".join(e["data"]["text"] for e in rest if e["eventType"] == "TEXT_DELTA")
    assert answer.count("did not finish") == 2
    assert_consistent(server, [rid, *children])


def test_graceful_shutdown_mid_delegation_suspends_the_tree_and_it_resumes_whole(
    server: ServerProcess,
) -> None:
    rid, children = start_and_wait_for_answers(server)
    server.shutdown()
    server.start()
    logs = assert_consistent(server, [rid, *children])
    for run in [rid, *children]:
        assert logs[run][-1]["eventType"] == "MESSAGE_SUSPENDED", run
        assert logs[run][-1]["data"]["suspendReason"]["type"] == "SHUTDOWN_INTERRUPT"

    resume(server, rid)
    rest = server.read(rid, logs[rid][-1]["seq"])
    assert rest[-1]["eventType"] == "MESSAGE_COMPLETED"
    answer = "".join(e["data"]["text"] for e in rest if e["eventType"] == "TEXT_DELTA")
    for name in ("notes.txt", "data.csv", "README.md"):
        assert f"- `{name}` has " in answer
    logs = assert_consistent(server, [rid, *children])
    for child in children:
        log = logs[child]
        assert log[-1]["eventType"] == "MESSAGE_COMPLETED"
        assert [e["eventType"] for e in log].count("MESSAGE_SUSPENDED") == 1
        assert status(server, child)["parentRequestId"] == rid
