"""Malformed requests get a 4xx with an errCode, early; a bad frame never closes the socket."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import websockets

from neta_jupyter.providers import ScriptedModel, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient
from tests.server.test_bad_input_and_auth import assert_error

DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
"""Past Python's recursion limit: the parser itself gives up."""
DEEP_FIELD = json.dumps({"content": "x"})[:-1] + ', "extra": ' + "[" * 2_000 + "]" * 2_000 + "}"
NESTED_PARAMETERS = json.dumps(
    {
        "content": "x",
        "virtualTools": [
            {"name": "deep", "parameters": json.loads('{"a":' * 500 + "1" + "}" * 500)}
        ],
    }
)
"""Parsed without complaint, but deep enough to break validation or storage further on."""
HUGE_INTEGER = '{"content": "x", "maxSteps": 1' + "0" * 5_000 + "}"
"""Past Python's digit limit for int(str)."""

MALFORMED = {
    "deep array": DEEP_ARRAY,
    "deep field": DEEP_FIELD,
    "nested parameters": NESTED_PARAMETERS,
    "huge integer": HUGE_INTEGER,
}


@pytest.mark.parametrize("route", ["async", "resumeTask", "terminateTask"])
@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
async def test_deep_json_and_huge_integers_are_400(api: ApiClient, route: str, body: str) -> None:
    response = await api.http.post(f"neta/api/agent/run/{route}", content=body)
    error = assert_error(response, 400, "INVALID_JSON")
    assert "nested deeper" in error["message"] or "too long" in error["message"]


async def test_deep_json_and_huge_integers_over_websocket_leave_it_open(
    api: ApiClient, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header, max_size=None) as ws:
        for name, body in MALFORMED.items():
            frame = json.loads(body) if name == "nested parameters" else None
            text = (
                json.dumps({**frame, "type": "chat"})
                if frame
                else body.replace('{"content"', '{"type": "chat", "content"')
            )
            await ws.send(text)
            reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert reply["type"] == "error" and reply["errCode"] == "INVALID_JSON", (name, reply)
            await ws.send(json.dumps({"type": "ping", "id": name}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 30)) == {
                "type": "pong",
                "replyTo": name,
            }
        await ws.send(json.dumps({"type": "chat", "content": "hello after the bad frames"}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] == "started"


async def _raw_post(
    port: int, path: str, headers: dict[str, str], length: int
) -> tuple[str, dict[str, Any]]:
    """Send a request's headers announcing ``length`` body bytes, and none of the body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        lines = [
            f"POST {path} HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            "Content-Type: application/json",
            f"Content-Length: {length}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        # A server that waited for the body would never answer: the generous timeout fails it.
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        status_line, *header_lines = head.decode().split("\r\n")
        fields = dict(h.split(": ", 1) for h in header_lines if ": " in h)
        body = await asyncio.wait_for(
            reader.readexactly(int(fields.get("Content-Length", "0"))), 30
        )
        return status_line, json.loads(body) if body else {}
    finally:
        writer.close()


@pytest.mark.parametrize("authenticated", [True, False])
async def test_oversized_content_length_is_413_before_the_body_is_sent(
    server_url: str,
    jp_http_port: int,
    jp_base_url: str,
    jp_auth_header: dict[str, str],
    authenticated: bool,
) -> None:
    headers = jp_auth_header if authenticated else {}
    for route in ("agent/run/async", "agent/run/resumeTask", "sessions/leaf"):
        status, body = await _raw_post(
            jp_http_port, f"{jp_base_url}neta/api/{route}", headers, 300_000_000
        )
        assert status.startswith("HTTP/1.1 413"), (route, status)
        assert body["errCode"] == "BODY_TOO_LARGE" and "limit" in body["message"]


async def test_chunked_body_over_the_limit_is_413(api: ApiClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"content": "'
        for _ in range(40):
            yield b"x" * 50_000
        yield b'"}'

    response = await api.http.post("neta/api/agent/run/async", content=chunks())
    assert_error(response, 413, "BODY_TOO_LARGE")
    assert (await api.start("a body under the limit still works"))["requestId"]


def slow(runtime: Runtime) -> None:
    words = [f"w{i} " for i in range(400)]
    runtime.models.register("slow", ScriptedModel([ScriptedTurn(text=words, delay=0.05)]))


async def test_last_event_id_past_the_end_is_an_error_on_sse(
    api: ApiClient, runtime: Runtime
) -> None:
    slow(runtime)
    running = (await api.start("write slowly", model="slow", sessionName="slow"))["requestId"]
    done = (await api.start("hello", sessionName="quick"))["requestId"]
    await runtime.wait(done)
    last_done = (await api.status(done))["lastSeq"]
    for rid, after in ((running, 100_000), (done, last_done + 1), (done, 10**9)):
        # Before: a live run's stream waited for event 100,000 forever (heartbeats only).
        response = await api.http.get(
            "neta/api/agent/run/stream",
            params={"requestId": rid, "lastEventId": after},
            timeout=httpx.Timeout(30, read=10),
        )
        error = assert_error(response, 416, "LAST_EVENT_ID_OUT_OF_RANGE")
        assert error["requestId"] == rid and "past the end" in error["message"]
    # At the end exactly is no error: nothing follows (204), as before.
    response = await api.http.get(
        "neta/api/agent/run/stream", params={"requestId": done, "lastEventId": last_done}
    )
    assert response.status_code == 204
    await api.post("terminateTask", {"requestId": running})


async def test_last_event_id_past_the_end_is_an_error_frame_on_websocket(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    slow(runtime)
    running = (await api.start("write slowly", model="slow"))["requestId"]
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header, max_size=None) as ws:
        await ws.send(json.dumps({"type": "subscribe", "requestId": running, "lastEventId": 10**6}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert reply["type"] == "error", reply
        assert reply["errCode"] == "LAST_EVENT_ID_OUT_OF_RANGE" and reply["requestId"] == running
        await ws.send(json.dumps({"type": "ping", "id": 1}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 30)) == {"type": "pong", "replyTo": 1}
    await api.post("terminateTask", {"requestId": running})
