"""Sub-agents over the run API: a run delegates to child runs, each a full run of its own."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import websockets
from httpx_sse import aconnect_sse

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import PermissionRule
from tests.helpers import TERMINAL, ApiClient, stored

Events = list[dict[str, Any]]


@pytest.fixture
def neta_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    return dict(getattr(request, "param", {}))


def text_of(events: Events) -> str:
    return "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")


def terminals(events: Events) -> Events:
    return [e for e in events if e["eventType"] in TERMINAL]


async def follow_with_cuts(api: ApiClient, rid: str, rng: random.Random) -> Events:
    """The run's stream up to its end, read in pieces: each connection is dropped at random."""
    received: Events = []
    while not (received and received[-1]["eventType"] in ("MESSAGE_COMPLETED", "MESSAGE_FAILED")):
        last = received[-1]["seq"] if received else None
        frames = await api.frames(rid, last, limit=rng.randint(1, 12))
        received += [f.json for f in frames if f.event != "HEARTBEAT"]
    return received


async def watch(api: ApiClient, rid: str, until: Callable[[Events], bool]) -> Events:
    """The run's stream from its start until ``until`` holds of what was received."""
    received: Events = []
    params = {"requestId": rid}
    async with aconnect_sse(api.http, "GET", "neta/api/agent/run/stream", params=params) as src:
        async for sse in src.aiter_sse():
            if sse.event != "HEARTBEAT":
                received.append(json.loads(sse.data))
            if until(received):
                return received
    raise AssertionError(f"the stream ended first: {[e['eventType'] for e in received]}")


def subagent_events(events: Events, child: str) -> Events:
    return [
        e["data"]
        for e in events
        if e["eventType"] == "SUBAGENT_EVENT" and e["data"]["childRequestId"] == child
    ]


def delegating(runtime: Runtime, name: str, tasks: list[dict[str, Any]], answer: str) -> None:
    """A scripted model ``name`` that delegates ``tasks`` and then answers."""
    call = ScriptedToolCall("delegate", {"tasks": tasks}, id="call_delegate")
    runtime.models.register(
        name, ScriptedModel([ScriptedTurn(tool_calls=[call]), ScriptedTurn(text=answer)])
    )


@pytest.mark.parametrize("neta_config", [{"demo_pace": 0.002}], indirect=True)
async def test_a_delegated_run_end_to_end_over_sse_with_random_disconnects(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "notes.txt").write_text("first note\nsecond note\n")
    (jp_root_dir / "data.csv").write_text("a,b\n1,2\n3,4\n")
    (jp_root_dir / "README.md").write_text("# Title\n\nSome readme text here.\n")
    rng = random.Random(12)
    started = await api.start("compare notes.txt, data.csv and README.md")
    rid = started["requestId"]

    children: dict[str, asyncio.Task[Events]] = {}
    parent: Events = []
    while not (parent and parent[-1]["eventType"] in TERMINAL):
        last = parent[-1]["seq"] if parent else None
        frames = await api.frames(rid, last, limit=rng.randint(1, 12))
        for event in (f.json for f in frames if f.event != "HEARTBEAT"):
            parent.append(event)
            for child in (
                (event["data"].get("children") or [])
                if event["eventType"] == ("SUBAGENT_RUN_STARTED")
                else []
            ):
                # Each child's stream is followed live, with its own disconnects.
                children[child["requestId"]] = asyncio.create_task(
                    follow_with_cuts(api, child["requestId"], random.Random(child["requestId"]))
                )
    logs = {child: await task for child, task in children.items()}

    assert parent[-1]["eventType"] == "MESSAGE_COMPLETED"
    for rid_, log in [(rid, parent), *logs.items()]:
        assert [e["seq"] for e in log] == list(range(len(log))), "contiguous, nothing repeated"
        assert [json.dumps(e, separators=(",", ":")) for e in log] == await stored(runtime, rid_)
        assert len(terminals(log)) == 1
    [announced] = [e["data"] for e in parent if e["eventType"] == "SUBAGENT_RUN_STARTED"]
    assert [c["agentId"] for c in announced["children"]] == ["notes.txt", "data.csv", "README.md"]
    answer = text_of(parent)
    for child in announced["children"]:
        log = logs[child["requestId"]]
        assert log[-1]["eventType"] == "MESSAGE_COMPLETED"
        child_answer = text_of(log)
        # What the parent says of the file comes from its child's answer.
        finding = next(line for line in child_answer.splitlines() if " has " in line)
        assert finding.startswith(f"- `{child['agentId']}` has ")
        assert finding in answer
        final = subagent_events(parent, child["requestId"])[-1]
        assert final["status"] == "completed"
        assert final["answerPreview"] == child_answer[:2000]
        status = await api.status(child["requestId"])
        assert status["parentRequestId"] == rid and status["status"] == "completed"
        assert status["sessionId"] == started["sessionId"]
    [done] = [e["data"] for e in parent if e["eventType"] == "SUBAGENT_RUN_COMPLETED"]
    assert done["status"] == "completed"
    # The children's tokens count in the parent's, each reported with the child it is of.
    usages = [e["data"] for e in parent if e["eventType"] == "TOKEN_USAGE"]
    own = sum(
        u["inputTokens"] + u["outputTokens"] for u in usages if not u.get("subagentRequestId")
    )
    of_children = {u["subagentRequestId"]: u for u in usages if u.get("subagentRequestId")}
    assert set(of_children) == set(logs)
    for child, log in logs.items():
        total = log[-1]["data"]["usage"]["totalTokens"]
        assert of_children[child]["inputTokens"] + of_children[child]["outputTokens"] == total
    children_total = sum(log[-1]["data"]["usage"]["totalTokens"] for log in logs.values())
    assert parent[-1]["data"]["usage"]["totalTokens"] == own + children_total > own

    tree = (
        await api.http.get("neta/api/sessions/tree", params={"sessionId": started["sessionId"]})
    ).json()
    entries = {e["entryId"]: e for e in tree["entries"]}
    subagents = [e for e in tree["entries"] if e["role"] == "subagent"]
    assert [e["childRequestId"] for e in subagents] == [
        c["requestId"] for c in announced["children"]
    ]
    delegated = entries[subagents[0]["parentId"]]
    assert [c["toolName"] for c in delegated["toolCalls"]] == ["delegate"]
    for entry in subagents:
        assert entry["parentId"] == delegated["entryId"] and entry["status"] == "complete"
        assert entry["message"]["content"] == text_of(logs[entry["childRequestId"]])
        [first] = [e for e in tree["entries"] if e["parentId"] == entry["entryId"]]
        assert first["role"] == "user" and first["requestId"] == entry["childRequestId"]
    # The conversation goes on from the parent's answer: no child entry is on its path.
    assert tree["leafEntryId"] == tree["activePath"][-1]
    assert {entries[e]["requestId"] for e in tree["activePath"]} == {rid}


async def test_children_run_a_few_at_a_time_and_may_not_delegate_further(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.config.subagent_concurrency = 2
    worker = ScriptedModel([ScriptedTurn(text=f"answer {i}", delay=0.01) for i in range(4)])
    runtime.models.register("worker", worker)
    tasks = [{"task": f"part {i}", "model": "worker"} for i in range(4)]
    delegating(runtime, "boss", tasks, "all done")
    rid = (await api.start("do four parts", model="boss"))["requestId"]
    events = await api.segment(rid)
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
    running: set[str] = set()
    most = 0
    for event in events:
        data = event["data"]
        if event["eventType"] == "SUBAGENT_RUN_STARTED":
            assert [c["status"] for c in data["children"]] == ["running"] * 2 + ["queued"] * 2
            running = {c["requestId"] for c in data["children"][:2]}
        elif event["eventType"] == "SUBAGENT_EVENT":
            (running.add if data["status"] == "running" else running.discard)(
                data["childRequestId"]
            )
            most = max(most, len(running))
    assert most == 2
    assert "delegate" in [t.name for t in runtime.models.resolve("boss").requests[0].tools]  # type: ignore[attr-defined]
    for request in worker.requests:
        assert "delegate" not in [t.name for t in request.tools], "depth 1: children do not"
    result = next(e for e in events if e["eventType"] == "TOOL_COMPLETED")["data"]["output"]
    assert "4 of 4 completed" in result
    assert all(f"answer {i}" in result for i in range(4))


def slow_children(runtime: Runtime, count: int, words: int = 3000) -> list[dict[str, Any]]:
    runtime.models.register(
        "slow", lambda: ScriptedModel([ScriptedTurn(text=["w "] * words, delay=0.005)])
    )
    return [{"task": f"part {i}", "model": "slow", "name": f"part {i}"} for i in range(count)]


def all_writing(count: int) -> Callable[[Events], bool]:
    def check(events: Events) -> bool:
        writing = {
            e["data"]["childRequestId"]
            for e in events
            if e["eventType"] == "SUBAGENT_EVENT"
            and e["data"].get("message") == "Writing its answer"
        }
        return len(writing) == count

    return check


async def test_terminating_the_parent_cancels_every_child(api: ApiClient, runtime: Runtime) -> None:
    delegating(runtime, "boss", slow_children(runtime, 3), "never")
    rid = (await api.start("do three parts", model="boss"))["requestId"]
    seen = await watch(api, rid, all_writing(3))
    [announced] = [e["data"] for e in seen if e["eventType"] == "SUBAGENT_RUN_STARTED"]
    response = await api.post("terminateTask", {"requestId": rid})
    assert response.status_code == 200, response.text
    parent = await api.segment(rid)
    assert terminals(parent) == [parent[-1]]
    assert parent[-1]["eventType"] == "MESSAGE_FAILED"
    assert parent[-1]["data"]["errorCode"] == "USER_CANCELLED"
    for child in announced["children"]:
        log = [json.loads(p) for p in await stored(runtime, child["requestId"])]
        [end] = terminals(log)
        assert end["eventType"] == "MESSAGE_FAILED" and end["data"]["errorCode"] == "USER_CANCELLED"
        assert (await api.status(child["requestId"]))["status"] == "failed"
        assert subagent_events(parent, child["requestId"])[-1]["errorCode"] == "USER_CANCELLED"
    [done] = [e["data"] for e in parent if e["eventType"] == "SUBAGENT_RUN_COMPLETED"]
    assert done["status"] == "cancelled"
    assert not any(runtime.is_active(c["requestId"]) for c in announced["children"])


async def test_a_parent_that_times_out_stops_its_children(api: ApiClient, runtime: Runtime) -> None:
    delegating(runtime, "boss", slow_children(runtime, 2, words=20_000), "never")
    runtime.config.task_timeout = 3.0
    rid = (await api.start("do two parts", model="boss"))["requestId"]
    parent = await api.segment(rid)
    assert parent[-1]["data"]["errorCode"] == "TASK_TIMEOUT"
    [announced] = [e["data"] for e in parent if e["eventType"] == "SUBAGENT_RUN_STARTED"]
    for child in announced["children"]:
        [end] = terminals([json.loads(p) for p in await stored(runtime, child["requestId"])])
        assert end["data"]["errorCode"] == "TASK_TIMEOUT"


def asking_child(runtime: Runtime, root: Path) -> None:
    (root / "data.txt").write_text("forty-two")
    runtime.config.permission_rules = [PermissionRule(tool="read_file", action="ask")]
    read = ScriptedToolCall("read_file", {"path": "data.txt"})
    runtime.models.register(
        "asker",
        ScriptedModel([ScriptedTurn(tool_calls=[read]), ScriptedTurn(text="it says forty-two")]),
    )
    delegating(runtime, "boss", [{"task": "read data.txt", "model": "asker"}], "the answer is 42")


def waiting_child(events: Events) -> bool:
    return any(
        e["eventType"] == "SUBAGENT_EVENT" and e["data"].get("status") == "suspended"
        for e in events
    )


async def test_a_childs_permission_ask_is_approved_through_the_parent_over_rest(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    asking_child(runtime, jp_root_dir)
    rid = (await api.start("read it through a sub-agent", model="boss"))["requestId"]
    seen = await watch(api, rid, waiting_child)
    waiting = [e["data"] for e in seen if e["eventType"] == "SUBAGENT_EVENT"][-1]
    ask = waiting["ask"]
    assert ask["type"] == "permission_ask" and ask["toolName"] == "read_file"
    child = waiting["childRequestId"]
    assert (await api.status(child))["pendingAsk"]["askId"] == ask["askId"]
    assert (await api.status(rid))["status"] == "running", "the parent waits for its child"
    response = await api.resume(child, askId=ask["askId"], approved=True)
    assert response.status_code == 200, response.text
    parent = await api.segment(rid)
    assert parent[-1]["eventType"] == "MESSAGE_COMPLETED"
    after = subagent_events(parent, child)
    assert after[-1]["status"] == "completed" and "forty-two" in after[-1]["answerPreview"]
    assert [e["data"].get("ask") for e in parent if e["eventType"] == "SUBAGENT_EVENT"][-1] is None
    log = [json.loads(p) for p in await stored(runtime, child)]
    kinds = [e["eventType"] for e in log]
    assert kinds.count("MESSAGE_SUSPENDED") == 1 and kinds[-1] == "MESSAGE_COMPLETED"
    assert "PERMISSION_ASK_RESOLVED" in kinds


async def test_a_childs_permission_ask_is_approved_over_a_websocket_that_follows_the_parent(
    api: ApiClient,
    runtime: Runtime,
    jp_root_dir: Path,
    server_url: str,
    jp_auth_header: dict[str, str],
) -> None:
    asking_child(runtime, jp_root_dir)
    rid = (await api.start("read it through a sub-agent", model="boss"))["requestId"]
    ws_url = server_url.replace("http://", "ws://") + "neta/ws"
    received: Events = []
    async with websockets.connect(ws_url, additional_headers=jp_auth_header) as ws:
        await ws.send(json.dumps({"type": "subscribe", "requestId": rid}))
        assert json.loads(await ws.recv())["type"] == "subscribed"
        answered = False
        while not (received and received[-1]["eventType"] == "MESSAGE_COMPLETED"):
            frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
            if isinstance(frame, dict):
                assert frame["type"] == "ack" and frame["status"] == "running", frame
                continue
            received += [e for e in frame if e["eventType"] != "HEARTBEAT"]
            if waiting_child(received) and not answered:
                waiting = [e["data"] for e in received if e["eventType"] == "SUBAGENT_EVENT"][-1]
                resume = {
                    "type": "resume",
                    "requestId": waiting["childRequestId"],
                    "askId": waiting["ask"]["askId"],
                    "approved": True,
                }
                await ws.send(json.dumps(resume))
                answered = True
    assert [e["seq"] for e in received] == list(range(len(received)))
    result = next(e for e in received if e["eventType"] == "TOOL_COMPLETED")["data"]["output"]
    assert "it says forty-two" in result


async def test_sub_agents_delegate_further_when_the_depth_allows(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.config.subagent_depth = 2
    worker = ScriptedModel([ScriptedTurn(text="done")])
    runtime.models.register("worker", worker)
    delegating(runtime, "boss", [{"task": "part", "model": "worker"}], "all done")
    rid = (await api.start("do a part", model="boss"))["requestId"]
    assert (await api.segment(rid))[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert "delegate" in [t.name for t in worker.requests[0].tools]


async def test_a_sub_agent_gets_no_tool_and_no_step_its_run_was_not_given(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.models.register("worker", ScriptedModel([ScriptedTurn(text="part done")]))
    limited = ["read_file", "list_files", "delegate"]
    wider = [{"task": "run code", "model": "worker", "tools": ["python", "read_file"]}]
    delegating(runtime, "boss", wider, "all done")
    started = await api.start("split it", model="boss", tools=limited, approve="auto")
    events = await api.segment(started["requestId"])
    [failed] = [e["data"] for e in events if e["eventType"] == "TOOL_FAILED"]
    assert "may use only tools this run may use" in failed["errorMessage"], failed
    assert "python" in failed["errorMessage"]
    assert not await runtime.runs.find(parent_request_id=started["requestId"])

    narrower = [{"task": "read", "model": "worker", "tools": ["read_file"], "max_steps": 50}]
    delegating(runtime, "boss2", narrower, "all done")
    started = await api.start("split it", model="boss2", tools=limited, maxSteps=3)
    ended = (await api.segment(started["requestId"]))[-1]
    assert ended["eventType"] == "MESSAGE_COMPLETED", ended
    [child] = await runtime.runs.find(parent_request_id=started["requestId"])
    assert child.options.tools == ["read_file"] and child.options.max_steps == 3
    assert child.options.approve == "ask", "the run's approve mode, whatever the task says"
