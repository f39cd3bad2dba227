"""B10 first-token overhead: how much later the first token reaches a client than the model sent it.

A stand-in for an OpenAI-compatible provider (an asyncio HTTP server in the benchmark process)
answers each chat request with its headers at once, waits ``WAIT`` seconds, then writes its
first token and notes the moment (``time.perf_counter``, the clock the clients read too), then
the rest of the answer. The server under test reaches it as its ``openai`` endpoint.

* first token over SSE: from the stand-in writing the first token to an httpx-sse client
  parsing the run's first ``TEXT_DELTA``; baseline: the same, for a client that asks the
  stand-in directly and parses its first chunk (the provider's own stream, no server between);
* session created: from sending ``POST run/async`` to the client parsing the run's
  ``SESSION_CREATED`` (it opens the stream as soon as the POST answers); baseline: the round
  trip of a plain ``GET /api/status`` of the same server.

p99 over ``RUNS`` runs per repetition. The widget's share (to its screen in Chromium) is not
measured here.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import httpx
from httpx_sse import aconnect_sse

from .harness import NetaServer, Row, Settings, http_client, neta_server, percentile

WAIT = 0.1
RUNS = 60
TOKENS = 20
TARGET_MS = 5.0


def _chunk(content: str | None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    body = {
        "id": "b10",
        "object": "chat.completion.chunk",
        "model": "standin",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


class StandIn:
    """The provider stand-in: ``first`` holds when each answer's first token was written."""

    def __init__(self) -> None:
        self.first: list[float] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(h.split(b":")[1])
                for h in head.split(b"\r\n")
                if h.lower().startswith(b"content-length")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            + _chunk(None)
        )
        await writer.drain()
        await asyncio.sleep(WAIT)
        writer.write(_chunk("tok0"))
        self.first.append(time.perf_counter())
        await writer.drain()
        for i in range(1, TOKENS):
            writer.write(_chunk(f" tok{i}"))
        writer.write(_chunk(None, "stop") + b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()


async def _direct(client: httpx.AsyncClient, stand_in: StandIn, port: int) -> float:
    """ms from the stand-in's first token to a direct client parsing it."""
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    async with aconnect_sse(client, "POST", url, json={"stream": True}) as source:
        async for sse in source.aiter_sse():
            if sse.data != "[DONE]" and json.loads(sse.data)["choices"][0]["delta"].get("content"):
                return (time.perf_counter() - stand_in.first[-1]) * 1000
    raise RuntimeError("the stand-in sent no token")


async def _through(
    client: httpx.AsyncClient, server: NetaServer, stand_in: StandIn
) -> tuple[float, float]:
    """ms to SESSION_CREATED from the POST, and from the first token to its TEXT_DELTA."""
    sent = time.perf_counter()
    rid = await server.start_run(client, "openai:standin")
    created = token = 0.0
    params = {"requestId": rid}
    async with aconnect_sse(
        client, "GET", server.stream_url(), params=params, headers=server.headers
    ) as source:
        async for sse in source.aiter_sse():
            if sse.event == "SESSION_CREATED" and not created:
                created = (time.perf_counter() - sent) * 1000
            if sse.event == "TEXT_DELTA" and not token:
                token = (time.perf_counter() - stand_in.first[-1]) * 1000
            if sse.event.startswith("MESSAGE_"):
                break
    return created, token


async def _status_ms(client: httpx.AsyncClient, server: NetaServer) -> float:
    began = time.perf_counter()
    (await client.get(server.base + "api/status", headers=server.headers)).raise_for_status()
    return (time.perf_counter() - began) * 1000


async def run(settings: Settings) -> list[Row]:
    runs = settings.size(RUNS, 10)
    stand_in = StandIn()
    port = await stand_in.start()
    os.environ["OPENAI_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
    os.environ.setdefault("OPENAI_API_KEY", "b10-stand-in")
    token: list[list[float]] = []
    direct: list[list[float]] = []
    created: list[list[float]] = []
    status: list[list[float]] = []
    try:
        with neta_server(settings) as server:
            async with http_client() as client:
                await _through(client, server, stand_in)  # warm up
                for _ in range(settings.repeats):
                    found = [await _through(client, server, stand_in) for _ in range(runs)]
                    created.append([c for c, _ in found])
                    token.append([t for _, t in found])
                    direct.append([await _direct(client, stand_in, port) for _ in range(runs)])
                    status.append([await _status_ms(client, server) for _ in range(runs)])
    finally:
        await stand_in.stop()
    p50 = [percentile(s, 0.5) for s in token]
    print(
        f"  B10 p50: first token {p50} ms, direct {[percentile(s, 0.5) for s in direct]} ms, "
        f"SESSION_CREATED {[percentile(s, 0.5) for s in created]} ms",
        file=sys.stderr,
        flush=True,
    )
    overhead = Row(
        "B10 first token to an SSE client p99 (baseline: read from the provider directly)",
        "ms",
        [percentile(s, 0.99) for s in token],
        [percentile(s, 0.99) for s in direct],
        target=f"overhead <= {TARGET_MS:g} ms",
    )
    overhead.met = (overhead.median or 0) - (overhead.baseline_median or 0) <= TARGET_MS
    return [
        overhead,
        Row(
            "B10 POST run/async to SESSION_CREATED at the client p99 (baseline: GET /api/status)",
            "ms",
            [percentile(s, 0.99) for s in created],
            [percentile(s, 0.99) for s in status],
        ),
    ]
