"""B4 fan-out and concurrency.

* One run followed by many SSE subscribers: deliveries (events x subscribers) per second.
* Many concurrent runs with two subscribers each: events per second across the runs, and the
  server's event-loop lag (an in-server task that sleeps 5 ms and records how late it wakes).

Baselines: the bare server sending the same frames to the same number of subscribers, with the
same lag monitor. Subscribers count frames without parsing, so the server is what is measured.
"""

from __future__ import annotations

import asyncio
import time

from .clients import Received, sse_count
from .harness import Frames, Row, Settings, bare_server, http_client, neta_server, percentile

LAG_TARGET_MS = 20.0


def _rate(results: list[Received], began: float, per: int = 1) -> float:
    delivered = sum(r.events for r in results) / per
    return delivered / (max(r.finished for r in results) - began)


async def _fanout_neta(
    settings: Settings, deltas: int, subscribers: int
) -> tuple[list[float], list]:
    rates = []
    frames = []
    with neta_server(settings) as server:
        async with http_client(subscribers + 4) as client:
            for _ in range(settings.repeats):
                model = server.script(deltas)
                began = time.perf_counter()
                rid = await server.start_run(client, model)
                params = {"requestId": rid}
                results = await asyncio.gather(
                    *(
                        sse_count(client, server.stream_url(), params, server.headers)
                        for _ in range(subscribers)
                    )
                )
                rates.append(_rate(list(results), began))
            frames = server.stored_frames(rid)
    return rates, frames


async def _concurrent_neta(
    settings: Settings, runs: int, deltas: int
) -> tuple[list[float], list[float], Frames]:
    rates: list[float] = []
    lags: list[float] = []
    with neta_server(settings) as server:
        async with http_client(2 * runs + 4) as client:
            for _ in range(settings.repeats):
                models = [server.script(deltas) for _ in range(runs)]
                server.lag("start")
                began = time.perf_counter()
                rids = await asyncio.gather(*(server.start_run(client, m) for m in models))
                results = await asyncio.gather(
                    *(
                        sse_count(client, server.stream_url(), {"requestId": rid}, server.headers)
                        for rid in rids
                        for _ in range(2)
                    )
                )
                samples = server.lag("stop")["samples"]
                rates.append(_rate(list(results), began, per=2))
                lags.append(percentile(samples, 0.99) * 1000)
            frames = server.stored_frames(rids[0])
    return rates, lags, frames


async def _bare(
    settings: Settings, fan_frames: Frames, run_frames: Frames, subscribers: int, runs: int
) -> tuple[list[float], list[float], list[float]]:
    fan: list[float] = []
    rates: list[float] = []
    lags: list[float] = []
    with bare_server(settings) as bare:
        bare.load("fan", fan_frames)
        bare.load("run", run_frames)
        async with http_client(max(subscribers, 2 * runs) + 4) as client:
            for _ in range(settings.repeats):
                began = time.perf_counter()
                results = await asyncio.gather(
                    *(
                        sse_count(client, bare.base + "sse", {"name": "fan"})
                        for _ in range(subscribers)
                    )
                )
                fan.append(_rate(list(results), began))
                bare.lag("start")
                began = time.perf_counter()
                results = await asyncio.gather(
                    *(
                        sse_count(client, bare.base + "sse", {"name": "run"})
                        for _ in range(2 * runs)
                    )
                )
                samples = bare.lag("stop")["samples"]
                rates.append(_rate(list(results), began, per=2))
                lags.append(percentile(samples, 0.99) * 1000)
    return fan, rates, lags


async def run(settings: Settings) -> list[Row]:
    fan_deltas, subscribers = settings.size(20_000, 500), settings.size(100, 10)
    runs, run_deltas = settings.size(50, 5), settings.size(4_000, 200)
    fan, fan_frames = await _fanout_neta(settings, fan_deltas, subscribers)
    rates, lags, run_frames = await _concurrent_neta(settings, runs, run_deltas)
    bare_fan, bare_rates, bare_lags = await _bare(
        settings, fan_frames, run_frames, subscribers, runs
    )
    lag = Row(
        f"B4 event-loop lag p99, {runs} runs x 2 subscribers",
        "ms",
        lags,
        bare_lags,
        target=f"<= {LAG_TARGET_MS:g} ms",
    )
    lag.met = (lag.median or 0) <= LAG_TARGET_MS
    return [
        Row(
            f"B4 fan-out, 1 run of {fan_deltas:,} deltas x {subscribers} subscribers",
            "deliveries/s",
            fan,
            bare_fan,
        ),
        Row(
            f"B4 {runs} concurrent runs of {run_deltas:,} deltas x 2 subscribers",
            "events/s",
            rates,
            bare_rates,
        ),
        lag,
    ]
