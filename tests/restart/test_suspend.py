"""A run's deadline to be answered outlives its server: past it, a restarted server reclaims it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.restart.test_runs import start
from tests.server_process import ServerProcess

PATIENCE = 90.0
"""A generous bound on waits that only have to end (nothing here measures a speed)."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path, {"permission_rules": [{"tool": "read_file", "action": "ask"}]})
    proc.start()
    yield proc
    proc.stop()


def asking(server: ServerProcess, tmp_path: Path, name: str, timeout: float) -> tuple[str, float]:
    """A run suspended on a permission ask, with ``timeout`` seconds to be answered; its
    requestId and the time it suspended."""
    script = tmp_path / f"{name}.json"
    call = {"name": "read_file", "arguments": {"path": "data.txt"}}
    script.write_text(json.dumps({"turns": [{"toolCalls": [call]}]}))
    rid = start(
        server,
        content="read data.txt",
        model=f"scripted:{script}",
        sessionName=name,
        suspendTimeout=timeout,
    )
    events = server.read(rid)
    assert events[-1]["data"]["suspendReason"]["type"] == "PERMISSION_ASK"
    return rid, time.time()


def status(server: ServerProcess, rid: str) -> dict[str, Any]:
    with server.client() as http:
        answer: dict[str, Any] = http.get(
            "neta/api/agent/run/status", params={"requestId": rid}
        ).json()
    return answer


def ended_with(server: ServerProcess, rid: str) -> dict[str, Any]:
    """The run's whole log, each segment ended by exactly one terminal event; the last one."""
    log: list[dict[str, Any]] = []
    while not log or log[-1]["eventType"] != "MESSAGE_FAILED":
        segment = server.read(rid, after=log[-1]["seq"] if log else None)
        assert segment, "the run is at rest without having failed"
        log += segment
    assert [e["seq"] for e in log] == list(range(len(log)))
    ends = [e["eventType"] for e in log if e["eventType"].startswith("MESSAGE_")]
    assert ends == ["MESSAGE_SUSPENDED", "MESSAGE_FAILED"]
    return log[-1]["data"]


def test_runs_whose_deadline_passed_while_the_server_was_down_are_reclaimed(
    server: ServerProcess, tmp_path: Path
) -> None:
    (server.root / "data.txt").write_text("x")
    overdue, suspended_at = asking(server, tmp_path, "overdue", 3)
    later, _ = asking(server, tmp_path, "later", 25)
    patient, _ = asking(server, tmp_path, "patient", 3600)
    assert status(server, overdue)["status"] == "suspended"
    server.shutdown()
    time.sleep(max(0.0, suspended_at + 4 - time.time()))  # past its deadline while down
    server.start()

    # Reclaimed as the server started, before anyone asked.
    assert status(server, overdue)["status"] == "failed"
    failed = ended_with(server, overdue)
    assert failed["errorCode"] == "USER_NO_RESPONSE" and failed["recoverable"] is False
    with server.client() as http:
        retry = http.post("neta/api/agent/run/retryTask", json={"requestId": overdue})
    assert retry.status_code == 409 and retry.json()["errCode"] == "RUN_NOT_RETRYABLE"

    # One whose deadline had not passed gets a timer in the new server.
    deadline = time.monotonic() + PATIENCE
    while status(server, later)["status"] == "suspended":
        assert time.monotonic() < deadline, "the run was never reclaimed"
        time.sleep(0.2)
    assert ended_with(server, later)["errorCode"] == "USER_NO_RESPONSE"

    # And one with time left still waits, and can be answered.
    assert status(server, patient)["status"] == "suspended"
    assert status(server, patient)["pendingAsk"]["kind"] == "permission"
