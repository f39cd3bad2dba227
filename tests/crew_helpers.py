"""Crews in tests: definitions, scripted agents, and readers of the crew's stream (SSE and WS)."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import websockets
from httpx_sse import aconnect_sse

from neta_jupyter.providers import ScriptedModel, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient

Events = list[dict[str, Any]]
ENDED = ("completed", "failed", "stopped")


def four_tasks(**task_fields: Any) -> dict[str, Any]:
    """Two profilers in parallel, a reconciler of both, a writer of the report."""
    agents = [
        {"name": name, "role": f"the {name}", "model": f"m-{name}"}
        for name in ("profiler_a", "profiler_b", "reconciler", "writer")
    ]
    tasks = [
        {"id": "sales", "agent": "profiler_a", "description": "Profile {table_a}"},
        {"id": "stock", "agent": "profiler_b", "description": "Profile {table_b}"},
        {
            "id": "reconcile",
            "agent": "reconciler",
            "description": "Reconcile: {sales} | {stock}",
            "depends_on": ["sales", "stock"],
        },
        {
            "id": "report",
            "agent": "writer",
            "description": "Write the report from {reconcile}",
            "depends_on": ["reconcile"],
        },
    ]
    for task in tasks:
        task.update(task_fields.get(task["id"], {}))
    return {
        "name": "profile-and-report",
        "inputs": {"table_a": {}, "table_b": {"default": "stock.csv"}},
        "agents": agents,
        "tasks": tasks,
        "max_parallel": 2,
    }


def agent(runtime: Runtime, name: str, *turns: ScriptedTurn) -> ScriptedModel:
    """The scripted model the agent ``name`` of :func:`four_tasks` runs on."""
    model = ScriptedModel(list(turns), name=f"m-{name}")
    runtime.models.register(f"m-{name}", model)
    return model


def prompts(model: ScriptedModel) -> list[str]:
    """The user message of each request the model received."""
    return [
        next(str(m.content) for m in request.messages if m.role == "user")
        for request in model.requests
    ]


async def start(api: ApiClient, definition: Any, **inputs: str) -> str:
    response = await api.http.post(
        "neta/api/crew/run", json={"definition": definition, "inputs": inputs}
    )
    assert response.status_code == 200, response.text
    return str(response.json()["requestId"])


async def control(api: ApiClient, rid: str, action: str, **fields: Any) -> dict[str, Any]:
    response = await api.http.post(
        "neta/api/crew/control", json={"requestId": rid, "action": action, **fields}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def ended(events: Events) -> bool:
    return any(e["eventType"] == "crew:run:status" and e["data"]["status"] in ENDED for e in events)


async def sse(
    api: ApiClient, rid: str, after: int | None = None, limit: int | None = None
) -> Events:
    """The crew's stream after ``after`` until it ends (or ``limit`` events)."""
    params: dict[str, Any] = {"requestId": rid}
    if after is not None:
        params["lastEventId"] = after
    out: Events = []
    async with aconnect_sse(api.http, "GET", "neta/api/crew/stream", params=params) as src:
        async for event in src.aiter_sse():
            if event.event != "HEARTBEAT":
                out.append(json.loads(event.data))
            if limit is not None and len(out) >= limit:
                break
    return out


async def sse_with_cuts(api: ApiClient, rid: str, rng: random.Random) -> Events:
    """The crew's whole stream, each connection dropped after a random number of events."""
    received: Events = []
    while not ended(received):
        last = received[-1]["seq"] if received else None
        received += await sse(api, rid, last, limit=rng.randint(1, 8))
    return received


async def ws_with_cuts(url: str, headers: dict[str, str], rid: str, rng: random.Random) -> Events:
    """The crew's whole stream over ``/neta/crew``, the socket closed at random points."""
    received: Events = []
    while not ended(received):
        last = received[-1]["seq"] if received else -1
        async with websockets.connect(url, additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "subscribe", "requestId": rid, "lastEventId": last}))
            reply = json.loads(await ws.recv())
            assert reply["type"] == "subscribed", reply
            keep = rng.randint(1, 8)
            while keep > 0 and not ended(received):
                frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
                batch = [e for e in frame if e["eventType"] != "HEARTBEAT"]
                received += batch
                keep -= len(batch)
    return received


def task_statuses(events: Events, task_id: str) -> list[str]:
    return [
        e["data"]["status"]
        for e in events
        if e["eventType"] == "crew:task:status" and e["data"]["taskId"] == task_id
    ]


def last_task(events: Events, task_id: str) -> dict[str, Any]:
    return [
        e["data"]
        for e in events
        if e["eventType"] == "crew:task:status" and e["data"]["taskId"] == task_id
    ][-1]


async def until(api: ApiClient, rid: str, check: Any, timeout: float = 60) -> dict[str, Any]:
    """Poll the crew's status until ``check(status)`` holds."""
    async with asyncio.timeout(timeout):
        while True:
            response = await api.http.get("neta/api/crew/status", params={"requestId": rid})
            assert response.status_code == 200, response.text
            body = dict(response.json())
            if check(body):
                return body
            await asyncio.sleep(0.05)
