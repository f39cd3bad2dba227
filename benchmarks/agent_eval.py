"""``python -m benchmarks.agent_eval --model <endpoint:model>``: can a model do small, real work?

Twelve small tasks (:mod:`benchmarks.agent_tasks`): facts in files, counts and sums over a CSV,
variables in the kernel, a plot; and eight tasks in a notebook (:mod:`benchmarks.notebook_tasks`):
add and run a cell, fix a failing one, explain an error, plot, edit a cell the user changed
meanwhile, delete, summarise, write a markdown cell. A temporary folder gets the files and a
local Python kernel gets the variables; each task is one run through the embedded runtime (every
tool, calls approved automatically; a notebook task's run is bound to the notebook and that
kernel), checked for the expected fact in the answer, or in the notebook as saved and the kernel.
The report also counts the passed tasks whose run ended with the model's answer rather than at
the step limit or stopped for repeating a call (the fact holds, but the user got no answer).
Prints pass or fail per task, the pass rate, and how many failed calls the model followed with
another call (a retry) rather than an answer. A measurement, not a test: it needs a model server.

The model is selected as everywhere else: ``openai:<model>`` with ``OPENAI_BASE_URL`` pointing at
the server, or an endpoint of ``c.NetaApp.endpoints`` in the Jupyter config file given with
``--config`` (``compact``, ``tools`` and ``max_tokens`` apply as configured there).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import signal
import sys
import tempfile
import time
from collections.abc import Callable
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
from neta_jupyter.tools.notebook_tools import notebook_tools
from neta_jupyter.tools.registry import RunNotebook

from . import notebook_tasks as nb
from .agent_tasks import KERNEL_SETUP, Outcome, Task, tasks, write_files

TERMINAL = {"MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED"}
ANSWERED = "completed STOP"
"""The ending of a run the model ended with its answer."""


def main(argv: list[str] | None = None) -> int:
    """Run the tasks and print the report; the exit status is 0 whatever the pass rate."""
    args = _parser().parse_args(argv)
    try:
        results = asyncio.run(evaluate(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("stopped", file=sys.stderr)
        return 130
    for suite, chosen in (("files", False), ("notebook", True)):
        mine = [(t, ok, o) for t, ok, o in results if t.notebook == chosen]
        if mine:
            passed = sum(ok for _, ok, _ in mine)
            answered = sum(ok and o.ending == ANSWERED for _, ok, o in mine)
            failed, retried = sum(o.failed for *_, o in mine), sum(o.retried for *_, o in mine)
            print(
                f"\n{suite} tasks: {passed}/{len(mine)} passed with {args.model}, {answered} of "
                f"them ending with an answer; {failed} failed calls, {retried} followed by "
                "another call"
            )
    if args.json:
        rows = [{"task": t.name, "passed": ok, **asdict(o)} for t, ok, o in results]
        Path(args.json).write_text(json.dumps({"model": args.model, "results": rows}, indent=1))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.agent_eval", description=__doc__)
    parser.add_argument("--model", required=True, help="endpoint:model, e.g. openai:qwen")
    parser.add_argument("--config", help="a Jupyter config file with c.NetaApp.endpoints")
    parser.add_argument("--tasks", help="comma-separated task names (default: all)")
    parser.add_argument(
        "--suite", choices=("all", "files", "notebook"), default="all", help="which tasks"
    )
    parser.add_argument("--max-steps", type=int, default=10, help="model calls per task")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per task")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--recover",
        action="store_true",
        help="ask a model that answers right after a failed step to retry (recover_after_failure)",
    )
    return parser


def endpoints_from(path: str | None) -> dict[str, Any]:
    """``c.NetaApp.endpoints`` of a Jupyter config file (none without one)."""
    if path is None:
        return {}
    file = Path(path).expanduser().resolve()
    config: Config = PyFileConfigLoader(file.name, str(file.parent)).load_config()
    return dict(config.NetaApp.get("endpoints", {}))


def chosen_tasks(args: argparse.Namespace) -> list[Task]:
    """The tasks the arguments select."""
    every = tasks() + nb.notebook_tasks()
    if args.suite != "all":
        every = [t for t in every if t.notebook == (args.suite == "notebook")]
    return [t for t in every if not args.tasks or t.name in args.tasks.split(",")]


async def evaluate(args: argparse.Namespace) -> list[tuple[Task, bool, Outcome]]:
    """Every selected task, in order, with a fresh session each."""
    chosen = chosen_tasks(args)
    # Stopped with SIGTERM like with Ctrl-C: the run ends and the kernel is shut down.
    if (current := asyncio.current_task()) is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, current.cancel)
    with tempfile.TemporaryDirectory(prefix="neta-eval-") as tmp:
        root, data = Path(tmp) / "work", Path(tmp) / "data"
        root.mkdir()
        write_files(root)
        kernel = LocalKernel(root, log_file=Path(tmp) / "kernel.log")
        notebook = nb.FileNotebook(root)
        store = Store(data / "neta.sqlite3")
        runtime = Runtime(
            store,
            RuntimeConfig(
                root_dir=root,
                data_dir=data,
                max_steps=args.max_steps,
                recover_after_failure=args.recover,
            ),
            models=ModelRegistry(endpoints=endpoints_from(args.config)),
            tools=ToolRegistry(builtin_tools() + kernel_tools() + notebook_tools()),
            kernels=lambda _run: kernel,
            notebooks=lambda run: (
                RunNotebook(notebook, run.prompt) if run.options.notebook_path else None
            ),
        )
        results = []
        try:
            for task in chosen:
                # Every task starts from the same variables, whatever code the last one ran.
                await kernel.execute(nb.KERNEL_SETUP if task.notebook else KERNEL_SETUP)
                notebook.reset()
                outcome = await run_task(runtime, task, args)
                outcome = await _after(task, outcome, kernel, root)
                ok = task.check(outcome)
                results.append((task, ok, outcome))
                _report(task, ok, outcome)
        finally:
            await kernel.close()
            store.close()
    return results


async def _after(task: Task, outcome: Outcome, kernel: LocalKernel, root: Path) -> Outcome:
    """A notebook task's outcome with the notebook as saved and what its probe printed."""
    if not task.notebook:
        return outcome
    saved = json.loads((root / nb.PATH).read_text())
    probe = (await kernel.execute(task.probe)).output if task.probe else ""
    return dataclasses.replace(outcome, notebook=saved, probe=probe)


async def run_task(runtime: Runtime, task: Task, args: argparse.Namespace) -> Outcome:
    """One run of the task's prompt, to its end (or the timeout)."""
    began = time.monotonic()
    path = nb.PATH if task.notebook else None
    run = await runtime.start(
        "eval", task.prompt, model=args.model, approve="auto", notebook_path=path
    )
    try:
        if task.meanwhile is not None:
            await _meanwhile(runtime, run.request_id, task.meanwhile, runtime.config.root_dir)
        await asyncio.wait_for(runtime.wait(run.request_id), args.timeout)
    except TimeoutError:
        await runtime.terminate("eval", run.request_id)
    except asyncio.CancelledError:  # Ctrl-C: stop the run too, so the kernel can be shut down
        await runtime.terminate("eval", run.request_id)
        raise
    stored = await runtime.store.events.read_after(run.request_id, -1)
    events = [json.loads(e.payload) for e in stored]
    return outcome_of(events, time.monotonic() - began)


async def _meanwhile(
    runtime: Runtime, request_id: str, change: Callable[[dict[str, Any]], None], root: Path
) -> None:
    """Once the model was asked for the first step, the user changes the saved notebook."""
    while True:
        stored = await runtime.store.events.read_after(request_id, -1)
        if any('"calling_model"' in e.payload for e in stored):
            break
        if any(json.loads(e.payload)["eventType"] in TERMINAL for e in stored):
            return
        await asyncio.sleep(0.1)
    content = json.loads((root / nb.PATH).read_text())
    change(content)
    (root / nb.PATH).write_text(json.dumps(content, indent=1))


def outcome_of(events: list[dict[str, Any]], seconds: float) -> Outcome:
    """What the model answered, which tools it used, how the run ended."""
    answer: list[str] = []
    tools: list[str] = []
    trace: list[str] = []
    images = failed = retried = pending = 0
    ending = "none"
    for event in events:
        kind, data = event["eventType"], event.get("data") or {}
        if kind == "TEXT_DELTA" or (kind == "TEXT_START" and data.get("text")):
            answer.append(data.get("text") or "")
        elif kind == "TOOL_START":
            retried, pending = retried + pending, 0
            tools.append(str(data.get("toolName")))
            trace.append(f"{data.get('toolName')}({data.get('arguments', '')[:300]})")
        elif kind in ("TOOL_COMPLETED", "TOOL_FAILED"):
            images += len(data.get("images") or [])
            if kind == "TOOL_FAILED":
                failed, pending = failed + 1, pending + 1
            result = data.get("output") or data.get("errorMessage") or ""
            trace.append(f"  -> {kind.removeprefix('TOOL_').lower()}: {result[:300]}")
        elif kind in TERMINAL:
            reason = data.get("finishReason") or data.get("errorCode") or ""
            ending = f"{kind.removeprefix('MESSAGE_').lower()} {reason}".strip()
    steps = max((int(e.get("step") or 0) for e in events), default=0)
    return Outcome(
        "".join(answer), tools, images, ending, round(seconds, 1), steps, trace, failed, retried
    )


def _report(task: Task, ok: bool, outcome: Outcome) -> None:
    answer = " ".join(outcome.answer.split())
    shown = answer if len(answer) <= 100 else answer[:99] + "…"
    tools = ",".join(outcome.tools) or "-"
    print(
        f"{'PASS' if ok else 'FAIL'}  {task.name:<17} {outcome.seconds:6.1f} s  "
        f"{outcome.steps:>2} steps  {outcome.ending:<20} tools: {tools}"
        f"{f'  (failed {outcome.failed}, retried {outcome.retried})' if outcome.failed else ''}\n"
        f"      expected {task.expected!r}; answered: {shown}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
