"""Reliability: resume fuzz at scale, concurrent runs under random actions, consumers that stall,
an auth matrix over every route, sockets that misbehave. Every loop is bounded in count and time."""

from __future__ import annotations

import asyncio
import json
import random
import socket
from typing import Any

import httpx
import pytest
import websockets

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.server.openapi import ROUTES
from tests.helpers import TERMINAL, ApiClient, stored

BIG = 20_000
DISCONNECTS = 200


def big_run(runtime: Runtime, delay: float = 0.00002) -> None:
    deltas = [f"w{i} " for i in range(BIG)]
    runtime.models.register("big", ScriptedModel([ScriptedTurn(text=deltas, delay=delay)]))


async def test_sse_resume_fuzz_200_disconnects_over_20000_events(
    api: ApiClient, runtime: Runtime
) -> None:
    big_run(runtime)
    rid = (await api.start("go", model="big"))["requestId"]
    rng = random.Random(7)
    received: list[dict[str, Any]] = []
    for _ in range(DISCONNECTS):
        last = received[-1]["seq"] if received else None
        frames = await api.frames(rid, last, limit=rng.randint(1, 2 * BIG // DISCONNECTS))
        received += [f.json for f in frames if f.event != "HEARTBEAT"]
        if received and received[-1]["eventType"] in TERMINAL:
            break
    if received[-1]["eventType"] not in TERMINAL:
        received += await api.segment(rid, received[-1]["seq"])
    assert [e["seq"] for e in received] == list(range(len(received)))
    assert len(received) > BIG
    assert [json.dumps(e, separators=(",", ":")) for e in received] == await stored(runtime, rid)


async def test_websocket_resume_fuzz_200_disconnects_over_20000_events(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    big_run(runtime, delay=0.0001)
    rid = (await api.start("go", model="big"))["requestId"]
    url = server_url.replace("http://", "ws://") + "neta/ws"
    rng = random.Random(8)
    received: list[dict[str, Any]] = []
    disconnects = 0
    for _ in range(4 * DISCONNECTS):
        async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
            frame: dict[str, Any] = {"type": "subscribe", "requestId": rid}
            if received:
                frame["lastEventId"] = received[-1]["seq"]
            await ws.send(json.dumps(frame))
            assert json.loads(await ws.recv())["type"] == "subscribed"
            want = len(received) + rng.randint(1, BIG // DISCONNECTS)
            while len(received) < want:
                batch = json.loads(await ws.recv())
                # The client "crashes" after processing `want` events: the rest of the batch is
                # lost with it, and it resumes from the last event it processed.
                fresh = [e for e in batch if e["eventType"] != "HEARTBEAT"]
                received += fresh[: want - len(received)]
                if received and received[-1]["eventType"] in TERMINAL:
                    break
        if received[-1]["eventType"] in TERMINAL:
            break
        disconnects += 1
    assert disconnects >= DISCONNECTS * 3 // 4, f"only {disconnects} disconnects"
    assert [e["seq"] for e in received] == list(range(len(received)))
    assert [json.dumps(e, separators=(",", ":")) for e in received] == await stored(runtime, rid)


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"permission_rules": [{"tool": "read_file", "action": "ask"}]}


async def test_twenty_concurrent_runs_with_random_actions(api: ApiClient, runtime: Runtime) -> None:
    rng = random.Random(20)
    runs: list[str] = []
    for i in range(20):
        turns = [
            ScriptedTurn(
                text=[f"r{i}t{j} " for j in range(200)],
                delay=0.001,
                tool_calls=[ScriptedToolCall("read_file", {"path": "nope.txt"})],
            ),
            ScriptedTurn(text=[f"r{i}u{j} " for j in range(100)], delay=0.001),
            ScriptedTurn(text="spare turn for supplementary input"),
        ]
        runtime.models.register(f"m{i}", ScriptedModel(turns))
        runs.append((await api.start(f"run {i}", model=f"m{i}", sessionName=f"s{i}"))["requestId"])
    statuses: list[int] = []

    async def drive(rid: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        action = rng.choice(["terminate", "approve", "deny", "input", "none"])
        for _ in range(10):
            segment = await api.segment(rid, events[-1]["seq"] if events else None)
            events += segment
            if action == "input" and len(events) < 50:
                statuses.append(
                    (
                        await api.post(
                            "addSupplementaryInput", {"requestId": rid, "content": "also this"}
                        )
                    ).status_code
                )
            if action == "terminate":
                statuses.append((await api.post("terminateTask", {"requestId": rid})).status_code)
                action = "none"
            last = events[-1]
            if last["eventType"] == "MESSAGE_SUSPENDED":
                ask = [e for e in events if e["eventType"] == "PERMISSION_ASK"][-1]["data"]
                approved = action != "deny"
                statuses.append(
                    (await api.resume(rid, approved=approved, askId=ask["askId"])).status_code
                )
                continue
            if last["eventType"] in ("MESSAGE_COMPLETED", "MESSAGE_FAILED"):
                break
        return events

    results = await asyncio.wait_for(asyncio.gather(*(drive(r) for r in runs)), 120)
    assert all(code < 500 for code in statuses), statuses
    for rid, events in zip(runs, results, strict=True):
        assert [e["seq"] for e in events] == list(range(len(events))), rid
        assert events[-1]["eventType"] in ("MESSAGE_COMPLETED", "MESSAGE_FAILED")
        log = await stored(runtime, rid)
        assert [json.dumps(e, separators=(",", ":")) for e in events] == log, "no event lost"


async def test_consumers_that_stall_do_not_stall_the_server(
    api: ApiClient,
    runtime: Runtime,
    jp_http_port: int,
    jp_base_url: str,
    jp_auth_header: dict[str, str],
) -> None:
    big_run(runtime)
    rid = (await api.start("go", model="big"))["requestId"]
    # A client that asks for the stream and never reads a byte of it.
    stalled = socket.create_connection(("127.0.0.1", jp_http_port))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = (
        f"GET {jp_base_url}neta/api/agent/run/stream?requestId={rid} HTTP/1.1\r\n"
        f"Host: 127.0.0.1\r\nAuthorization: {jp_auth_header['Authorization']}\r\n\r\n"
    )
    stalled.sendall(request.encode())

    # A slow one that reads a little now and then.
    async def slow() -> int:
        frames = await api.frames(rid, limit=50)
        await asyncio.sleep(0.5)
        return len(frames)

    slow_task = asyncio.create_task(slow())
    try:
        # Meanwhile the server answers others promptly and the run itself finishes.
        for _ in range(20):
            response = await asyncio.wait_for(api.http.get("neta/api/models"), 60)
            assert response.status_code == 200
        events = await asyncio.wait_for(api.segment(rid), 60)
        assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
        assert await slow_task == 50
    finally:
        stalled.close()


AUTH_ROUTES = [
    (f"neta/{route.path}" if route.socket else f"neta/api/{route.path}", op.method)
    for route in ROUTES
    for op in route.operations
]


@pytest.mark.parametrize(("path", "method"), AUTH_ROUTES)
async def test_auth_matrix(server_url: str, path: str, method: str, jp_serverapp: Any) -> None:
    url = server_url + path.lstrip("/")
    async with httpx.AsyncClient(trust_env=False) as client:
        assert (await client.request(method.upper(), url, json={})).status_code == 403
        wrong = {"Authorization": "token wrong-token"}
        assert (
            await client.request(method.upper(), url, json={}, headers=wrong)
        ).status_code == 403
        if method == "post":
            token = jp_serverapp.identity_provider.token
            await client.get(server_url + f"lab?token={token}")  # log in: cookie, no XSRF header
            assert any(c.startswith("username-") for c in client.cookies)
            assert (await client.post(url, json={})).status_code == 403


async def test_bad_frames_on_one_socket_leave_others_alone(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    runtime.models.register("slow", ScriptedModel([ScriptedTurn(text=["x "] * 300, delay=0.002)]))
    rid = (await api.start("go", model="slow"))["requestId"]
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with (
        websockets.connect(url, additional_headers=jp_auth_header, max_size=None) as good,
        websockets.connect(url, additional_headers=jp_auth_header, max_size=None) as bad,
    ):
        await good.send(json.dumps({"type": "subscribe", "requestId": rid}))
        assert json.loads(await good.recv())["type"] == "subscribed"
        for frame in ["\x00\xff garbage", "{", json.dumps({"type": 5}), "x" * 1_500_000] * 5:
            await bad.send(frame)
            assert json.loads(await bad.recv())["type"] == "error"
        events: list[dict[str, Any]] = []
        while not events or events[-1]["eventType"] != "MESSAGE_COMPLETED":
            events += json.loads(await asyncio.wait_for(good.recv(), 60))
        assert [e["seq"] for e in events] == list(range(len(events)))
        await bad.send(json.dumps({"type": "ping"}))
        assert json.loads(await bad.recv())["type"] == "pong"
