"""B1 throughput: a scripted run of many text deltas, runtime → event log → SSE/WS → client.

Baseline: the bare tornado server sending the same stored envelopes, pre-serialised, flushed in
batches of the group commit's largest batch, to the same client code.
"""

from __future__ import annotations

import time

from .clients import sse_events, ws_events
from .harness import (
    BATCH,
    BareServer,
    Frames,
    NetaServer,
    Row,
    Settings,
    bare_server,
    http_client,
    neta_server,
)

TARGET = 0.5
WS_TARGET = 0.7
"""The WebSocket carries less per event than SSE, so it is held to more of its bare server."""


async def _neta_sse(server: NetaServer, deltas: int) -> tuple[float, str]:
    async with http_client() as client:
        model = server.script(deltas)
        started = time.perf_counter()
        rid = await server.start_run(client, model)
        got = await sse_events(client, server.stream_url(), {"requestId": rid}, server.headers)
    assert got.last_type == "MESSAGE_COMPLETED", got
    return got.events / (got.finished - started), rid


async def _neta_ws(server: NetaServer, deltas: int) -> float:
    async with http_client() as client:
        model = server.script(deltas)
        started = time.perf_counter()
        rid = await server.start_run(client, model)
    got = await ws_events(server.ws_url, {"type": "subscribe", "requestId": rid}, server.headers)
    assert got.last_type == "MESSAGE_COMPLETED", got
    return got.events / (got.finished - started)


async def _bare_sse(bare: BareServer, name: str) -> float:
    async with http_client() as client:
        started = time.perf_counter()
        got = await sse_events(client, bare.base + "sse", {"name": name})
    return got.events / (got.finished - started)


async def _bare_ws(bare: BareServer, name: str) -> float:
    started = time.perf_counter()
    got = await ws_events(bare.ws_url, {"type": "subscribe", "name": name})
    return got.events / (got.finished - started)


async def run(settings: Settings) -> list[Row]:
    deltas = settings.size(200_000, 2_000)
    sse: list[float] = []
    ws: list[float] = []
    with neta_server(settings) as server:
        for _ in range(settings.repeats):
            rate, rid = await _neta_sse(server, deltas)
            sse.append(rate)
            ws.append(await _neta_ws(server, deltas))
        frames = server.stored_frames(rid)
    bare_sse: list[float] = []
    bare_ws: list[float] = []
    with bare_server(settings) as bare:
        bare.load("b1", frames)
        for _ in range(settings.repeats):
            bare_sse.append(await _bare_sse(bare, "b1"))
            bare_ws.append(await _bare_ws(bare, "b1"))
    rows = [
        Row(f"B1 throughput SSE, {deltas:,} deltas", "events/s", sse, bare_sse),
        Row(f"B1 throughput WebSocket, {deltas:,} deltas", "events/s", ws, bare_ws),
    ]
    for row, target in zip(rows, (TARGET, WS_TARGET), strict=True):
        row.target = f"ratio >= {target}"
        row.met = (row.ratio or 0) >= target
    if settings.redis_url is not None:
        xadd = [_bare_xadd(settings.redis_url, frames, i) for i in range(settings.repeats)]
        rows.append(
            Row(
                f"B1 throughput SSE vs bare XADD pipeline of {BATCH}, {deltas:,} deltas",
                "events/s",
                sse,
                xadd,
                note="baseline: the same envelopes appended to one stream, nothing served",
            )
        )
    return rows


def _bare_xadd(url: str, frames: Frames, attempt: int) -> float:
    """Events/s of appending ``frames`` to a fresh stream in pipelines of BATCH XADDs."""
    import redis

    client = redis.Redis.from_url(url)
    key = f"bench:xadd:{attempt}"
    try:
        began = time.perf_counter()
        for start in range(0, len(frames), BATCH):
            pipe = client.pipeline(transaction=False)
            for seq, kind, payload in frames[start : start + BATCH]:
                pipe.xadd(key, {"t": kind, "p": payload}, id=f"0-{seq + 1}")
            pipe.execute()
        return len(frames) / (time.perf_counter() - began)
    finally:
        client.delete(key)
        client.close()
