"""B11 runs per server at real pace: how many runs one server process carries, each streaming.

N runs at once, each a benchmark model that yields a delta stamped with its wall-clock time 60
times a second (a real model's pace) for ``SECONDS``, each followed by one SSE client; the
clients run in ``WORKERS`` separate processes (each starts its share of the runs, then follows
them with a lean SSE reader, ``b11_worker.py``). Once every run has started, the in-server
monitor records the event loop's lag until shortly before the runs end. A level holds if the
lag p99 and the delivery p99 (stamp to the client parsing the delta) are both within 50 ms; N
doubles from ``LEVELS[0]`` until one does not, then ``BISECT_STEPS`` levels halve the gap below
it. Reported: the largest N that held, the lag and delivery p99 at it, and the server's CPU per
token there (over the monitored window).

Baselines: for the capacity, the same sweep in the same run against the bare server
(``bare_server.py``'s ``/paced``: a stamped frame written and flushed every 1/60 s per stream,
nothing else), the most one process of this machine carries beside these clients; for the
rest, the same figures at the smallest level.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .harness import (
    REPO,
    BareServer,
    NetaServer,
    Row,
    Settings,
    _child_env,
    bare_server,
    neta_server,
    percentile,
)

RATE = 60
SECONDS = 12.0
LEVELS = (125, 250, 500, 1000, 2000)
QUICK_LEVELS = (10, 20)
WORKERS = 4
LIMIT_MS = 50.0
BISECT_STEPS = 2
"""Levels tried after the doubling, each halving the gap between the largest N that held and the
smallest that did not: the doubling alone reports a bound up to half below the capacity."""
TARGET_RUNS = 1000


@dataclass
class Level:
    runs: int
    lag_p99: float
    delivery_p99: float
    cpu_per_token_us: float
    completed: int

    @property
    def held(self) -> bool:
        good = self.completed == self.runs
        return good and self.lag_p99 <= LIMIT_MS and self.delivery_p99 <= LIMIT_MS


def _py_spy(server: NetaServer | BareServer, folder: Path | None, runs: int, seconds: float) -> Any:
    """py-spy recording the server for ``seconds`` (``--py-spy``), or None."""
    if folder is None:
        return None
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"b11-{runs}-{server.pid}.txt"
    command = [exe, "record", "--nonblocking", "-f", "raw", "-r", "200", "-p", str(server.pid)]
    command += os.environ.get("BENCH_PY_SPY_ARGS", "").split()  # e.g. --gil
    return subprocess.Popen(
        [*command, "-d", str(max(1, int(seconds))), "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _level(
    server: NetaServer | BareServer, runs: int, seconds: float, spy: Path | None = None
) -> Level:
    bare = isinstance(server, BareServer)
    model = f"{'bare' if bare else 'bench-stamp'}:{round(RATE * seconds)}:{1 / RATE}"
    token = "" if bare else server.token
    shares = [runs // WORKERS + (i < runs % WORKERS) for i in range(WORKERS)]
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.b11_worker",
                server.base,
                token,
                model,
                str(n),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=_child_env(),
            cwd=REPO,
        )
        for n in shares
        if n
    ]
    for worker in workers:
        assert worker.stdout is not None
        if worker.stdout.readline().strip() != "started":
            raise RuntimeError("a B11 client process failed to start its runs")
    server.lag("start")
    cpu, began = server.cpu(), time.monotonic()
    recorder = _py_spy(server, spy, runs, max(1.0, seconds * 0.6))
    time.sleep(max(1.0, seconds * 0.6))
    lags = server.lag("stop")["samples"]
    used, window = server.cpu() - cpu, time.monotonic() - began
    if recorder is not None:
        recorder.wait(60)
    latencies: list[float] = []
    completed = 0
    for worker in workers:
        out, _ = worker.communicate(timeout=600)
        found = json.loads(out.strip().splitlines()[-1])
        latencies += found["latencies"]
        completed += found["completed"]
    level = Level(
        runs,
        percentile(lags, 0.99) * 1000,
        percentile(latencies, 0.99),
        used / (runs * RATE * window) * 1e6,
        completed,
    )
    print(
        f"  B11 {'bare ' if bare else ''}{runs} runs: lag p99 {level.lag_p99:.1f} ms, delivery p99 "
        f"{level.delivery_p99:.1f} ms, {level.cpu_per_token_us:.1f} µs CPU per token, "
        f"{completed} completed",
        file=sys.stderr,
        flush=True,
    )
    return level


def _sweep(settings: Settings, bare: bool = False) -> list[Level]:
    """The levels tried: ``--runs`` as given, else doubling until one does not hold, then halving
    the gap below it (``BISECT_STEPS``). ``bare``: against the bare server."""
    seconds = 4.0 if settings.quick else SECONDS
    found: list[Level] = []
    serving = bare_server(settings) if bare else neta_server(settings)
    with serving as server:

        def holds(runs: int) -> bool:
            found.append(_level(server, runs, seconds, None if bare else settings.py_spy))
            return found[-1].held

        if settings.runs:
            for runs in settings.runs:
                holds(runs)
            return found
        low, high = 0, 0
        for runs in QUICK_LEVELS if settings.quick else LEVELS:
            if not holds(runs):
                high = runs
                break
            low = runs
        for _ in range(BISECT_STEPS if high else 0):
            middle = (low + high) // 2
            if middle in (low, high):
                break
            low, high = (middle, high) if holds(middle) else (low, middle)
    return found


async def run(settings: Settings) -> list[Row]:
    sweeps, bares = [], []
    for _ in range(settings.repeats):
        sweeps.append(await asyncio.to_thread(_sweep, settings))
        bares.append(await asyncio.to_thread(_sweep, settings, True))
    best = [_largest(s) for s in sweeps]
    bare_best = [_largest(s) for s in bares]
    first = [s[0] for s in sweeps]
    held = [b for b in best if b is not None]
    tried = ", ".join(str(n) for n in sorted({lv.runs for s in sweeps for lv in s}))
    capacity = Row(
        f"B11 concurrent runs at {RATE} tokens/s, one SSE follower each, with lag and delivery "
        f"p99 <= {LIMIT_MS:g} ms (tried {tried}; baseline: the bare server)",
        "runs",
        [float(b.runs) if b else 0.0 for b in best],
        [float(b.runs) if b else 0.0 for b in bare_best],
        target=f">= {TARGET_RUNS:,}",
    )
    capacity.met = (capacity.median or 0) >= TARGET_RUNS
    return [
        capacity,
        Row(
            "B11 server CPU per token at the largest N that held (baseline: at the smallest N)",
            "µs",
            [b.cpu_per_token_us for b in held],
            [f.cpu_per_token_us for f in first],
        ),
        Row(
            "B11 delivery p99 at the largest N that held (baseline: at the smallest N)",
            "ms",
            [b.delivery_p99 for b in held],
            [f.delivery_p99 for f in first],
        ),
    ]


def _largest(levels: list[Level]) -> Level | None:
    """The level with the most runs that held, if any did."""
    return max((lv for lv in levels if lv.held), key=lambda lv: lv.runs, default=None)
