"""B5 memory: stored events are not kept in memory; a slow subscriber costs neither memory nor
speed.

* Server RSS (``/proc/<pid>/status``) after many finished runs, against RSS after the first.
* One run with a fast subscriber, then the same with a fast and a slow one (reading at a tenth of
  the fast one's byte rate): the server's RSS growth during the run, how long the run takes and
  how fast the fast subscriber is served, with and without the slow one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from .clients import Received, sse_count
from .harness import NetaServer, Row, Settings, http_client, neta_server

GROWTH_LIMIT = 1.10
SLOW_FACTOR = 10
SLOW_MEMORY_MB = 32.0
NO_SLOWER = 0.9


async def _settled_rss(server: NetaServer) -> int:
    await asyncio.sleep(0.5)
    return server.rss()


async def _after_runs(settings: Settings, runs: int, deltas: int) -> tuple[float, float]:
    """RSS after the first of ``runs`` finished runs, and after the last (MB)."""
    with neta_server(settings) as server:
        model = server.script(deltas, turns=runs)  # one model: a turn per run
        async with http_client() as client:
            first = 0
            for index in range(runs):
                rid = await server.start_run(client, model)
                got = await sse_count(
                    client, server.stream_url(), {"requestId": rid}, server.headers
                )
                assert got.events >= deltas, got
                if index == 0:
                    first = await _settled_rss(server)
            last = await _settled_rss(server)
    return first / 2**20, last / 2**20


class _Peak:
    """Samples a process's RSS every 20 ms while running."""

    def __init__(self, server: NetaServer) -> None:
        self.server = server
        self.start = server.rss()
        self.peak = self.start
        self._task = asyncio.ensure_future(self._sample())

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, self.server.rss())
            await asyncio.sleep(0.02)

    def growth_mb(self) -> float:
        self._task.cancel()
        return (self.peak - self.start) / 2**20


async def _one_run(
    server: NetaServer, deltas: int, slow_pace: float | None
) -> tuple[float, float, float, Received]:
    """(RSS growth MB, run seconds, fast subscriber events/s, what the fast one got)."""
    async with http_client() as client:
        model = server.script(deltas)
        url, headers = server.stream_url(), server.headers
        peak = _Peak(server)
        began = time.perf_counter()
        rid = await server.start_run(client, model)
        slow = None
        if slow_pace is not None:
            slow = asyncio.ensure_future(
                sse_count(client, url, {"requestId": rid}, headers, pace=slow_pace)
            )
        fast = await sse_count(client, url, {"requestId": rid}, headers)
        seconds = fast.finished - began
        if slow is not None:
            await asyncio.sleep(1.0)  # the slow one is still far behind: keep it reading a while
            slow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await slow
        return peak.growth_mb(), seconds, fast.events / seconds, fast


async def _slow_subscriber(settings: Settings, deltas: int) -> dict[str, tuple[float, ...]]:
    with neta_server(settings) as server:
        await _one_run(server, deltas, None)  # warm up: the first big run grows the heap
        before = await _one_run(server, deltas, None)
        pace = before[3].bytes / before[1] / SLOW_FACTOR
        with_slow = await _one_run(server, deltas, pace)
        # Runs without the slow subscriber on both sides of the one with it: the store grows
        # with every run, so a baseline taken only before would favour the baseline.
        after = await _one_run(server, deltas, None)
    alone = tuple((b + a) / 2 for b, a in zip(before[:3], after[:3], strict=True))
    return {"alone": alone, "slow": with_slow[:3]}


async def run(settings: Settings) -> list[Row]:
    runs, deltas = settings.size(100, 5), settings.size(10_000, 500)
    slow_deltas = settings.size(300_000, 2_000)
    firsts: list[float] = []
    lasts: list[float] = []
    alone: list[tuple[float, ...]] = []
    slow: list[tuple[float, ...]] = []
    for _ in range(settings.repeats):
        first, last = await _after_runs(settings, runs, deltas)
        firsts.append(first)
        lasts.append(last)
        found = await _slow_subscriber(settings, slow_deltas)
        alone.append(found["alone"])
        slow.append(found["slow"])
    rss = Row(
        f"B5 server RSS after {runs} runs of {deltas:,} events (baseline: after 1)",
        "MB",
        lasts,
        firsts,
        target=f"ratio <= {GROWTH_LIMIT}",
    )
    rss.met = (rss.ratio or 0) <= GROWTH_LIMIT
    memory = Row(
        f"B5 RSS growth during a {slow_deltas:,}-event run with a 1/{SLOW_FACTOR}-speed "
        "subscriber (baseline: without)",
        "MB",
        [s[0] for s in slow],
        [a[0] for a in alone],
        target=f"<= {SLOW_MEMORY_MB:g} MB",
    )
    memory.met = (memory.median or 0) <= SLOW_MEMORY_MB
    duration = Row(
        "B5 run time with the slow subscriber (baseline: without)",
        "s",
        [s[1] for s in slow],
        [a[1] for a in alone],
        target=f"ratio <= {1 / NO_SLOWER:.2f}",
    )
    duration.met = (duration.ratio or 0) <= 1 / NO_SLOWER
    fast = Row(
        "B5 fast subscriber beside the slow one (baseline: alone)",
        "events/s",
        [s[2] for s in slow],
        [a[2] for a in alone],
        target=f"ratio >= {NO_SLOWER}",
    )
    fast.met = (fast.ratio or 0) >= NO_SLOWER
    return [rss, memory, duration, fast]
