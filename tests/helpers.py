"""Clients used by the tests: the REST API, SSE via httpx-sse, and the WebSocket via websockets."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from httpx_sse import aconnect_sse

from neta_jupyter.providers import ScriptedModel, ScriptedTurn

if TYPE_CHECKING:
    from neta_jupyter.runtime import Runtime

TERMINAL = {"MESSAGE_COMPLETED", "MESSAGE_SUSPENDED", "MESSAGE_FAILED"}


@dataclass
class Frame:
    """One SSE message as received."""

    id: str
    event: str
    data: str

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.data)


class ApiClient:
    """Thin helpers over an authenticated httpx client."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.http = client

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post(f"neta/api/agent/run/{path}", json=body)

    async def start(self, content: str, **fields: Any) -> dict[str, Any]:
        response = await self.post("async", {"content": content, **fields})
        assert response.status_code == 200, response.text
        return response.json()

    async def resume(self, request_id: str, **fields: Any) -> httpx.Response:
        return await self.post("resumeTask", {"requestId": request_id, **fields})

    async def status(self, request_id: str) -> dict[str, Any]:
        response = await self.http.get(
            "neta/api/agent/run/status", params={"requestId": request_id}
        )
        assert response.status_code == 200, response.text
        return response.json()

    async def frames(
        self, request_id: str, last_event_id: int | None = None, *, limit: int | None = None
    ) -> list[Frame]:
        """Read the SSE stream until the server closes it (or ``limit`` frames)."""
        params: dict[str, Any] = {"requestId": request_id}
        if last_event_id is not None:
            params["lastEventId"] = last_event_id
        out: list[Frame] = []
        async with aconnect_sse(
            self.http, "GET", "neta/api/agent/run/stream", params=params
        ) as src:
            async for sse in src.aiter_sse():
                out.append(Frame(sse.id, sse.event, sse.data))
                if limit is not None and len(out) >= limit:
                    break
        return out

    async def segment(
        self, request_id: str, last_event_id: int | None = None
    ) -> list[dict[str, Any]]:
        """Envelopes of one stream segment (up to its terminal event), heartbeats dropped."""
        frames = await self.frames(request_id, last_event_id)
        return [f.json for f in frames if f.event != "HEARTBEAT"]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["eventType"] for e in events]


def assert_in_order(names: list[str], expected: list[str]) -> None:
    """``expected`` appears in ``names`` as a subsequence."""
    position = 0
    for name in names:
        if position < len(expected) and name == expected[position]:
            position += 1
    assert position == len(expected), f"order {expected} not found in {names}"


async def stored(runtime: Runtime, rid: str) -> list[str]:
    """Every envelope the run's log holds, in order."""
    out: list[str] = []
    after = -1
    while batch := await runtime.store.events.read_after(rid, after):
        out += [e.payload for e in batch]
        after = batch[-1].seq
    return out


def script(runtime: Runtime, *turns: ScriptedTurn) -> ScriptedModel:
    """The runtime's model ``scripted`` plays ``turns`` from now on."""
    model = ScriptedModel(list(turns))
    runtime.models.register("scripted", model)
    return model
