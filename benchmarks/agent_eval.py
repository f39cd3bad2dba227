"""``python -m benchmarks.agent_eval --model <endpoint:model>``: can a model do small, real work?

Twelve small tasks (:mod:`benchmarks.agent_tasks`): facts in files, counts and sums over a CSV,
variables in the kernel, a plot. A temporary folder gets the files and a local Python kernel
gets the variables; each task is one run through the embedded runtime (every tool, calls
approved automatically), and its answer is checked for the expected fact. Prints pass or fail
per task and the pass rate. A measurement, not a test: it needs a model server.

The model is selected as everywhere else: ``openai:<model>`` with ``OPENAI_BASE_URL`` pointing at
the server, or an endpoint of ``c.NetaApp.endpoints`` in the Jupyter config file given with
``--config`` (``compact``, ``tools`` and ``max_tokens`` apply as configured there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from traitlets.config import Config, PyFileConfigLoader

from neta_jupyter.providers import ModelRegistry
from neta_jupyter.runtime import Runtime, RuntimeConfig
from neta_jupyter.store import Store
from neta_jupyter.terminal.local_kernel import LocalKernel
from neta_jupyter.tools import ToolRegistry, builtin_tools
from neta_jupyter.tools.kernel_tools import kernel_tools

from .agent_tasks import KERNEL_SETUP, Outcome, Task, tasks, write_files

TERMINAL = {"MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED"}


def main(argv: list[str] | None = None) -> int:
    """Run the tasks and print the report; the exit status is 0 whatever the pass rate."""
    args = _parser().parse_args(argv)
    try:
        results = asyncio.run(evaluate(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("stopped", file=sys.stderr)
        return 130
    passed = sum(ok for _, ok, _ in results)
    print(f"\npass rate: {passed}/{len(results)} with {args.model}")
    if args.json:
        rows = [{"task": t.name, "passed": ok, **asdict(o)} for t, ok, o in results]
        Path(args.json).write_text(json.dumps({"model": args.model, "results": rows}, indent=1))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.agent_eval", description=__doc__)
    parser.add_argument("--model", required=True, help="endpoint:model, e.g. openai:qwen")
    parser.add_argument("--config", help="a Jupyter config file with c.NetaApp.endpoints")
    parser.add_argument("--tasks", help="comma-separated task names (default: all)")
    parser.add_argument("--max-steps", type=int, default=10, help="model calls per task")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per task")
    parser.add_argument("--json", help="also write the results to this file")
    return parser


def endpoints_from(path: str | None) -> dict[str, Any]:
    """``c.NetaApp.endpoints`` of a Jupyter config file (none without one)."""
    if path is None:
        return {}
    file = Path(path).expanduser().resolve()
    config: Config = PyFileConfigLoader(file.name, str(file.parent)).load_config()
    return dict(config.NetaApp.get("endpoints", {}))


async def evaluate(args: argparse.Namespace) -> list[tuple[Task, bool, Outcome]]:
    """Every selected task, in order, with a fresh session each."""
    chosen = [t for t in tasks() if not args.tasks or t.name in args.tasks.split(",")]
    # Stopped with SIGTERM like with Ctrl-C: the run ends and the kernel is shut down.
    if (current := asyncio.current_task()) is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, current.cancel)
    with tempfile.TemporaryDirectory(prefix="neta-eval-") as tmp:
        root, data = Path(tmp) / "work", Path(tmp) / "data"
        root.mkdir()
        write_files(root)
        kernel = LocalKernel(root, log_file=Path(tmp) / "kernel.log")
        store = Store(data / "neta.sqlite3")
        runtime = Runtime(
            store,
            RuntimeConfig(root_dir=root, data_dir=data, max_steps=args.max_steps),
            models=ModelRegistry(endpoints=endpoints_from(args.config)),
            tools=ToolRegistry(builtin_tools() + kernel_tools()),
            kernels=lambda _run: kernel,
        )
        results = []
        try:
            for task in chosen:
                # Every task starts from the same variables, whatever code the last one ran.
                await kernel.execute(KERNEL_SETUP)
                outcome = await run_task(runtime, task, args)
                ok = task.check(outcome)
                results.append((task, ok, outcome))
                _report(task, ok, outcome)
        finally:
            await kernel.close()
            store.close()
    return results


async def run_task(runtime: Runtime, task: Task, args: argparse.Namespace) -> Outcome:
    """One run of the task's prompt, to its end (or the timeout)."""
    began = time.monotonic()
    run = await runtime.start("eval", task.prompt, model=args.model, approve="auto")
    try:
        await asyncio.wait_for(runtime.wait(run.request_id), args.timeout)
    except TimeoutError:
        await runtime.terminate("eval", run.request_id)
    except asyncio.CancelledError:  # Ctrl-C: stop the run too, so the kernel can be shut down
        await runtime.terminate("eval", run.request_id)
        raise
    stored = await runtime.store.events.read_after(run.request_id, -1)
    events = [json.loads(e.payload) for e in stored]
    return outcome_of(events, time.monotonic() - began)


def outcome_of(events: list[dict[str, Any]], seconds: float) -> Outcome:
    """What the model answered, which tools it used, how the run ended."""
    answer: list[str] = []
    tools: list[str] = []
    trace: list[str] = []
    images = 0
    ending = "none"
    for event in events:
        kind, data = event["eventType"], event.get("data") or {}
        if kind == "TEXT_DELTA" or (kind == "TEXT_START" and data.get("text")):
            answer.append(data.get("text") or "")
        elif kind == "TOOL_START":
            tools.append(str(data.get("toolName")))
            trace.append(f"{data.get('toolName')}({data.get('arguments', '')[:300]})")
        elif kind in ("TOOL_COMPLETED", "TOOL_FAILED"):
            images += len(data.get("images") or [])
            result = data.get("output") or data.get("errorMessage") or ""
            trace.append(f"  -> {kind.removeprefix('TOOL_').lower()}: {result[:300]}")
        elif kind in TERMINAL:
            reason = data.get("finishReason") or data.get("errorCode") or ""
            ending = f"{kind.removeprefix('MESSAGE_').lower()} {reason}".strip()
    steps = max((int(e.get("step") or 0) for e in events), default=0)
    return Outcome("".join(answer), tools, images, ending, round(seconds, 1), steps, trace)


def _report(task: Task, ok: bool, outcome: Outcome) -> None:
    answer = " ".join(outcome.answer.split())
    shown = answer if len(answer) <= 100 else answer[:99] + "…"
    tools = ",".join(outcome.tools) or "-"
    print(
        f"{'PASS' if ok else 'FAIL'}  {task.name:<17} {outcome.seconds:6.1f} s  "
        f"{outcome.steps:>2} steps  {outcome.ending:<20} tools: {tools}\n"
        f"      expected {task.expected!r}; answered: {shown}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
