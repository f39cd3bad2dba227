"""Benchmark-only instruments installed into the neta server process by ``server_config.py``.

* ``bench-stamp:<count>:<interval>`` — a model that yields its wall-clock time as each text
  delta, one every ``interval`` seconds (B2 measures delivery latency from these stamps);
* ``GET {base}neta-bench/lag?action=start|stop`` — the event-loop lag monitor (B4).

This patches the product classes in the benchmark server only; nothing here ships.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import Any

from tornado import web
from tornado.ioloop import IOLoop

from benchmarks.lag import MONITOR
from neta_jupyter.providers import Model, ModelRegistry, ModelRequest, StreamPart, TextPart
from neta_jupyter.providers.base import ToolDefinition
from neta_jupyter.server.app import NetaApp
from neta_jupyter.store.db import Database
from neta_jupyter.tools.registry import Tool


class StampModel:
    """Yields ``"<time.time()> "`` ``count`` times, paced at ``interval`` seconds."""

    def __init__(self, count: int, interval: float) -> None:
        self.count = count
        self.interval = interval

    @property
    def name(self) -> str:
        return f"bench-stamp:{self.count}:{self.interval}"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(self.count):
            delay = start + i * self.interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            yield TextPart(f"{time.time():.6f} ")


class TextModel:
    """Yields ``count`` text deltas as fast as they are taken, each made as it is yielded (as a
    provider reading the network does), where the scripted model makes all its parts first."""

    def __init__(self, count: int, token: str = "tok ") -> None:
        self.count = count
        self.token = token

    @property
    def name(self) -> str:
        return f"bench-text:{self.count}"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        for _ in range(self.count):
            yield TextPart(self.token)


class LagHandler(web.RequestHandler):
    def get(self) -> None:
        self.write(MONITOR.act(self.get_query_argument("action")))


def _experiments(names: str) -> None:
    """Changes outside the streaming path, tried in the benchmark server only (``--experiment``)."""
    chosen = {n for n in names.split(",") if n}
    if "gc-freeze" in chosen:
        IOLoop.current().add_callback(gc.freeze)
    if "tool-schema-cache" in chosen:
        definition = Tool.definition.fget
        cache: dict[str, ToolDefinition] = {}

        def cached(self: Tool) -> ToolDefinition:
            if self.name not in cache:
                cache[self.name] = definition(self)  # type: ignore[misc]
            return cache[self.name]

        Tool.definition = property(cached)  # type: ignore[assignment,method-assign]
    if "slow-callbacks" in chosen:
        _log_slow_callbacks(float(os.environ.get("BENCH_SLOW_CALLBACK", "0.03")))
    if "gc-pauses" in chosen:
        _log_gc_pauses(float(os.environ.get("BENCH_SLOW_CALLBACK", "0.03")) / 3)
    if "commit-costs" in chosen:
        _log_commit_costs()


def _log_commit_costs() -> None:
    """Log, every 5 s, the group commits of the interval: count, events, wall and CPU time."""
    log = logging.getLogger("neta_jupyter.bench")
    commit, transaction = Database.commit, Database._transaction
    totals = {"commits": 0, "events": 0, "wall": 0.0, "cpu": 0.0, "worst": 0.0, "sql": 0.0}

    def timed_transaction(self: Database, statements: Any) -> None:
        began = time.perf_counter()
        try:
            transaction(self, statements)
        finally:
            totals["sql"] += time.perf_counter() - began

    since = [time.monotonic()]

    def timed(self: Database) -> None:
        events = self._pending_count
        began, cpu = time.perf_counter(), time.thread_time()
        commit(self)
        took = time.perf_counter() - began
        totals["commits"] += 1
        totals["events"] += events
        totals["wall"] += took
        totals["cpu"] += time.thread_time() - cpu
        totals["worst"] = max(totals["worst"], took)
        if (now := time.monotonic()) - since[0] >= 5 and totals["commits"]:
            n = totals["commits"]
            log.warning(
                "commits in %.1f s: %d, %.1f events each, %.0f µs wall (%.0f on the CPU, "
                "%.0f in the SQL transaction) each, worst %.1f ms, %.0f %% of the time",
                now - since[0], n, totals["events"] / n, totals["wall"] / n * 1e6,
                totals["cpu"] / n * 1e6, totals["sql"] / n * 1e6, totals["worst"] * 1e3,
                100 * totals["wall"] / (now - since[0]),
            )  # fmt: skip
            since[0] = now
            totals.update(commits=0, events=0, wall=0.0, cpu=0.0, worst=0.0, sql=0.0)

    Database.commit = timed  # type: ignore[method-assign]
    Database._transaction = timed_transaction  # type: ignore[method-assign]


def _log_gc_pauses(threshold: float) -> None:
    """Log every garbage collection that pauses the server longer than ``threshold`` seconds."""
    log = logging.getLogger("neta_jupyter.bench")
    began = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
            return
        took = time.perf_counter() - began[0]
        if took > threshold:
            log.warning(
                "gc pause %.1f ms: generation %d, %d collected, %s tracked per generation",
                took * 1000,
                info["generation"],
                info["collected"],
                gc.get_count(),
            )

    gc.callbacks.append(timed)


def _describe(handle: asyncio.events.Handle) -> str:
    """The handle, and for a task step the chain of coroutines it stopped in."""
    task = getattr(getattr(handle, "_callback", None), "__self__", None)
    if not isinstance(task, asyncio.Task):
        return repr(handle)
    chain = []
    awaited: Any = task.get_coro()
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "ag_frame", None)
        if frame is None:
            break
        chain.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "ag_await", None)
    return "task " + " > ".join(chain)


def _log_slow_callbacks(threshold: float) -> None:
    """Log every event-loop callback that runs longer than ``threshold`` seconds (diagnostic)."""
    run = asyncio.events.Handle._run
    log = logging.getLogger("neta_jupyter.bench")

    def timed(self: asyncio.events.Handle) -> None:
        began = time.perf_counter()
        run(self)
        took = time.perf_counter() - began
        if took > threshold:
            log.warning("slow callback %.1f ms: %s", took * 1000, _describe(self))

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]
    run_once = asyncio.base_events.BaseEventLoop._run_once  # type: ignore[attr-defined]

    def timed_turn(self: asyncio.base_events.BaseEventLoop) -> None:
        ready = len(self._ready)  # type: ignore[attr-defined]
        began, cpu = time.perf_counter(), time.thread_time()
        run_once(self)
        took = time.perf_counter() - began
        if took > threshold:
            log.warning(
                "slow turn %.1f ms (%.1f ms on the CPU), %d callbacks ready",
                took * 1000,
                (time.thread_time() - cpu) * 1000,
                ready,
            )

    asyncio.base_events.BaseEventLoop._run_once = timed_turn  # type: ignore[attr-defined]


def install() -> None:
    resolve = ModelRegistry.resolve

    def resolve_with_stamp(self: ModelRegistry, spec: str) -> Model:
        if spec.startswith("bench-stamp:"):
            _, count, interval = spec.split(":")
            return StampModel(int(count), float(interval))
        if spec.startswith("bench-text:"):
            return TextModel(int(spec.split(":")[1]))
        return resolve(self, spec)

    ModelRegistry.resolve = resolve_with_stamp  # type: ignore[method-assign]

    initialize_handlers = NetaApp.initialize_handlers

    def with_lag_handler(self: NetaApp, *args: Any) -> None:
        initialize_handlers(self, *args)
        self.handlers.append((r"/neta-bench/lag", LagHandler))
        _experiments(os.environ.get("BENCH_EXPERIMENTS", ""))

    NetaApp.initialize_handlers = with_lag_handler  # type: ignore[method-assign]
