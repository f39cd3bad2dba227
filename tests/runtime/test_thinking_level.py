"""Thinking level: set per session over the WebSocket (seed 002) or per run, seen by the model."""

from __future__ import annotations

import json
from typing import Any

import websockets

from neta_jupyter.providers import ScriptedModel, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient


async def send(ws: Any, frame: dict[str, Any]) -> dict[str, Any]:
    await ws.send(json.dumps(frame))
    reply: dict[str, Any] = json.loads(await ws.recv())
    return reply


async def test_session_level_over_websocket_and_run_override(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    model = ScriptedModel([ScriptedTurn(text=f"answer {i}") for i in range(3)])
    runtime.models.register("thinker", model)
    first = await api.start("hello", model="thinker", sessionName="deep")
    await runtime.wait(first["requestId"])
    session_id = first["sessionId"]

    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
        reply = await send(ws, {"type": "set_thinking_level", "sessionId": session_id, "level": 7})
        assert reply["type"] == "error" and reply["errCode"] == "INVALID_FIELDS", reply
        reply = await send(
            ws, {"type": "set_thinking_level", "sessionId": "s_nobody", "level": "high"}
        )
        assert reply["type"] == "error" and reply["errCode"] == "SESSION_NOT_FOUND", reply
        reply = await send(
            ws, {"type": "set_thinking_level", "sessionId": session_id, "level": "high"}
        )
        assert reply == {
            "type": "ack",
            "action": "set_thinking_level",
            "sessionId": session_id,
            "level": "high",
        }

    second = await api.start("again", model="thinker", sessionId=session_id)
    await runtime.wait(second["requestId"])
    third = await api.start("quick one", model="thinker", sessionId=session_id, thinkingLevel="off")
    await runtime.wait(third["requestId"])
    assert [r.thinking for r in model.requests] == [None, "high", "off"]

    refused = await api.post("async", {"content": "x", "thinkingLevel": "extreme"})
    assert refused.status_code == 400 and refused.json()["errCode"] == "INVALID_FIELDS"
