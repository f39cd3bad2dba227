"""Two real jupyter servers on one real Redis: runs go on where their kernel is, and the
attachments' bytes are on a directory every server shares.

A run bound to a notebook's kernel on server A that is resumed (a permission answer, a resume
after a pause) through server B goes on on A, with A's kernel; B answers what A answered.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from neta_jupyter.store import Store
from tests.redis.test_replicas import LEASE, post, start, status, terminals, with_signal
from tests.redis_server import redis_server
from tests.server_process import ServerProcess

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path / "redis") as url:
        yield url


def servers(
    tmp_path: Path, redis_url: str, a_config: dict[str, Any], b_config: dict[str, Any]
) -> tuple[ServerProcess, ServerProcess]:
    """Servers A and B on one Redis and one notebook root (as replicas behind a proxy)."""
    a = ServerProcess(tmp_path / "a", {"store_url": redis_url, **LEASE, **a_config})
    b = ServerProcess(tmp_path / "b", {"store_url": redis_url, **LEASE, **b_config})
    b.root = a.root
    return a, b


def test_an_attachment_a_run_wrote_on_one_server_is_served_by_the_other(
    tmp_path: Path, redis_url: str
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    mount_b = tmp_path / "mount-b"  # B mounts the shared volume at another path
    mount_b.symlink_to(shared)
    a, b = servers(tmp_path, redis_url, {"attachment_dir": str(shared)},
                   {"attachment_dir": str(mount_b)})  # fmt: skip
    (a.root / "report.csv").write_text("city,temp\nOslo,4\nRome,18\n")
    script = tmp_path / "send.json"
    call = {"name": "send_file", "arguments": {"path": "report.csv"}}
    script.write_text(json.dumps({"turns": [{"toolCalls": [call]}, {"text": "Sent."}]}))
    a.start()
    b.start()
    try:
        rid = start(a, content="send the report", model=f"scripted:{script}", approve="auto")
        log = a.read(rid)
        assert log[-1]["eventType"] == "MESSAGE_COMPLETED", log[-1]
        [sent] = [e["data"] for e in log if e["eventType"].startswith("ATTACHMENT_")]
        a.stop()
        shutil.rmtree(a.workdir / "neta-data", ignore_errors=True)  # A's own disk is gone
        shared.rename(tmp_path / "moved")  # and B's mount follows the volume
        mount_b.unlink()
        mount_b.symlink_to(tmp_path / "moved")
        with b.client() as http:
            got = http.get(
                "neta/api/agent/attachment/download",
                params={"virtualPath": sent["virtualPath"]},
            )
        assert got.status_code == 200, got.text
        assert got.text == "city,temp\nOslo,4\nRome,18\n"
    finally:
        a.stop()
        b.stop()


@pytest.fixture
def pair(tmp_path: Path, redis_url: str) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    a, b = servers(tmp_path, redis_url, {}, {})
    a.start()
    b.start()
    try:
        yield a, b
    finally:
        for server in (a, b):
            with_signal(server, signal.SIGCONT)
            server.stop()


def kernel_with_marker(server: ServerProcess, tmp_path: Path) -> tuple[str, str]:
    """A kernel started on ``server`` and a value a run defined in it beforehand (``marker``)."""
    with server.client() as http:
        kernel = http.post("api/kernels", json={"name": "python3"})
    assert kernel.status_code == 201, kernel.text
    kernel_id, marker = str(kernel.json()["id"]), f"defined-on-a-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "define.json"
    call = {"name": "python", "arguments": {"code": f"marker = {marker!r}"}}
    script.write_text(json.dumps({"turns": [{"toolCalls": [call]}, {"text": "Defined."}]}))
    model = f"scripted:{script}"
    rid = start(server, content="define", model=model, kernelId=kernel_id, approve="auto")
    assert server.read(rid)[-1]["eventType"] == "MESSAGE_COMPLETED"
    return kernel_id, marker


def printing_script(path: Path, *before: dict[str, Any]) -> str:
    """A model that (after ``before``) prints ``marker`` in the kernel, then is done."""
    show = {"toolCalls": [{"name": "python", "arguments": {"code": "print(marker)"}}]}
    path.write_text(json.dumps({"turns": [*before, show, {"text": "Shown."}]}))
    return f"scripted:{path}"


def printed(log: list[dict[str, Any]]) -> str:
    [done] = [e["data"] for e in log if e["eventType"] in ("TOOL_COMPLETED", "TOOL_FAILED")]
    assert done["toolName"] == "python"
    return json.dumps(done)


def went_on_in_the_hosts_kernel(
    first: list[dict[str, Any]], rest: list[dict[str, Any]], marker: str
) -> None:
    """The run's log goes on without a gap to one completed end, its code run in A's kernel."""
    log = first + rest
    assert [e["seq"] for e in log] == list(range(len(log)))
    assert len(terminals(rest)) == 1 and rest[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert marker in printed(rest), "the code ran in A's kernel"


def asked(server: ServerProcess, rid: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    first = server.read(rid)
    assert first[-1]["eventType"] == "MESSAGE_SUSPENDED", first[-1]
    ask = next(e for e in first if e["eventType"] == "PERMISSION_ASK")["data"]
    return first, ask


def test_a_permission_ask_answered_on_the_other_server_goes_on_in_the_kernel_s_server(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    kernel_id, marker = kernel_with_marker(a, tmp_path)
    model = printing_script(tmp_path / "show.json")
    rid = start(a, content="show it", model=model, kernelId=kernel_id)  # python asks first
    first, ask = asked(a, rid)
    assert ask["toolName"] == "python"
    response = post(b, "resumeTask", requestId=rid, approved=True, askId=ask["askId"])
    assert response.status_code == 200, response.text
    assert response.json() == {"success": True, "requestId": rid, "status": "running"}
    rest = b.read(rid, after=first[-1]["seq"])  # followed through B
    log = first + rest
    assert [e["seq"] for e in log] == list(range(len(log))), "one contiguous log"
    assert rest[0]["eventType"] == "PERMISSION_ASK_RESOLVED"
    [end] = terminals(rest)
    assert end is rest[-1] and end["eventType"] == "MESSAGE_COMPLETED", end
    assert marker in printed(rest), "the code ran in A's kernel"
    assert "handing resume of run" in b.log_text()


def test_a_paused_kernel_bound_run_resumed_on_the_other_server_goes_on_in_the_kernel_s_server(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    kernel_id, marker = kernel_with_marker(a, tmp_path)
    wait = {"toolCalls": [{"name": "python", "arguments": {"code": "import time; time.sleep(2)"}}]}
    model = printing_script(tmp_path / "show.json", wait)
    rid = start(a, content="show it", model=model, kernelId=kernel_id, approve="auto")
    a.read(rid, until_type="TOOL_START")
    assert post(a, "suspendTask", requestId=rid).status_code == 200
    first = a.read(rid)
    assert first[-1]["data"]["suspendReason"]["type"] == "MANUAL_SUSPEND", first[-1]
    response = post(b, "resumeTask", requestId=rid)
    assert response.status_code == 200, response.text
    rest = b.read(rid, after=first[-1]["seq"])
    went_on_in_the_hosts_kernel(first, rest, marker)


def test_two_resumes_at_once_handed_to_the_kernel_s_server_give_one_200_and_one_409(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    kernel_id, marker = kernel_with_marker(a, tmp_path)
    model = printing_script(tmp_path / "s.json")
    rid = start(a, content="show it", model=model, kernelId=kernel_id)
    first, ask = asked(a, rid)
    replies: list[httpx.Response] = []
    go = threading.Barrier(2)

    def resume() -> None:
        go.wait()
        replies.append(post(b, "resumeTask", requestId=rid, approved=True, askId=ask["askId"]))

    threads = [threading.Thread(target=resume) for _ in range(2)]  # both through B
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.status_code for r in replies) == [200, 409], [r.text for r in replies]
    [refused] = [r.json() for r in replies if r.status_code == 409]
    assert refused["errCode"] in ("RUN_NOT_SUSPENDED", "RUN_BUSY"), refused
    rest = a.read(rid, after=first[-1]["seq"])
    assert len(terminals(rest)) == 1 and rest[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert marker in printed(rest), "the code ran in A's kernel"


def test_a_host_that_does_not_answer_gives_503_and_acts_on_nothing_later(
    tmp_path: Path, redis_url: str
) -> None:
    patient = {"lease_ttl": 60.0, "handoff_timeout": 2.0}  # A stays the kernel's host throughout
    a, b = servers(tmp_path, redis_url, patient, patient)
    a.start()
    b.start()
    try:
        kernel_id, marker = kernel_with_marker(a, tmp_path)
        model = printing_script(tmp_path / "show.json")
        rid = start(a, content="show it", model=model, kernelId=kernel_id)
        first, ask = asked(a, rid)
        with_signal(a, signal.SIGSTOP)
        response = post(b, "resumeTask", requestId=rid, approved=True, askId=ask["askId"])
        assert response.status_code == 503, response.text
        assert response.json()["errCode"] == "KERNEL_HOST_UNREACHABLE"
        with_signal(a, signal.SIGCONT)
        time.sleep(1.0)  # A reads the late hand-off now: it must not act on it
        assert status(b, rid)["status"] == "suspended"
        response = post(b, "resumeTask", requestId=rid, approved=True, askId=ask["askId"])
        assert response.status_code == 200, response.text
        rest = b.read(rid, after=first[-1]["seq"])
        assert len(terminals(rest)) == 1 and marker in printed(rest)
    finally:
        with_signal(a, signal.SIGCONT)
        a.stop()
        b.stop()


async def test_a_kernel_is_known_as_its_server_s_while_it_runs_there_and_not_after(
    redis_url: str,
) -> None:
    host, other = Store(redis_url, lease_ttl=0.3), Store(redis_url)
    running = {"k_1"}
    host.leases.kernels_alive(lambda kernel_id: kernel_id in running)
    await host.leases.host_kernel("alice", "k_1")
    await asyncio.sleep(1.2)  # four lease times: the heartbeat renews it
    assert await other.leases.kernel_host("alice", "k_1") == host.leases.replica
    assert await other.leases.kernel_host("bob", "k_1") is None, "per user"
    running.clear()  # the kernel shut down
    await asyncio.sleep(0.5)
    assert await other.leases.kernel_host("alice", "k_1") is None
    host.close()
    other.close()
    await asyncio.sleep(0.1)  # their connections close


def test_a_retry_sent_to_the_other_server_goes_on_in_the_kernel_s_server(
    tmp_path: Path, redis_url: str
) -> None:
    once = {"llm_max_retries": 0}  # the model's first failure ends the run, recoverably
    a, b = servers(tmp_path, redis_url, once, once)
    a.start()
    b.start()
    try:
        kernel_id, marker = kernel_with_marker(a, tmp_path)
        down = {"error": {"kind": "unavailable", "message": "503 overloaded"}}
        model = printing_script(tmp_path / "show.json", down)
        rid = start(a, content="show it", model=model, kernelId=kernel_id, approve="auto")
        first = a.read(rid)
        assert first[-1]["eventType"] == "MESSAGE_FAILED", first[-1]
        assert first[-1]["data"]["recoverable"] is True
        response = post(b, "retryTask", requestId=rid)
        assert response.status_code == 200, response.text
        rest = b.read(rid, after=first[-1]["seq"])
        went_on_in_the_hosts_kernel(first, rest, marker)
    finally:
        a.stop()
        b.stop()
