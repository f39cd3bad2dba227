"""Two real jupyter servers on one real Redis: one writer per run, takeover when a server dies.

Each server holds a lease on the runs it executes, renewed by a heartbeat of its own; leases last
one second here, and each server looks for lapsed ones every 0.3 s.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.redis_server import redis_server
from tests.server_process import ServerProcess

LEASE = {"lease_ttl": 1.0, "sweep_interval": 0.3}

COUNTER = """
import json, sys, time
args = json.loads(sys.stdin.read() or "{}")
with open(args["counter"], "a") as out:
    out.write("ran\\n")
print(json.dumps({"type": "progress", "stage": "count", "status": "running", "message": "x"}),
      flush=True)
time.sleep(float(args["seconds"]))
print(json.dumps({"type": "result", "output": "counted"}), flush=True)
"""


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path / "redis") as url:
        yield url


@pytest.fixture
def pair(tmp_path: Path, redis_url: str) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Servers A and B on one Redis and one notebook root (as replicas behind a proxy)."""
    a = ServerProcess(tmp_path / "a", {"store_url": redis_url, **LEASE})
    b = ServerProcess(tmp_path / "b", {"store_url": redis_url, **LEASE})
    b.root = a.root
    install_counter(a.root)
    a.start()
    b.start()
    try:
        yield a, b
    finally:
        for server in (a, b):
            with_signal(server, signal.SIGCONT)
            server.stop()


def install_counter(root: Path) -> None:
    """A skill that notes each time it runs in a file, then works for a while."""
    skill = root / ".neta" / "skills" / "counter"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: counter\ndescription: counts its runs\nentry: {python} main.py\n---\n"
    )
    (skill / "main.py").write_text(COUNTER)


def with_signal(server: ServerProcess, sig: signal.Signals) -> None:
    if server.proc is not None and server.proc.poll() is None:
        os.kill(server.proc.pid, sig)


def start(server: ServerProcess, **body: Any) -> str:
    with server.client() as http:
        response = http.post("neta/api/agent/run/async", json=body)
        assert response.status_code == 200, response.text
        return str(response.json()["requestId"])


def post(server: ServerProcess, op: str, **body: Any) -> httpx.Response:
    with server.client() as http:
        return http.post(f"neta/api/agent/run/{op}", json=body)


def status(server: ServerProcess, rid: str) -> dict[str, Any]:
    with server.client() as http:
        found: dict[str, Any] = http.get(
            "neta/api/agent/run/status", params={"requestId": rid}
        ).json()
        return found


def until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Wait for ``check`` (a safety bound only: takeover takes about a lease time)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def skill_script(path: Path, counter: Path, seconds: float) -> str:
    call = {"name": "run_skill", "arguments": {"name": "counter", "args": {
        "counter": str(counter), "seconds": seconds}}}  # fmt: skip
    path.write_text(json.dumps({"turns": [{"toolCalls": [call]}, {"text": "All counted."}]}))
    return f"scripted:{path}"


def terminals(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ends = ("MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED")
    return [e for e in log if e["eventType"] in ends]


def test_a_tool_running_many_lease_times_keeps_its_lease(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    counter = tmp_path / "count.txt"
    model = skill_script(tmp_path / "tool.json", counter, seconds=4.0)  # four lease times
    rid = start(a, content="count", model=model, approve="auto")
    log = b.read(rid)  # followed on the other server
    assert log[-1]["eventType"] == "MESSAGE_COMPLETED", log[-1]
    assert len(terminals(log)) == 1
    assert counter.read_text() == "ran\n"
    assert "SYSTEM_CRASH" not in json.dumps(log)


def test_kill_9_of_the_owner_mid_tool_the_other_takes_over_and_never_runs_it_again(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    counter = tmp_path / "count.txt"
    script = tmp_path / "tool.json"
    rid = start(a, content="count", model=skill_script(script, counter, 3.0), approve="auto")
    followed: list[dict[str, Any]] = []
    follower = threading.Thread(target=lambda: followed.extend(b.read(rid)))
    follower.start()  # a client following the run on the other server
    until(lambda: counter.exists(), "the tool to start")
    seen = a.read(rid, limit=1_000_000, until_type="TOOL_START")
    a.kill9()
    # B had not played the script: on Retry its model starts from the first turn.
    script.write_text(json.dumps({"turns": [{"text": "It may have counted; I will not retry."}]}))
    follower.join(60)
    assert followed[: len(seen)] == seen, "the follower on B saw what A wrote, live"
    full = followed
    assert [e["seq"] for e in full] == list(range(len(full))), "one contiguous log"
    assert b.read(rid)[: len(seen)] == seen, "everything seen before the kill is unchanged"
    [end] = terminals(full)
    assert end["eventType"] == "MESSAGE_FAILED"
    assert end["data"]["errorCode"] == "SYSTEM_CRASH" and end["data"]["recoverable"] is True
    assert status(b, rid)["status"] == "failed"
    response = post(b, "retryTask", requestId=rid)
    assert response.status_code == 200, response.text
    rest = b.read(rid, after=end["seq"])
    assert rest[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert len(terminals(rest)) == 1
    assert counter.read_text() == "ran\n", "the tool that was executing never ran again"
    with b.client() as http:
        tree = http.get("neta/api/sessions/tree", params={"sessionId": status(b, rid)["sessionId"]})
    [answered] = [e for e in tree.json()["entries"] if e["role"] == "tool"]
    assert answered["message"]["content"].startswith("Interrupted:")
    assert "may or may not have run" in answered["message"]["content"]


def test_a_paused_owner_is_taken_over_and_its_writes_after_are_refused(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [{"repeat": ["word ", 4000], "delay": 0.003}]}))
    rid = start(a, content="write a lot", model=f"scripted:{script}")
    # A follower on A: it gets A's events as A writes them, not back from Redis; once B holds
    # the run, it reads B's from Redis.
    followed: list[dict[str, Any]] = []
    follower = threading.Thread(target=lambda: followed.extend(a.read(rid)), daemon=True)
    follower.start()
    seen = a.read(rid, limit=200)
    with_signal(a, signal.SIGSTOP)
    until(lambda: status(b, rid)["status"] == "failed", "B to take the run over")
    with_signal(a, signal.SIGCONT)
    until(lambda: "another server holds it" in a.log_text(), "A to stop the run")
    log = b.read(rid)
    follower.join(120)
    assert not follower.is_alive(), "the follower on A got the end B wrote"
    assert followed == log
    assert log[: len(seen)] == seen
    assert [e["seq"] for e in log] == list(range(len(log)))
    [end] = terminals(log)
    assert end is log[-1], "nothing of A's is in the log after the takeover"
    assert end["data"]["errorCode"] == "SYSTEM_CRASH" and end["data"]["recoverable"] is True
    time.sleep(1.0)  # A would have streamed hundreds of deltas by now
    assert b.read(rid) == log


def test_two_servers_resuming_at_once_give_one_200_and_one_409(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    counter = tmp_path / "count.txt"
    script = tmp_path / "t.json"
    rid = start(a, content="count", model=skill_script(script, counter, 0.1))
    first = a.read(rid)
    assert first[-1]["eventType"] == "MESSAGE_SUSPENDED"
    ask = next(e for e in first if e["eventType"] == "PERMISSION_ASK")["data"]
    # Should B win, its model (not played yet) starts from the turn after the call.
    script.write_text(json.dumps({"turns": [{"text": "All counted."}]}))
    replies: list[httpx.Response] = []
    winner: list[ServerProcess] = []
    go = threading.Barrier(2)

    def resume(server: ServerProcess) -> None:
        go.wait()
        reply = post(server, "resumeTask", requestId=rid, approved=True, askId=ask["askId"])
        replies.append(reply)
        if reply.status_code == 200:
            winner.append(server)

    threads = [threading.Thread(target=resume, args=(s,)) for s in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = sorted(r.status_code for r in replies)
    assert codes == [200, 409], [r.text for r in replies]
    [refused] = [r for r in replies if r.status_code == 409]
    assert refused.json()["errCode"] == "RUN_NOT_SUSPENDED"
    rest = winner[0].read(rid, after=first[-1]["seq"])
    assert rest[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert len(terminals(rest)) == 1
    assert counter.read_text() == "ran\n"


def test_a_follower_on_another_server_gets_exactly_the_events_after_its_last_event_id(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [{"repeat": ["word ", 600], "delay": 0.003}]}))
    rid = start(a, content="write a lot", model=f"scripted:{script}")
    k = a.read(rid, limit=50)[-1]["seq"]
    later = b.read(rid, after=k)  # live, from B, while A writes
    whole = a.read(rid)
    assert later == whole[k + 1 :]
    assert later[-1]["eventType"] == "MESSAGE_COMPLETED"


def test_terminate_on_one_server_of_a_run_executing_on_the_other_ends_it_once(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [{"repeat": ["word ", 20000], "delay": 0.003}]}))
    rid = start(a, content="write a lot", model=f"scripted:{script}")
    a.read(rid, limit=20)
    response = post(b, "terminateTask", requestId=rid)
    assert response.status_code == 200, response.text
    assert status(b, rid)["status"] == "failed"
    log = b.read(rid)
    [end] = terminals(log)
    assert end["data"]["errorCode"] == "USER_CANCELLED"
    assert [e["seq"] for e in log] == list(range(len(log)))


def test_sigterm_suspends_the_run_and_the_other_server_resumes_it(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [{"repeat": ["word ", 3000], "delay": 0.003}]}))
    rid = start(a, content="write a lot", model=f"scripted:{script}")
    a.read(rid, limit=50)
    assert a.proc is not None
    a.proc.send_signal(signal.SIGTERM)
    a.proc.wait(60)
    first = b.read(rid)
    assert first[-1]["eventType"] == "MESSAGE_SUSPENDED"
    assert first[-1]["data"]["suspendReason"]["type"] == "SHUTDOWN_INTERRUPT"
    script.write_text(json.dumps({"turns": [{"text": "The rest."}]}))
    response = post(b, "resumeTask", requestId=rid)
    assert response.status_code == 200, response.text
    rest = b.read(rid, after=first[-1]["seq"])
    assert rest[-1]["eventType"] == "MESSAGE_COMPLETED"
    log = first + rest
    assert [e["seq"] for e in log] == list(range(len(log)))


def test_a_server_starting_leaves_alone_the_runs_another_live_server_executes(
    tmp_path: Path, redis_url: str
) -> None:
    a = ServerProcess(tmp_path / "a", {"store_url": redis_url, **LEASE})
    c = ServerProcess(tmp_path / "c", {"store_url": redis_url, **LEASE})
    a.start()
    try:
        script = tmp_path / "slow.json"
        script.write_text(json.dumps({"turns": [{"repeat": ["word ", 30000], "delay": 0.003}]}))
        rid = start(a, content="write a lot", model=f"scripted:{script}")
        a.read(rid, limit=20)
        c.start()  # its start-up recovery sees the run running
        time.sleep(1.0)  # several sweeps of C
        assert status(c, rid)["status"] == "running"
        assert "interrupted by a crash" not in c.log_text() and "refused" not in c.log_text()
        assert post(a, "terminateTask", requestId=rid).status_code == 200
        log = c.read(rid)
        [end] = terminals(log)
        assert end["data"]["errorCode"] == "USER_CANCELLED", "A ended it, not C's recovery"
    finally:
        a.stop()
        c.stop()


def test_kill_9_of_redis_mid_run_then_its_restart_leaves_no_gap_and_no_duplicate(
    tmp_path: Path,
) -> None:
    from tests.redis_server import RedisProcess

    store = RedisProcess(tmp_path / "redis")
    store.start()
    config = {"store_url": store.url, "lease_ttl": 15.0}  # the outage is shorter than a lease
    a = ServerProcess(tmp_path / "a", config)
    b = ServerProcess(tmp_path / "b", config)
    try:
        a.start()
        b.start()
        script = tmp_path / "slow.json"
        script.write_text(json.dumps({"turns": [{"repeat": ["word ", 3000], "delay": 0.003}]}))
        rid = start(a, content="write a lot", model=f"scripted:{script}")
        followed: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        followers = [
            threading.Thread(target=lambda s=s, k=k: followed[k].extend(s.read(rid)))
            for k, s in (("a", a), ("b", b))
        ]
        for follower in followers:
            follower.start()
        until(lambda: len(followed["a"]) > 100 and len(followed["b"]) > 100, "events on both")
        store.kill9()
        time.sleep(1.0)
        store.start()  # on its append-only file
        for follower in followers:
            follower.join(120)
        log = a.read(rid)
        assert [e["seq"] for e in log] == list(range(len(log))), "no gap, no duplicate"
        assert log[-1]["eventType"] == "MESSAGE_COMPLETED" and len(terminals(log)) == 1
        for seen in followed.values():
            stored = [e for e in seen if e.get("seq", -1) >= 0]  # not the unsaved status notes
            assert stored == log, "each follower got the whole log once, across the outage"
    finally:
        a.stop()
        b.stop()
        store.stop()


def test_a_permission_ask_is_answered_on_the_other_server(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    counter = tmp_path / "count.txt"
    script = tmp_path / "t.json"
    rid = start(a, content="count", model=skill_script(script, counter, 0.1))
    first = a.read(rid)
    assert first[-1]["eventType"] == "MESSAGE_SUSPENDED"
    ask = next(e for e in first if e["eventType"] == "PERMISSION_ASK")["data"]
    # B had not played the script: its model starts from the turn after the call.
    script.write_text(json.dumps({"turns": [{"text": "All counted."}]}))
    response = post(b, "resumeTask", requestId=rid, approved=True, askId=ask["askId"])
    assert response.status_code == 200, response.text
    rest = a.read(rid, after=first[-1]["seq"])  # followed where it was started
    assert rest[0]["eventType"] == "PERMISSION_ASK_RESOLVED"
    assert rest[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert counter.read_text() == "ran\n"


def test_redis_down_longer_than_a_lease_gives_the_run_one_writer_after(tmp_path: Path) -> None:
    from tests.redis_server import RedisProcess

    store = RedisProcess(tmp_path / "redis")
    store.start()
    a = ServerProcess(tmp_path / "a", {"store_url": store.url, **LEASE})
    b = ServerProcess(tmp_path / "b", {"store_url": store.url, **LEASE})
    try:
        a.start()
        b.start()
        script = tmp_path / "slow.json"
        script.write_text(json.dumps({"turns": [{"repeat": ["word ", 20000], "delay": 0.003}]}))
        rid = start(a, content="write a lot", model=f"scripted:{script}")
        seen = a.read(rid, limit=100)
        store.kill9()
        time.sleep(3.0)  # three lease times: A stops its run itself, writing nothing more
        store.start()
        until(lambda: status(b, rid)["status"] == "failed", "the run to be taken over")
        time.sleep(1.0)
        log = b.read(rid)
        assert log[: len(seen)] == seen
        assert [e["seq"] for e in log] == list(range(len(log))), "no gap, no duplicate"
        [end] = terminals(log)
        assert end is log[-1] and end["data"]["errorCode"] == "SYSTEM_CRASH"
        assert end["data"]["recoverable"] is True
        assert "could not be renewed" in a.log_text()
    finally:
        a.stop()
        b.stop()
        store.stop()


def test_kill_9_of_the_owner_ends_the_sub_agents_still_waiting_for_a_slot(
    tmp_path: Path, redis_url: str
) -> None:
    # One sub-agent at a time: while the first writes its answer the other two wait for a slot
    # of their batch, holding no lease of their own. Their parent's server dies: the other
    # server ends every run of the tree, the waiting ones too, once each and recoverably.
    config = {"store_url": redis_url, **LEASE, "demo_pace": 0.01, "subagent_concurrency": 1}
    a = ServerProcess(tmp_path / "a", config)
    b = ServerProcess(tmp_path / "b", {"store_url": redis_url, **LEASE})
    b.root = a.root
    (a.root / "notes.txt").write_text("first note\nsecond note\n")
    (a.root / "data.csv").write_text("a,b\n1,2\n3,4\n")
    (a.root / "README.md").write_text("# Title\n\nSome readme text here.\n")
    a.start()
    b.start()
    try:
        rid = start(a, content="compare notes.txt, data.csv and README.md")
        [started] = a.read(rid, until_type="SUBAGENT_RUN_STARTED")[-1:]
        children = [c["requestId"] for c in started["data"]["children"]]
        assert len(children) == 3
        until(lambda: status(b, children[0])["lastSeq"] > 5, "the first sub-agent to stream")
        assert [status(b, c)["status"] for c in children] == ["running"] * 3
        a.kill9()

        tree = [rid, *children]
        until(lambda: all(status(b, r)["status"] != "running" for r in tree), "every run to end")
        for run in tree:
            log = b.read(run)
            assert [e["seq"] for e in log] == list(range(len(log))), run
            assert log[-1]["seq"] == status(b, run)["lastSeq"], "nothing after its end"
            [end] = terminals(log)
            assert end["eventType"] == "MESSAGE_FAILED", (run, end)
            assert end["data"]["errorCode"] == "SYSTEM_CRASH", run
            assert end["data"]["recoverable"] is True, run
            assert status(b, run)["status"] == "failed"
    finally:
        a.stop()
        b.stop()
