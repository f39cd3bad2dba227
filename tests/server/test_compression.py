"""Compressed event streams: gzip SSE and permessage-deflate WebSocket, negotiated per client.

A client that accepts compression gets the same events in far fewer bytes, each batch as soon
as it is durable; a client that does not gets plain frames. The server here compresses for
every client, as for a remote one (which clients get it by default: test_compression_policy).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import httpx
import pytest
import websockets
from httpx_sse import aconnect_sse

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.server.compression import accepts_gzip
from tests.helpers import TERMINAL, ApiClient, script, stored

DELTAS = [f"w{i} " for i in range(2000)]
STREAM = "neta/api/agent/run/stream"


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"stream_compression": "always"}


async def _raw(api: ApiClient, rid: str, accept: str) -> tuple[httpx.Headers, int, list[str]]:
    """Headers, bytes on the wire, and envelopes of a whole run read with ``accept``."""
    headers = {"Accept-Encoding": accept}
    async with api.http.stream("GET", STREAM, params={"requestId": rid}, headers=headers) as r:
        raw = b"".join([chunk async for chunk in r.aiter_raw()])
    text = (
        zlib.decompress(raw, 16 + zlib.MAX_WBITS) if r.headers.get("content-encoding") else raw
    ).decode()
    wire = len(raw)
    return r.headers, wire, [line[6:] for line in text.split("\n") if line.startswith("data: ")]


async def test_sse_is_gzipped_for_clients_that_accept_it_and_plain_for_others(
    api: ApiClient, runtime: Runtime
) -> None:
    script(runtime, ScriptedTurn(text=DELTAS))
    rid = (await api.start("go", model="scripted"))["requestId"]
    zipped_headers, zipped_bytes, zipped = await _raw(api, rid, "gzip, deflate")
    plain_headers, plain_bytes, plain = await _raw(api, rid, "identity")
    log = await stored(runtime, rid)
    assert zipped_headers.get("content-encoding") == "gzip"
    assert "content-encoding" not in plain_headers
    assert zipped == plain == log
    assert zipped_bytes * 5 < plain_bytes, (zipped_bytes, plain_bytes)


async def test_httpx_sse_reads_a_gzipped_stream_as_it_is_written(
    api: ApiClient, runtime: Runtime
) -> None:
    # One delta every 2 s for a minute: the first must reach the client long before the run
    # ends, so each batch leaves the compressor when it is written.
    script(runtime, ScriptedTurn(text=["first half "] + ["more "] * 30, delay=2.0))
    rid = (await api.start("go", model="scripted"))["requestId"]
    async with aconnect_sse(api.http, "GET", STREAM, params={"requestId": rid}) as source:
        assert source.response.headers.get("content-encoding") == "gzip"
        async for sse in source.aiter_sse():
            if sse.event == "TEXT_DELTA":
                assert json.loads(sse.data)["data"]["text"] == "first half "
                break
    assert (await api.status(rid))["status"] == "running"
    response = await api.post("terminateTask", {"requestId": rid})
    assert response.status_code == 200


async def _ws_events(url: str, headers: dict[str, str], rid: str, **options: Any) -> Any:
    events: list[str] = []
    async with websockets.connect(url, additional_headers=headers, max_size=None, **options) as ws:
        await ws.send(json.dumps({"type": "subscribe", "requestId": rid}))
        while not events or json.loads(events[-1])["eventType"] not in TERMINAL:
            frame = json.loads(await ws.recv())
            if isinstance(frame, list):
                events += [json.dumps(e, separators=(",", ":")) for e in frame]
        assert ws.response is not None
        extensions = ws.response.headers.get("Sec-WebSocket-Extensions", "")
    return extensions, events


async def test_websocket_negotiates_permessage_deflate_and_plain_clients_still_work(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    script(runtime, ScriptedTurn(text=DELTAS))
    rid = (await api.start("go", model="scripted"))["requestId"]
    url = server_url.replace("http://", "ws://") + "neta/ws"
    deflated, events = await _ws_events(url, jp_auth_header, rid)
    plain, plain_events = await _ws_events(url, jp_auth_header, rid, compression=None)
    assert "permessage-deflate" in deflated
    assert plain == ""
    log = [json.dumps(json.loads(e), separators=(",", ":")) for e in await stored(runtime, rid)]
    assert events == plain_events == log


def test_accept_encoding_is_read_with_its_qualities() -> None:
    assert accepts_gzip("gzip, deflate, br")
    assert accepts_gzip("deflate, GZIP;q=0.5")
    assert accepts_gzip("*")
    assert not accepts_gzip("gzip;q=0, deflate")
    assert not accepts_gzip("identity")
    assert not accepts_gzip("")
