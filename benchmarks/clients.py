"""The clients: httpx-sse (what applications use), a lean SSE frame counter, and a WebSocket."""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import websockets
from httpx_sse import aconnect_sse

from .harness import TERMINAL


@dataclass
class Received:
    """What one subscriber got: events (heartbeats left out) and when the last one arrived."""

    events: int = 0
    bytes: int = 0
    wire: int = 0
    """Bytes as they came over the network (compressed where the server compressed)."""
    last_type: str = ""
    finished: float = 0.0
    latencies: list[float] = field(default_factory=list)


async def sse_events(
    client: httpx.AsyncClient,
    url: str,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
    on_data: Callable[[str], None] | None = None,
) -> Received:
    """Read an SSE stream with httpx-sse up to its terminal event."""
    got = Received()
    async with aconnect_sse(
        client, "GET", url, params=params, headers=dict(headers or {})
    ) as source:
        source.response.raise_for_status()
        async for sse in source.aiter_sse():
            if sse.event == "HEARTBEAT":
                continue
            got.events += 1
            got.last_type = sse.event
            if on_data is not None:
                on_data(sse.data)
            if sse.event in TERMINAL:
                break
    got.finished = time.perf_counter()
    return got


async def sse_count(
    client: httpx.AsyncClient,
    url: str,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
    pace: float | None = None,
) -> Received:
    """Count SSE messages (blank-line terminated) until the server ends the response.

    For figures where the server, not the client's parser, must be the limit. ``pace`` (bytes
    per second) makes a deliberately slow reader.
    """
    got = Received()
    tail = b""
    started = time.perf_counter()
    async with client.stream("GET", url, params=params, headers=headers) as response:
        response.raise_for_status()
        # A gzipped stream (the default: httpx accepts gzip) is counted in what it decodes to.
        inflate = _inflater(response)
        async for raw in response.aiter_raw():
            got.wire += len(raw)
            chunk = inflate(raw) if inflate else raw
            if not chunk:
                continue
            joined = tail + chunk[:1]
            got.events += chunk.count(b"\n\n") + (joined == b"\n\n")
            got.bytes += len(chunk)
            tail = chunk[-1:]
            if pace is not None:
                ahead = started + got.bytes / pace - time.perf_counter()
                if ahead > 0:
                    await asyncio.sleep(ahead)
    got.finished = time.perf_counter()
    return got


def _inflater(response: httpx.Response) -> Callable[[bytes], bytes] | None:
    if response.headers.get("content-encoding") != "gzip":
        return None
    return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress


async def ws_events(
    url: str,
    subscribe: dict[str, Any],
    headers: dict[str, str] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    compression: str | None = None,
) -> Received:
    """Subscribe over a WebSocket and parse array frames up to the terminal event.

    ``compression="deflate"`` offers permessage-deflate, as browsers do.
    """
    got = Received()
    async with websockets.connect(
        url, additional_headers=headers, max_size=None, compression=compression
    ) as ws:
        await ws.send(json.dumps(subscribe))
        while True:
            frame = json.loads(await ws.recv())
            if isinstance(frame, dict):
                if frame.get("type") == "error":
                    raise RuntimeError(f"subscription refused: {frame}")
                continue  # "subscribed" and other control replies
            events = [e for e in frame if e["eventType"] != "HEARTBEAT"]
            got.events += len(events)
            if on_event is not None:
                for event in events:
                    on_event(event)
            if events and events[-1]["eventType"] in TERMINAL:
                got.last_type = events[-1]["eventType"]
                break
    got.finished = time.perf_counter()
    return got


_TERMINAL_MARKS = tuple(f'"eventType":"{t}"' for t in TERMINAL)


async def ws_count(
    url: str,
    subscribe: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> Received:
    """Count envelopes in WebSocket array frames without parsing them, up to the terminal one.

    An envelope starts with ``{"eventType":``; inside a JSON string those quotes are escaped, so
    the count is exact.
    """
    got = Received()
    async with websockets.connect(
        url, additional_headers=headers, max_size=None, compression=None
    ) as ws:
        await ws.send(json.dumps(subscribe))
        while True:
            frame = await ws.recv()
            assert isinstance(frame, str)
            if frame.startswith("{"):
                if '"type":"error"' in frame.replace(" ", ""):
                    raise RuntimeError(f"subscription refused: {frame}")
                continue
            got.events += frame.count('{"eventType":')
            got.bytes += len(frame)
            if any(mark in frame for mark in _TERMINAL_MARKS):
                break
    got.finished = time.perf_counter()
    return got
