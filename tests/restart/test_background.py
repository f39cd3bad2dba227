"""A run waiting for code in the background outlives its server: the next start goes on with it.

The code's result is lost with the server (its kernel goes with it); the restarted server
resumes the run by itself, the call tells the model so, and the run ends with one terminal event
in its new segment, its log contiguous.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.restart.test_runs import after_restart, start
from tests.server_process import ServerProcess

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path)
    proc.start()
    yield proc
    proc.stop()


@pytest.mark.parametrize("stop", ["shutdown", "kill9"])
def test_a_waiting_run_goes_on_by_itself_after_a_restart(
    server: ServerProcess, tmp_path: Path, stop: str
) -> None:
    with server.client() as http:
        kernel = http.post("api/kernels", json={"name": "python3"})
        assert kernel.status_code == 201, kernel.text
    script = tmp_path / "background.json"
    code = "import time\ntime.sleep(600)"
    call = {"name": "python", "arguments": {"code": code, "background": True}}
    script.write_text(json.dumps({"turns": [{"toolCalls": [call]}]}))
    rid = start(
        server,
        content="train it",
        model=f"scripted:{script}",
        kernelId=kernel.json()["id"],
        approve="auto",
    )
    first = server.read(rid)
    assert first[-1]["data"]["suspendReason"]["type"] == "ASYNC_TOOL_PENDING"

    after_restart(script, {"text": "The training was lost with the restart."})
    server.shutdown() if stop == "shutdown" else server.kill9()
    server.start()

    rest = server.read(rid, after=first[-1]["seq"])  # nobody resumed it
    log = first + rest
    assert [e["seq"] for e in log] == list(range(len(log)))
    ends = [e["eventType"] for e in log if e["eventType"].startswith("MESSAGE_")]
    assert ends == ["MESSAGE_SUSPENDED", "MESSAGE_COMPLETED"]
    failed = next(e["data"] for e in rest if e["eventType"] == "TOOL_FAILED")
    assert "the server restarted while this code ran in the background" in failed["errorMessage"]
    assert failed["toolCallId"] == next(
        e["data"]["toolCallId"] for e in first if e["eventType"] == "TOOL_START"
    )
    with server.client() as http:
        status = http.get("neta/api/agent/run/status", params={"requestId": rid}).json()
    assert status["status"] == "completed"
