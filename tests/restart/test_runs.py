"""Crash and restart: nothing is sent before it is stored; every run ends; asks survive."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.widgets.transcript import RunDigest
from tests.server_process import ServerProcess


def slow_script(path: Path, deltas: int = 3000, delay: float = 0.003) -> str:
    path.write_text(json.dumps({"turns": [{"repeat": ["word ", deltas], "delay": delay}]}))
    return f"scripted:{path}"


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    config = getattr(request, "param", None)
    proc = ServerProcess(tmp_path, config)
    proc.start()
    yield proc
    proc.stop()


def after_restart(script: Path, *turns: dict[str, Any]) -> None:
    """What a scripted model says once the server restarts: a new process loads its script
    again and plays it from the first turn, so the script becomes the turns still to come."""
    script.write_text(json.dumps({"turns": list(turns)}))


def start(server: ServerProcess, **body: Any) -> str:
    with server.client() as http:
        response = http.post("neta/api/agent/run/async", json=body)
        assert response.status_code == 200, response.text
        return str(response.json()["requestId"])


def test_kill_9_mid_run_then_restart(server: ServerProcess, tmp_path: Path) -> None:
    model = slow_script(tmp_path / "slow.json")
    rid = start(server, content="write a lot", model=model)
    seen = server.read(rid, limit=300)
    assert len(seen) == 300
    server.kill9()
    server.start()
    log = server.read(rid)
    assert [e["seq"] for e in log] == list(range(len(log)))
    assert log[: len(seen)] == seen, "every event a client received was stored before it was sent"
    assert log[-1]["eventType"] == "MESSAGE_FAILED"
    assert log[-1]["data"]["errorCode"] == "SYSTEM_CRASH"
    assert sum(e["eventType"].startswith("MESSAGE_") for e in log) == 1
    with server.client() as http:
        status = http.get("neta/api/agent/run/status", params={"requestId": rid}).json()
    assert status["status"] == "failed"


def test_graceful_shutdown_suspends_and_the_run_resumes_after_restart(
    server: ServerProcess, tmp_path: Path
) -> None:
    model = slow_script(tmp_path / "slow.json", deltas=2000, delay=0.005)
    rid = start(server, content="write a lot", model=model)
    seen = server.read(rid, limit=100)
    server.shutdown()
    server.start()
    log = server.read(rid)
    assert log[: len(seen)] == seen
    assert log[-1]["eventType"] == "MESSAGE_SUSPENDED"
    assert log[-1]["data"]["suspendReason"]["type"] == "SHUTDOWN_INTERRUPT"
    with server.client() as http:
        response = http.post("neta/api/agent/run/resumeTask", json={"requestId": rid})
        assert response.status_code == 200, response.text
    rest = server.read(rid, after=log[-1]["seq"])
    assert rest[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert [e["seq"] for e in log + rest] == list(range(len(log) + len(rest)))


def test_resume_after_graceful_shutdown_repeats_no_text(
    server: ServerProcess, tmp_path: Path
) -> None:
    words = [f"w{i} " for i in range(1500)]
    script = tmp_path / "long.json"
    script.write_text(json.dumps({"turns": [{"text": words, "delay": 0.005}]}))
    rid = start(server, content="write a long answer", model=f"scripted:{script}")
    server.read(rid, limit=150)  # well into the answer
    server.shutdown()
    server.start()
    first = server.read(rid)
    assert first[-1]["data"]["suspendReason"]["type"] == "SHUTDOWN_INTERRUPT"
    streamed = "".join(e["data"]["text"] for e in first if e["eventType"] == "TEXT_DELTA")
    assert 0 < len(streamed) < len("".join(words)), "the shutdown came in the middle of the answer"
    with server.client() as http:
        assert http.post("neta/api/agent/run/resumeTask", json={"requestId": rid}).is_success
    log = first + server.read(rid, after=first[-1]["seq"])
    assert log[-1]["eventType"] == "MESSAGE_COMPLETED"
    answer = "".join(words)
    deltas = "".join(e["data"]["text"] for e in log if e["eventType"] == "TEXT_DELTA")
    assert deltas == answer, "the log holds the answer once"
    digest = RunDigest()
    for envelope in log:
        digest.apply(envelope)
    assert digest.text == answer, "a client folding the log shows the answer once, in one piece"
    with server.client() as http:
        session = http.get("neta/api/agent/run/status", params={"requestId": rid}).json()
        tree = http.get("neta/api/sessions/tree", params={"sessionId": session["sessionId"]})
    [saved] = [e for e in tree.json()["entries"] if e["role"] == "assistant"]
    assert saved["message"]["content"] == answer


@pytest.mark.parametrize(
    "server", [{"permission_rules": [{"tool": "read_file", "action": "ask"}]}], indirect=True
)
def test_pending_permission_ask_survives_a_restart(server: ServerProcess, tmp_path: Path) -> None:
    (server.root / "data.txt").write_text("forty-two")
    script = tmp_path / "ask.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"toolCalls": [{"name": "read_file", "arguments": {"path": "data.txt"}}]},
                    {"text": "The file says forty-two."},
                ]
            }
        )
    )
    rid = start(server, content="read data.txt", model=f"scripted:{script}")
    first = server.read(rid)
    assert first[-1]["eventType"] == "MESSAGE_SUSPENDED"
    ask = next(e for e in first if e["eventType"] == "PERMISSION_ASK")["data"]
    server.kill9()
    after_restart(script, {"text": "The file says forty-two."})
    server.start()
    assert server.read(rid)[-1]["eventType"] == "MESSAGE_SUSPENDED", (
        "a suspended run stays suspended"
    )
    with server.client() as http:
        response = http.post(
            "neta/api/agent/run/resumeTask",
            json={"requestId": rid, "approved": True, "askId": ask["askId"]},
        )
        assert response.status_code == 200, response.text
    rest = server.read(rid, after=first[-1]["seq"])
    names = [e["eventType"] for e in rest]
    assert names[0] == "PERMISSION_ASK_RESOLVED"
    completed = next(e for e in rest if e["eventType"] == "TOOL_COMPLETED")
    assert completed["data"]["output"] == "Contents of data.txt (1 line, 9 bytes):\nforty-two"
    assert names[-1] == "MESSAGE_COMPLETED"


@pytest.mark.parametrize(
    "server", [{"permission_rules": [{"tool": "read_file", "action": "ask"}]}], indirect=True
)
def test_kill_9_under_load_every_run_ends_and_asks_survive(
    server: ServerProcess, tmp_path: Path
) -> None:
    (server.root / "data.txt").write_text("forty-two")
    streaming = [
        start(
            server,
            content=f"run {i}",
            model=slow_script(tmp_path / f"s{i}.json"),
            sessionName=f"s{i}",
        )
        for i in range(4)
    ]
    ask_script = tmp_path / "ask.json"
    ask_script.write_text(
        json.dumps(
            {
                "turns": [
                    {"toolCalls": [{"name": "read_file", "arguments": {"path": "data.txt"}}]},
                    {"text": "done"},
                ]
            }
        )
    )
    asking = start(server, content="read", model=f"scripted:{ask_script}", sessionName="ask")
    finished = start(server, content="hello", sessionName="demo")
    seen = {rid: server.read(rid, limit=50) for rid in streaming}
    assert server.read(asking)[-1]["eventType"] == "MESSAGE_SUSPENDED"
    assert server.read(finished)[-1]["eventType"] == "MESSAGE_COMPLETED"
    server.kill9()
    after_restart(ask_script, {"text": "done"})
    server.start()
    for rid in streaming:
        log = server.read(rid)
        assert log[: len(seen[rid])] == seen[rid]
        assert [e["seq"] for e in log] == list(range(len(log)))
        assert log[-1]["data"]["errorCode"] == "SYSTEM_CRASH"
    suspended = server.read(asking)[-1]
    assert suspended["eventType"] == "MESSAGE_SUSPENDED"
    assert server.read(finished)[-1]["eventType"] == "MESSAGE_COMPLETED"
    with server.client() as http:
        ask = http.get("neta/api/agent/run/status", params={"requestId": asking}).json()[
            "pendingAsk"
        ]
        assert (
            http.post(
                "neta/api/agent/run/resumeTask",
                json={"requestId": asking, "approved": True, "askId": ask["askId"]},
            ).status_code
            == 200
        )
    assert server.read(asking, after=suspended["seq"])[-1]["eventType"] == "MESSAGE_COMPLETED"


def test_graceful_shutdown_under_load_suspends_every_run(
    server: ServerProcess, tmp_path: Path
) -> None:
    runs = [
        start(
            server,
            content=f"run {i}",
            model=slow_script(tmp_path / f"g{i}.json", 1500, 0.005),
            sessionName=f"g{i}",
        )
        for i in range(5)
    ]
    for rid in runs:
        server.read(rid, limit=20)
    server.shutdown()
    server.start()
    ends = {}
    for rid in runs:
        log = server.read(rid)
        assert log[-1]["eventType"] == "MESSAGE_SUSPENDED"
        assert log[-1]["data"]["suspendReason"]["type"] == "SHUTDOWN_INTERRUPT"
        ends[rid] = log[-1]["seq"]
    with server.client() as http:
        for rid in runs:
            assert (
                http.post("neta/api/agent/run/resumeTask", json={"requestId": rid}).status_code
                == 200
            )
    for rid in runs:
        assert server.read(rid, after=ends[rid])[-1]["eventType"] == "MESSAGE_COMPLETED"


def test_a_tool_executing_at_a_crash_is_interrupted_and_retry_never_runs_it_again(
    server: ServerProcess, tmp_path: Path
) -> None:
    from tests.redis.test_replicas import install_counter, skill_script

    install_counter(server.root)
    counter = tmp_path / "count.txt"
    script = tmp_path / "tool.json"
    rid = start(server, content="count", model=skill_script(script, counter, 3.0), approve="auto")
    seen = server.read(rid, until_type="TOOL_START")
    while not counter.exists():
        time.sleep(0.05)
    server.kill9()
    after_restart(script, {"text": "It may have counted; I will not count again."})
    server.start()
    log = server.read(rid)
    assert log[: len(seen)] == seen
    end = log[-1]
    assert end["eventType"] == "MESSAGE_FAILED"
    assert end["data"]["errorCode"] == "SYSTEM_CRASH" and end["data"]["recoverable"] is True
    with server.client() as http:
        assert http.post("neta/api/agent/run/retryTask", json={"requestId": rid}).is_success
        rest = server.read(rid, after=end["seq"])
        assert rest[-1]["eventType"] == "MESSAGE_COMPLETED"
        session = http.get("neta/api/agent/run/status", params={"requestId": rid}).json()
        tree = http.get("neta/api/sessions/tree", params={"sessionId": session["sessionId"]})
    [answered] = [e for e in tree.json()["entries"] if e["role"] == "tool"]
    assert "may or may not have run" in answered["message"]["content"]
    time.sleep(3.5)  # the first run of the tool, orphaned by the crash, has finished
    assert counter.read_text() == "ran\n", "the tool ran once"


@pytest.mark.parametrize("server", [{"activity_interval": 0.2}], indirect=True)
def test_a_run_executing_keeps_the_server_active_for_idle_cullers(
    server: ServerProcess, tmp_path: Path
) -> None:
    def last_activity() -> str:
        with server.client() as http:
            found: str = http.get("api/status").json()["last_activity"]
            return found

    model = slow_script(tmp_path / "slow.json", deltas=1500, delay=0.004)
    rid = start(server, content="write a lot", model=model)
    started = last_activity()  # the request that started the run, at the latest
    deadline = time.monotonic() + 60
    while last_activity() == started:
        assert time.monotonic() < deadline, "no activity reported while the run executes"
        time.sleep(0.1)
    assert server.read(rid)[-1]["eventType"] == "MESSAGE_COMPLETED"
    time.sleep(0.5)  # a report may have been under way as the run ended
    idle = last_activity()
    time.sleep(1.0)  # five report intervals
    assert last_activity() == idle, "an idle server reports no activity"


def test_a_second_server_on_the_same_data_directory_refuses_it_and_says_why(
    server: ServerProcess, tmp_path: Path
) -> None:
    data = tmp_path / "neta-data"
    second = ServerProcess(tmp_path / "second", {"data_dir": str(data)})
    second.start()
    try:
        with second.client() as http:
            refused = http.post("neta/api/agent/run/async", json={"content": "hello"})
        assert refused.status_code == 503
        body = refused.json()
        assert body["errCode"] == "STORAGE_IN_USE"
        assert server.proc is not None and f"pid {server.proc.pid}" in body["message"]
        assert "c.NetaApp.data_dir" in body["message"]
        rid = start(server, content="hello")  # the first server goes on as before
        assert server.read(rid)[-1]["eventType"] == "MESSAGE_COMPLETED"
    finally:
        second.stop()


def test_the_database_on_a_network_filesystem_is_recognised() -> None:
    from neta_jupyter.server.datadir import network_filesystem

    mounts = (
        "/dev/sda1 / ext4 rw 0 0\n"
        "server:/export /home nfs4 rw 0 0\n"
        "/dev/sdb1 /home/alice/local ext4 rw 0 0\n"
    )
    assert network_filesystem(Path("/home/bob/.local/share/neta"), mounts) == "nfs4"
    assert network_filesystem(Path("/home/alice/local/neta"), mounts) is None
    assert network_filesystem(Path("/var/lib/neta"), mounts) is None
    assert network_filesystem(Path("/homework"), mounts) is None
