"""B2 latency: the model yields one delta per millisecond, each stamped with its wall-clock time;
the client subtracts the stamp from the time it parsed the event.

Baseline: the bare tornado server writing and flushing one freshly stamped event per millisecond
(TCP_NODELAY, like the real handlers).

Both clients accept compression, as browsers and httpx do, and the server under test compresses
for every client (``stream_compression = "always"``, what a remote browser gets): it gzips SSE
and deflates WebSocket messages, flushing each batch; the bare server sends plain frames.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .clients import sse_events, ws_events
from .harness import Row, Settings, bare_server, http_client, neta_server, percentile

INTERVAL = 0.001
DEFLATE = "deflate"
"""Clients offer compression as browsers and httpx do (the bare server declines it)."""
TARGET_P99_MS = 5.0


class Stamps:
    """Latencies (ms) of the stamped text deltas a client parses."""

    def __init__(self) -> None:
        self.ms: list[float] = []

    def event(self, event: dict[str, Any]) -> None:
        if event["eventType"] == "TEXT_DELTA":
            self.ms.append((time.time() - float(event["data"]["text"])) * 1000)

    def sse_data(self, data: str) -> None:
        self.event(json.loads(data))


async def _neta(settings: Settings, deltas: int) -> tuple[list[Stamps], list[Stamps]]:
    sse: list[Stamps] = []
    ws: list[Stamps] = []
    model = f"bench-stamp:{deltas}:{INTERVAL}"
    with neta_server(settings, stream_compression="always") as server:
        async with http_client() as client:
            for _ in range(settings.repeats):
                stamps = Stamps()
                rid = await server.start_run(client, model)
                await sse_events(
                    client, server.stream_url(), {"requestId": rid}, server.headers, stamps.sse_data
                )
                sse.append(stamps)
                stamps = Stamps()
                rid = await server.start_run(client, model)
                subscribe = {"type": "subscribe", "requestId": rid}
                await ws_events(server.ws_url, subscribe, server.headers, stamps.event, DEFLATE)
                ws.append(stamps)
    return sse, ws


async def _bare(settings: Settings, deltas: int) -> tuple[list[Stamps], list[Stamps]]:
    sse: list[Stamps] = []
    ws: list[Stamps] = []
    with bare_server(settings) as bare:
        async with http_client() as client:
            for _ in range(settings.repeats):
                stamps = Stamps()
                params = {"n": deltas, "interval": INTERVAL}
                await sse_events(client, bare.base + "paced", params, None, stamps.sse_data)
                sse.append(stamps)
                stamps = Stamps()
                await ws_events(
                    bare.ws_url, {"type": "paced", **params}, None, stamps.event, DEFLATE
                )
                ws.append(stamps)
    return sse, ws


async def run(settings: Settings) -> list[Row]:
    deltas = settings.size(3_000, 300)
    neta_sse, neta_ws = await _neta(settings, deltas)
    bare_sse, bare_ws = await _bare(settings, deltas)
    rows = []
    for transport, neta, bare in (("SSE", neta_sse, bare_sse), ("WebSocket", neta_ws, bare_ws)):
        for name, q in (("p50", 0.5), ("p99", 0.99)):
            row = Row(
                f"B2 latency {name} {transport}, 1 delta/ms",
                "ms",
                [percentile(s.ms, q) for s in neta],
                [percentile(s.ms, q) for s in bare],
            )
            if name == "p99":
                row.target = f"<= {TARGET_P99_MS:g} ms"
                row.met = (row.median or 0) <= TARGET_P99_MS
            rows.append(row)
    return rows
