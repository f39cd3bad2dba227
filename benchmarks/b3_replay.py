"""B3 replay: reconnect with ``lastEventId=0`` to a finished run and read it all again.

Baseline: a bare SQLite range scan of the same rows, in this process, on a copy of the server's
database (with ``--store redis``: a bare paged ``XRANGE`` of the run's stream). The clients
count frames without parsing them, so the server is what is measured; the httpx-sse row shows
what an ordinary client gets.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from .clients import sse_count, sse_events, ws_count
from .harness import NetaServer, Row, Settings, http_client, neta_server, redis_frames

TARGET = 0.5


def _copy_db(server: NetaServer, dest: Path) -> None:
    source = sqlite3.connect(f"file:{server.db_path}?mode=ro", uri=True)
    target = sqlite3.connect(dest)
    source.backup(target)
    source.close()
    target.close()


def _scan(path: Path, request_id: str) -> tuple[int, float]:
    conn = sqlite3.connect(path)
    try:
        began = time.perf_counter()
        (stream,) = conn.execute(
            "SELECT stream FROM event_streams WHERE request_id = ?", (request_id,)
        ).fetchone()
        base = stream << 32
        rows = conn.execute(
            "SELECT key - ?, event_type, payload FROM events WHERE key > ? AND key < ? "
            "ORDER BY key",
            (base, base, base + (1 << 32)),
        ).fetchall()
        return len(rows), time.perf_counter() - began
    finally:
        conn.close()


async def run(settings: Settings) -> list[Row]:
    deltas = settings.size(200_000, 2_000)
    sse: list[float] = []
    httpx_sse: list[float] = []
    ws: list[float] = []
    with neta_server(settings) as server:
        async with http_client() as client:
            rid = await server.start_run(client, server.script(deltas))
            url, headers = server.stream_url(), server.headers
            await sse_count(client, url, {"requestId": rid}, headers)  # until the run ends
            params = {"requestId": rid, "lastEventId": 0}
            expected = len(server.stored_frames(rid)) - 1
            for _ in range(settings.repeats):
                began = time.perf_counter()
                got = await sse_count(client, url, params, headers)
                assert got.events == expected, (got.events, expected)
                sse.append(got.events / (got.finished - began))
                began = time.perf_counter()
                got = await sse_events(client, url, params, headers)
                assert got.events == expected, (got.events, expected)
                httpx_sse.append(got.events / (got.finished - began))
                began = time.perf_counter()
                subscribe = {"type": "subscribe", "requestId": rid, "lastEventId": 0}
                got = await ws_count(server.ws_url, subscribe, headers)
                assert got.events == expected, (got.events, expected)
                ws.append(got.events / (got.finished - began))
        if settings.redis_url is None:
            copy = server.dir / "copy.sqlite3"
            _copy_db(server, copy)
    scans = []
    for _ in range(settings.repeats):
        if settings.redis_url is not None:  # a bare paged XRANGE of the run's stream
            began = time.perf_counter()
            rows = len(redis_frames(settings.redis_url, rid)) - 1
            seconds = time.perf_counter() - began
        else:
            rows, seconds = _scan(copy, rid)
        assert rows == expected, (rows, expected)
        scans.append(rows / seconds)
    rows_out = [
        Row(f"B3 replay SSE, {expected:,} events", "events/s", sse, scans),
        Row(f"B3 replay WebSocket, {expected:,} events", "events/s", ws, scans),
        Row(f"B3 replay SSE into httpx-sse, {expected:,} events", "events/s", httpx_sse, scans),
    ]
    for row in rows_out[:2]:
        row.target = f"ratio >= {TARGET}"
        row.met = (row.ratio or 0) >= TARGET
    return rows_out
