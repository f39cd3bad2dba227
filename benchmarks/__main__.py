"""``python -m benchmarks [FIGURE ...] [--quick] [--repeats N] [--json FILE]``: run and tabulate."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from . import (
    b1_throughput,
    b2_latency,
    b3_replay,
    b4_fanout,
    b5_memory,
    b6_widget,
    b7_long_answers,
    b8_chunk_cpu,
    b9_bytes,
    b10_first_token,
    b11_capacity,
    b12_widget_cost,
)
from .harness import EXPERIMENTS, Row, Settings
from .table import render

FIGURES: dict[str, Callable[[Settings], Awaitable[list[Row]]]] = {
    "B1": b1_throughput.run,
    "B2": b2_latency.run,
    "B3": b3_replay.run,
    "B4": b4_fanout.run,
    "B5": b5_memory.run,
    "B6": b6_widget.run,
    "B7": b7_long_answers.run,
    "B8": b8_chunk_cpu.run,
    "B9": b9_bytes.run,
    "B10": b10_first_token.run,
    "B11": b11_capacity.run,
    "B12": b12_widget_cost.run,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("figures", nargs="*", metavar="FIGURE", help="B1 … B12 (default: all)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--repeats", type=int, default=None, help="repetitions per figure")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the servers' data folders")
    parser.add_argument(
        "--store",
        choices=("sqlite", "redis"),
        default="sqlite",
        help="where the server under test keeps runs (redis: a local redis-server, AOF always)",
    )
    parser.add_argument(
        "--experiment",
        action="append",
        default=[],
        choices=sorted(EXPERIMENTS),
        help="apply a change outside the streaming path in the server under test (repeatable)",
    )
    parser.add_argument(
        "--runs",
        default="",
        help="B11: only these numbers of concurrent runs, comma-separated (e.g. 40 or 40,80)",
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        help="B11: record the server with py-spy during each level into this folder",
    )
    args = parser.parse_args(argv)
    chosen = [f.upper() for f in args.figures] or list(FIGURES)
    unknown = [f for f in chosen if f not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(FIGURES)}")
    os.environ["BENCH_EXPERIMENTS"] = ",".join(args.experiment)
    settings = Settings(quick=args.quick, store=args.store, py_spy=args.py_spy)
    settings.runs = tuple(int(n) for n in args.runs.split(",") if n.strip())
    settings.repeats = args.repeats or (1 if args.quick else 3)
    rows: list[Row] = []
    load_before = os.getloadavg()[0]
    try:
        for name in chosen:
            began = time.perf_counter()
            found = asyncio.run(FIGURES[name](settings))
            if settings.store != "sqlite":
                for row in found:
                    row.figure = f"{row.figure} [store {settings.store}]"
            rows += found
            print(f"{name}: {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
            for row in found:
                print(render([row], header=False), file=sys.stderr, flush=True)
    finally:
        settings.close()
        if not args.keep:
            shutil.rmtree(settings.workdir, ignore_errors=True)
    print(render(rows))
    print(
        f"\n{os.cpu_count()} CPUs; 1-minute load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after (each figure keeps about two busy: server and client; "
        "more means other work shared the machine)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps([row.__dict__ for row in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
