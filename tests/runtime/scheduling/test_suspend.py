"""Pausing a run (suspendTask, the WebSocket ``suspend``) and reclaiming runs nobody answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
import websockets
from httpx_sse import aconnect_sse

from neta_jupyter.client import Conflict, HttpTransport, RunClient, RunRequest
from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import ToolContext, tool
from tests.helpers import TERMINAL, ApiClient, types

PATIENCE = 60.0
"""A generous bound on waits that only have to end (nothing here measures a speed)."""


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"permission_rules": [{"tool": "read_file", "action": "ask"}]}


@tool(readonly=True)
async def wait_for_file(ctx: ToolContext, name: str) -> str:
    """Wait until the file ``name`` exists under the root, then say so."""
    path = Path(ctx.root_dir) / name
    while True:  # a file appears without an event to wait on
        if path.exists():
            return f"{name} is there"
        await asyncio.sleep(0.02)


def gated(runtime: Runtime) -> ScriptedModel:
    """A model whose first step calls a tool that waits for the file ``gate``."""
    runtime.tools.register(wait_for_file)
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ScriptedToolCall("wait_for_file", {"name": "gate"})]),
            ScriptedTurn(text="The gate opened."),
        ]
    )
    runtime.models.register("gated", model)
    return model


async def until_event(api: ApiClient, request_id: str, event_type: str) -> list[dict[str, Any]]:
    """The stream's envelopes up to the first ``event_type`` (the connection is then dropped)."""
    seen: list[dict[str, Any]] = []
    params = {"requestId": request_id}
    async with (
        asyncio.timeout(PATIENCE),
        aconnect_sse(api.http, "GET", "neta/api/agent/run/stream", params=params) as src,
    ):
        async for sse in src.aiter_sse():
            if sse.event == "HEARTBEAT":
                continue
            seen.append(json.loads(sse.data))
            if sse.event == event_type:
                return seen
    raise AssertionError(f"the stream ended without {event_type}: {types(seen)}")


async def reclaimed(api: ApiClient, request_id: str, after: int) -> list[dict[str, Any]]:
    """The segment after ``after`` once the suspended run has been stopped (a stream of a run
    at rest answers 204, so its status is watched first)."""
    async with asyncio.timeout(PATIENCE):
        while True:
            if (await api.status(request_id))["status"] != "suspended":
                return await api.segment(request_id, after)
            await asyncio.sleep(0.1)


def terminal(events: list[dict[str, Any]]) -> list[str]:
    return [name for name in types(events) if name in TERMINAL]


async def test_suspend_task_pauses_after_the_running_tool_and_resume_completes(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    model = gated(runtime)
    rid = (await api.start("wait for the gate", model="gated"))["requestId"]
    await until_event(api, rid, "TOOL_START")
    paused = await api.post("suspendTask", {"requestId": rid})
    assert paused.status_code == 200, paused.text
    assert paused.json()["status"] == "running", "the run goes on to its next step boundary"
    (jp_root_dir / "gate").write_text("")
    async with asyncio.timeout(PATIENCE):
        first = await api.segment(rid)
    names = types(first)
    assert terminal(first) == ["MESSAGE_SUSPENDED"], "one suspend event ends the segment"
    assert names.index("TOOL_COMPLETED") < names.index("MESSAGE_SUSPENDED")
    completed = next(e for e in first if e["eventType"] == "TOOL_COMPLETED")
    assert completed["data"]["output"] == "gate is there", "the running tool finished first"
    reason = first[-1]["data"]["suspendReason"]
    assert reason["type"] == "MANUAL_SUSPEND" and reason["message"]
    assert model.remaining == 1, "the model was not asked again before the pause"
    summary = await api.status(rid)
    assert summary["status"] == "suspended"
    # The default time to be answered is a day: the run says until when it waits.
    assert time.time() + 3600 < summary["suspendDeadline"] < time.time() + 2 * 86_400

    resumed = await api.resume(rid)
    assert resumed.status_code == 200, resumed.text
    async with asyncio.timeout(PATIENCE):
        second = await api.segment(rid, first[-1]["seq"])
    assert terminal(second) == ["MESSAGE_COMPLETED"]
    assert all(e["requestId"] == rid for e in second)
    text = "".join(e["data"]["text"] for e in second if e["eventType"] == "TEXT_DELTA")
    assert text == "The gate opened."
    assert "TOOL_START" not in types(second), "the tool is not run again"
    log = first + second
    assert [e["seq"] for e in log] == list(range(len(log)))
    assert (await api.status(rid))["suspendDeadline"] is None
    model.assert_complete()


async def test_suspend_of_a_run_that_is_not_running_is_refused(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    done = (await api.start("hello"))["requestId"]
    await api.segment(done)
    refused = await api.post("suspendTask", {"requestId": done})
    assert refused.status_code == 409, refused.text
    assert refused.json()["errCode"] == "RUN_NOT_RUNNING"

    (jp_root_dir / "data.txt").write_text("x")
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "data.txt"})])]
    )
    runtime.models.register("asks", model)
    asking = (await api.start("read data.txt", model="asks", sessionName="other"))["requestId"]
    assert (await api.segment(asking))[-1]["data"]["suspendReason"]["type"] == "PERMISSION_ASK"
    again = await api.post("suspendTask", {"requestId": asking})
    assert again.status_code == 409 and again.json()["errCode"] == "RUN_NOT_RUNNING"

    missing = await api.post("suspendTask", {"requestId": "r_nope"})
    assert missing.status_code == 404 and missing.json()["errCode"] == "RUN_NOT_FOUND"


async def test_websocket_suspend_frame(
    api: ApiClient,
    runtime: Runtime,
    server_url: str,
    jp_auth_header: dict[str, str],
    jp_root_dir: Path,
) -> None:
    gated(runtime)
    rid = (await api.start("wait for the gate", model="gated"))["requestId"]
    await until_event(api, rid, "TOOL_START")
    ws_url = server_url.replace("http://", "ws://") + "neta/ws"
    async with (
        asyncio.timeout(PATIENCE),
        websockets.connect(ws_url, additional_headers=jp_auth_header) as ws,
    ):
        await ws.send(json.dumps({"type": "suspend", "id": 1}))
        bad = json.loads(await ws.recv())
        assert bad["type"] == "error" and bad["errCode"] == "INVALID_FIELDS"
        assert bad["replyTo"] == 1 and "requestId" in bad["message"]
        await ws.send(json.dumps({"type": "suspend", "requestId": "r_nope"}))
        unknown = json.loads(await ws.recv())
        assert unknown["type"] == "error" and unknown["errCode"] == "RUN_NOT_FOUND"
        await ws.send(json.dumps({"type": "suspend", "requestId": rid, "id": 2}))
        ack = json.loads(await ws.recv())
        assert ack == {
            "type": "ack",
            "action": "suspend",
            "requestId": rid,
            "status": "running",
            "replyTo": 2,
        }
        (jp_root_dir / "gate").write_text("")
        await ws.send(json.dumps({"type": "subscribe", "requestId": rid}))
        events: list[dict[str, Any]] = []
        while not (events and events[-1]["eventType"] in TERMINAL):
            frame = json.loads(await ws.recv())
            if isinstance(frame, list):
                events += [e for e in frame if e["eventType"] != "HEARTBEAT"]
        await ws.send(json.dumps({"type": "ping"}))
        assert json.loads(await ws.recv()) == {"type": "pong"}, "the socket stays up"
    assert terminal(events) == ["MESSAGE_SUSPENDED"]
    assert events[-1]["data"]["suspendReason"]["type"] == "MANUAL_SUSPEND"


@pytest.mark.parametrize(
    ("call", "waits_for"),
    [
        (ScriptedToolCall("read_file", {"path": "data.txt"}), "PERMISSION_ASK"),
        (ScriptedToolCall("clarify", {"question": "Which year?"}), "CLARIFY_REQUEST"),
    ],
)
async def test_a_run_nobody_answers_is_reclaimed_with_user_no_response(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, call: ScriptedToolCall, waits_for: str
) -> None:
    (jp_root_dir / "data.txt").write_text("x")
    runtime.models.register("asks", ScriptedModel([ScriptedTurn(tool_calls=[call])]))
    rid = (await api.start("read data.txt", model="asks", suspendTimeout=1))["requestId"]
    first = await api.segment(rid)
    assert first[-1]["data"]["suspendReason"]["type"] == waits_for
    second = await reclaimed(api, rid, first[-1]["seq"])
    assert terminal(second) == ["MESSAGE_FAILED"]
    failed = second[-1]["data"]
    assert failed["errorCode"] == "USER_NO_RESPONSE" and failed["recoverable"] is False
    assert "suspend timeout" in failed["errorMessage"]
    summary = await api.status(rid)
    assert summary["status"] == "failed" and summary["pendingAsk"] is None
    retry = await api.post("retryTask", {"requestId": rid})
    assert retry.status_code == 409 and retry.json()["errCode"] == "RUN_NOT_RETRYABLE"
    late = await api.resume(rid, approved=True, answer="2024")
    assert late.status_code == 409 and late.json()["errCode"] == "RUN_NOT_SUSPENDED"


async def test_a_paused_run_left_waiting_is_reclaimed_too(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    gated(runtime)
    body = {"model": "gated", "suspendTimeout": 1}
    rid = (await api.start("wait for the gate", **body))["requestId"]
    await until_event(api, rid, "TOOL_START")
    assert (await api.post("suspendTask", {"requestId": rid})).status_code == 200
    (jp_root_dir / "gate").write_text("")
    async with asyncio.timeout(PATIENCE):
        first = await api.segment(rid)
    assert first[-1]["data"]["suspendReason"]["type"] == "MANUAL_SUSPEND"
    second = await reclaimed(api, rid, first[-1]["seq"])
    assert terminal(second) == ["MESSAGE_FAILED"]
    assert second[-1]["data"]["errorCode"] == "USER_NO_RESPONSE"


async def test_a_pause_comes_between_two_tool_calls_of_one_reply(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    runtime.tools.register(wait_for_file)
    calls = [
        ScriptedToolCall("wait_for_file", {"name": "first"}, "c1"),
        ScriptedToolCall("wait_for_file", {"name": "second"}, "c2"),
    ]
    model = ScriptedModel([ScriptedTurn(tool_calls=calls), ScriptedTurn(text="Both arrived.")])
    runtime.models.register("two", model)
    rid = (await api.start("wait for both", model="two"))["requestId"]
    await until_event(api, rid, "TOOL_START")
    assert (await api.post("suspendTask", {"requestId": rid})).status_code == 200
    (jp_root_dir / "first").write_text("")
    async with asyncio.timeout(PATIENCE):
        first = await api.segment(rid)
    assert first[-1]["data"]["suspendReason"]["type"] == "MANUAL_SUSPEND"
    started = [e["data"]["toolCallId"] for e in first if e["eventType"] == "TOOL_START"]
    done = [e["data"]["toolCallId"] for e in first if e["eventType"] == "TOOL_COMPLETED"]
    assert started == done == ["c1"], "the second call waits for the resume"

    (jp_root_dir / "second").write_text("")
    assert (await api.resume(rid)).status_code == 200
    async with asyncio.timeout(PATIENCE):
        second = await api.segment(rid, first[-1]["seq"])
    assert [e["data"]["toolCallId"] for e in second if e["eventType"] == "TOOL_START"] == ["c2"]
    assert terminal(second) == ["MESSAGE_COMPLETED"]
    tool_results = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [m.content for m in tool_results] == ["first is there", "second is there"]


async def test_a_paused_sub_agent_shows_paused_in_its_parent_and_resumes(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    gated(runtime)
    call = ScriptedToolCall("delegate", {"tasks": [{"task": "wait", "model": "gated"}]}, "d1")
    boss = ScriptedModel([ScriptedTurn(tool_calls=[call]), ScriptedTurn(text="All done.")])
    runtime.models.register("boss", boss)
    parent = (await api.start("delegate the wait", model="boss"))["requestId"]
    started = await until_event(api, parent, "SUBAGENT_RUN_STARTED")
    child = started[-1]["data"]["children"][0]["requestId"]
    await until_event(api, child, "TOOL_START")
    assert (await api.post("suspendTask", {"requestId": child})).status_code == 200
    (jp_root_dir / "gate").write_text("")
    async with asyncio.timeout(PATIENCE):
        paused = await api.segment(child)
    assert paused[-1]["data"]["suspendReason"]["type"] == "MANUAL_SUSPEND"

    def told(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            e["data"]
            for e in events
            if e["eventType"] == "SUBAGENT_EVENT" and e["data"]["childRequestId"] == child
        ]

    seen: list[dict[str, Any]] = []
    params = {"requestId": parent}
    async with (
        asyncio.timeout(PATIENCE),
        aconnect_sse(api.http, "GET", "neta/api/agent/run/stream", params=params) as src,
    ):
        async for sse in src.aiter_sse():
            if sse.event != "HEARTBEAT":
                seen.append(json.loads(sse.data))
            if any(d["status"] == "suspended" for d in told(seen)):
                break
    news = next(d for d in told(seen) if d["status"] == "suspended")
    assert news["message"] == "Paused: continues when resumed"
    assert (await api.status(parent))["status"] == "running", "the parent waits for it"

    assert (await api.resume(child)).status_code == 200
    async with asyncio.timeout(PATIENCE):
        whole = await api.segment(parent)
    assert terminal(whole) == ["MESSAGE_COMPLETED"]
    assert "All done." in "".join(
        e["data"]["text"] for e in whole if e["eventType"] == "TEXT_DELTA"
    )


async def test_the_client_pauses_and_resumes_over_http(
    runtime: Runtime, server_url: str, jp_auth_header: dict[str, str], jp_root_dir: Path
) -> None:
    gated(runtime)
    client = RunClient(HttpTransport(server_url, headers=jp_auth_header, trust_env=False))
    try:
        started = await client.start(RunRequest(content="wait for the gate", model="gated"))
        rid = started.request_id
        async with contextlib.aclosing(client.follow(rid)) as events:
            async for item in events:
                if item.event_type == "TOOL_START":
                    break
        assert await client.suspend(rid) == "running"
        (jp_root_dir / "gate").write_text("")
        async with asyncio.timeout(PATIENCE):
            first = [item.envelope() async for item in client.follow(rid)]
        assert first[-1]["data"]["suspendReason"]["type"] == "MANUAL_SUSPEND"
        assert await client.resume(rid) == "running"
        async with asyncio.timeout(PATIENCE):
            rest = [item.envelope() async for item in client.follow(rid, first[-1]["seq"])]
        assert terminal(rest) == ["MESSAGE_COMPLETED"]
        with pytest.raises(Conflict) as refused:
            await client.suspend(rid)
        assert refused.value.code == "RUN_NOT_RUNNING"
    finally:
        await client.aclose()
