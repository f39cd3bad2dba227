"""Steering a crew: retries and escalations decided from a second client, pause, resume, stop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import websockets

from neta_jupyter.providers import ProviderInvalidRequest, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import PermissionRule
from tests.crew_helpers import (
    Events,
    agent,
    control,
    ended,
    last_task,
    prompts,
    start,
    task_statuses,
    until,
)
from tests.helpers import ApiClient, stored


def _failing() -> ScriptedTurn:
    return ScriptedTurn(error=ProviderInvalidRequest("the model refused the request"))


def _graph(**tasks: dict[str, Any]) -> dict[str, Any]:
    names = {t["agent"] for t in tasks.values()}
    return {
        "agents": [{"name": n, "model": f"m-{n}"} for n in sorted(names)],
        "tasks": [{"id": task_id, **spec} for task_id, spec in tasks.items()],
        "max_parallel": 2,
    }


async def _watch(api: ApiClient, rid: str, stop: Any) -> Events:
    """The crew's stream from its start until ``stop(events)`` holds (or the crew ends)."""
    from httpx_sse import aconnect_sse

    out: Events = []
    params = {"requestId": rid}
    async with aconnect_sse(api.http, "GET", "neta/api/crew/stream", params=params) as src:
        async for event in src.aiter_sse():
            if event.event != "HEARTBEAT":
                out.append(json.loads(event.data))
            if stop(out) or ended(out):
                return out
    return out


def _open_escalations(events: Events) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for e in events:
        if e["eventType"] == "crew:escalation":
            found[e["data"]["escalationId"]] = e["data"]
    return {k: v for k, v in found.items() if v["state"] == "open"}


async def test_retries_then_an_escalation_answered_from_a_second_client(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    agent(runtime, "flaky", _failing(), _failing(), ScriptedTurn(text="flaky ok"))
    agent(runtime, "broken", _failing())
    final = agent(runtime, "final", ScriptedTurn(text="combined"))
    rid = await start(
        api,
        _graph(
            flaky={"agent": "flaky", "description": "try it", "retries": 1},
            broken={"agent": "broken", "description": "never works"},
            final={
                "agent": "final",
                "description": "Combine {flaky} and {broken}",
                "depends_on": ["flaky", "broken"],
            },
        ),
    )
    # The first client watches until both failed tasks wait for a decision.
    seen = await _watch(api, rid, lambda events: len(_open_escalations(events)) == 2)
    escalations = {e["taskId"]: e for e in _open_escalations(seen).values()}
    assert {e["kind"] for e in escalations.values()} == {"task_failed"}
    assert task_statuses(seen, "flaky")[-3:] == ["retrying", "running", "failed"]
    assert last_task(seen, "flaky")["attempt"] == 2
    waiting = await until(api, rid, lambda s: s["status"] == "waiting")
    assert len(waiting["escalations"]) == 2 and waiting["counts"]["pending"] == 1
    watcher = asyncio.create_task(_watch(api, rid, lambda events: False))
    # The second client decides over the WebSocket: retry one, skip the other with an output.
    url = server_url.replace("http://", "ws://") + "neta/crew"
    async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
        for task_id, fields in (
            ("flaky", {"decision": "retry"}),
            ("broken", {"decision": "skip", "output": "no data for broken"}),
        ):
            frame = {
                "type": "crew:control",
                "requestId": rid,
                "action": "decide",
                "escalationId": escalations[task_id]["escalationId"],
                **fields,
            }
            await ws.send(json.dumps(frame))
            reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert reply["type"] == "crew:control" and reply["applied"] is True, reply
    # The same decision again, from a third client: applied once only.
    again = await control(
        api,
        rid,
        "decide",
        escalationId=escalations["flaky"]["escalationId"],
        decision="retry",
    )
    assert again["applied"] is False
    events = seen + await asyncio.wait_for(watcher, 60)
    assert events[-1]["data"]["status"] == "completed"
    assert task_statuses(events, "flaky")[-2:] == ["running", "completed"]
    assert last_task(events, "broken")["status"] == "skipped"
    assert prompts(final) == ["Combine flaky ok and no data for broken"]
    resolved = [
        e["data"]
        for e in events
        if e["eventType"] == "crew:escalation" and e["data"]["state"] == "resolved"
    ]
    assert sorted(r["decision"] for r in resolved) == ["retry", "skip"]


def _slow_step(done: str) -> list[ScriptedTurn]:
    """A reply with a tool call (a step boundary after it), then the answer."""
    todo = ScriptedToolCall("todo", {"items": [{"content": "look"}]})
    return [ScriptedTurn(text="working", tool_calls=[todo], delay=0.1), ScriptedTurn(text=done)]


async def test_pause_suspends_running_tasks_and_starts_none_then_resume_finishes(
    api: ApiClient, runtime: Runtime
) -> None:
    agent(runtime, "left", *_slow_step("left done"))
    agent(runtime, "right", *_slow_step("right done"))
    agent(runtime, "last", ScriptedTurn(text="all done"))
    rid = await start(
        api,
        _graph(
            left={"agent": "left", "description": "left side"},
            right={"agent": "right", "description": "right side"},
            last={
                "agent": "last",
                "description": "{left} {right}",
                "depends_on": ["left", "right"],
            },
        ),
    )
    await until(api, rid, lambda s: s["counts"].get("running") == 2)
    paused = await control(api, rid, "pause")
    assert paused["status"] == "paused" and paused["applied"] is True
    assert (await control(api, rid, "pause"))["applied"] is False
    body = await until(api, rid, lambda s: s["counts"].get("ready") == 2)
    children = [t["childRequestId"] for t in body["tasks"] if t["taskId"] in ("left", "right")]
    for child in children:
        run = await runtime.runs.get(child)
        assert run is not None and run.status == "suspended"
        assert any("MANUAL_SUSPEND" in e for e in await stored(runtime, child))
    await asyncio.sleep(0.3)
    body = await until(api, rid, lambda s: True)
    assert {t["taskId"]: t["status"] for t in body["tasks"]}["last"] == "pending"
    assert body["status"] == "paused"
    resumed = await control(api, rid, "resume")
    assert resumed["status"] == "running"
    body = await until(api, rid, lambda s: s["status"] == "completed")
    assert body["counts"] == {"completed": 3}
    for child in children:  # the same runs went on: no task started over
        run = await runtime.runs.get(child)
        assert run is not None and run.status == "completed"


async def test_stop_ends_every_task_once_with_user_cancelled(
    api: ApiClient, runtime: Runtime
) -> None:
    agent(runtime, "left", *_slow_step("left done"))
    agent(runtime, "right", *_slow_step("right done"))
    agent(runtime, "last", ScriptedTurn(text="all done"))
    rid = await start(
        api,
        _graph(
            left={"agent": "left", "description": "left side"},
            right={"agent": "right", "description": "right side"},
            last={
                "agent": "last",
                "description": "{left} {right}",
                "depends_on": ["left", "right"],
            },
        ),
    )
    body = await until(api, rid, lambda s: s["counts"].get("running") == 2)
    children = [t["childRequestId"] for t in body["tasks"] if t["childRequestId"]]
    stopped, twice = await asyncio.gather(control(api, rid, "stop"), control(api, rid, "stop"))
    assert stopped["status"] == twice["status"] == "stopped"
    assert sorted([stopped["applied"], twice["applied"]]) == [False, True]
    events = [json.loads(e) for e in await stored(runtime, rid)]
    for task_id in ("left", "right", "last"):
        ends = [
            e["data"]
            for e in events
            if e["eventType"] == "crew:task:status"
            and e["data"]["taskId"] == task_id
            and e["data"]["status"] == "failed"
        ]
        assert len(ends) == 1 and ends[0]["errorCode"] == "USER_CANCELLED", task_id
    for child in children:
        log = [json.loads(e) for e in await stored(runtime, child)]
        terminal = [e for e in log if e["eventType"] == "MESSAGE_FAILED"]
        assert len(terminal) == 1 and terminal[0]["data"]["errorCode"] == "USER_CANCELLED"
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert (await control(api, rid, "stop"))["applied"] is False
    response = await api.http.post(
        "neta/api/crew/control", json={"requestId": rid, "action": "resume"}
    )
    assert response.status_code == 409 and response.json()["errCode"] == "CREW_ENDED"


async def _decide(api: ApiClient, rid: str, kind: str, **fields: Any) -> dict[str, Any]:
    """Wait for the crew's open escalation of ``kind``, then decide it."""
    body = await until(api, rid, lambda s: any(e["kind"] == kind for e in s["escalations"]))
    [escalation] = [e for e in body["escalations"] if e["kind"] == kind]
    return await control(api, rid, "decide", escalationId=escalation["escalationId"], **fields)


async def test_approval_gates_and_the_escalate_tool_wait_for_a_person(
    api: ApiClient, runtime: Runtime
) -> None:
    ask = ScriptedToolCall("escalate", {"reason": "two tables match", "question": "which one?"})
    planner = agent(
        runtime, "planner", ScriptedTurn(tool_calls=[ask]), ScriptedTurn(text="plan: sales")
    )
    writer = agent(runtime, "writer", ScriptedTurn(text="long draft"), ScriptedTurn(text="short"))
    rid = await start(
        api,
        _graph(
            plan={"agent": "planner", "description": "plan it", "approval": "before"},
            draft={
                "agent": "writer",
                "description": "draft from {plan}",
                "depends_on": ["plan"],
                "approval": "after",
            },
        ),
    )
    body = await until(api, rid, lambda s: s["status"] == "waiting")
    assert planner.requests == [], "nothing runs before its approval"
    assert {t["taskId"]: t["status"] for t in body["tasks"]}["plan"] == "waiting_approval"
    await _decide(api, rid, "approval_before", decision="answer", approved=True)
    question = await _decide(api, rid, "question", decision="answer", answer="use sales")
    assert question["applied"] is True
    await _decide(api, rid, "approval_after", decision="retry", answer="make it shorter")
    await _decide(api, rid, "approval_after", decision="answer", approved=True)
    body = await until(api, rid, lambda s: s["status"] == "completed")
    tasks = {t["taskId"]: t for t in body["tasks"]}
    assert tasks["draft"]["attempt"] == 2 and len(tasks["draft"]["childRequestIds"]) == 2
    events = [json.loads(e) for e in await stored(runtime, rid)]
    assert last_task(events, "plan")["output"] == "plan: sales"
    assert last_task(events, "draft")["output"] == "short"
    tool_results = [m.content for m in planner.requests[1].messages if m.role == "tool"]
    assert any("use sales" in str(content) for content in tool_results)
    assert prompts(writer)[0] == "draft from plan: sales"
    assert "make it shorter" in prompts(writer)[1]
    kinds = [
        e["data"]["kind"]
        for e in events
        if e["eventType"] == "crew:escalation" and e["data"]["state"] == "open"
    ]
    assert kinds == ["approval_before", "question", "approval_after", "approval_after"]


async def test_a_tasks_permission_ask_is_decided_on_the_crew(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "data.txt").write_text("forty-two")
    runtime.config.permission_rules = [PermissionRule(tool="read_file", action="ask")]
    read = ScriptedToolCall("read_file", {"path": "data.txt"})
    reader = agent(runtime, "reader", ScriptedTurn(tool_calls=[read]), ScriptedTurn(text="42"))
    rid = await start(api, _graph(read={"agent": "reader", "description": "read data.txt"}))
    body = await until(api, rid, lambda s: s["status"] == "waiting")
    [ask] = body["escalations"]
    assert ask["kind"] == "permission" and "read_file" in ask["message"]
    child = await runtime.runs.get(ask["childRequestId"])
    assert child is not None and child.status == "suspended"
    decided = await control(
        api, rid, "decide", escalationId=ask["escalationId"], decision="answer", approved=True
    )
    assert decided["applied"] is True
    body = await until(api, rid, lambda s: s["status"] == "completed")
    assert [t["childRequestIds"] for t in body["tasks"]] == [[ask["childRequestId"]]]
    tool_results = [m.content for m in reader.requests[1].messages if m.role == "tool"]
    assert any("forty-two" in str(content) for content in tool_results)


async def test_unknown_crews_escalations_and_frames_are_refused(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    missing = await api.http.get("neta/api/crew/status", params={"requestId": "crew_nope"})
    assert missing.status_code == 404 and missing.json()["errCode"] == "CREW_NOT_FOUND"
    stream = await api.http.get("neta/api/crew/stream", params={"requestId": "crew_nope"})
    assert stream.status_code == 404
    agent(runtime, "solo", ScriptedTurn(text="done"))
    rid = await start(api, _graph(only={"agent": "solo", "description": "do it"}))
    await until(api, rid, lambda s: s["status"] == "completed")
    response = await api.http.post(
        "neta/api/crew/control",
        json={"requestId": rid, "action": "decide", "escalationId": "esc_x", "decision": "retry"},
    )
    assert response.status_code == 404 and response.json()["errCode"] == "ESCALATION_NOT_FOUND"
    url = server_url.replace("http://", "ws://") + "neta/crew"
    async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
        for frame in ("not json", json.dumps({"type": "chat"}), json.dumps({"type": "subscribe"})):
            await ws.send(frame)
            reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert reply["type"] == "error", reply
        await ws.send(json.dumps({"type": "ping"}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 30)) == {"type": "pong"}


async def test_a_tasks_agent_is_told_its_role_in_the_crew(api: ApiClient, runtime: Runtime) -> None:
    solo = agent(runtime, "solo", ScriptedTurn(text="done"))
    definition = _graph(only={"agent": "solo", "description": "do it"})
    definition["agents"][0]["role"] = "You audit tables."
    rid = await start(api, definition)
    await until(api, rid, lambda s: s["status"] == "completed")
    system = solo.requests[0].system
    assert "You are one agent of a crew" in system and "You audit tables." in system
    assert "sub-agent" not in system
    assert "escalate" in [t.name for t in solo.requests[0].tools]
