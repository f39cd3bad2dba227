"""B6 widget: the run widget in a real JupyterLab page in headless Chromium.

A JupyterLab server with the extension (``b6_lab.py``) and one notebook page per repetition. A
run is a scripted answer of words ``w0 w1 …``, one text delta each, paced at a given rate for a
few seconds. For the widget, the benchmark runs a ``%neta`` cell with that model; for the bare
baseline, a plain client in the same page follows the same kind of run over the same WebSocket
and appends each delta's text to a div (``b6_page.BARE``). Two figures, each for both:

* the highest rate with no main-thread task over 50 ms: rates are tried upwards, doubling, until
  one has such a task (PerformanceObserver ``longtask``) from the moment the cell (or the bare
  client) is started until the text has been on screen, unchanged, for a second;
* arrival to text on screen, p99 over the deltas of the run at ``LATENCY_RATE``: from the batch
  reaching the transport to the end of the frame that paints it (``b6_page.PROBE``).

Without Chromium the figure is skipped with a message, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from .b6_lab import JupyterProcess, chromium, chromium_path, open_notebook, write_notebook
from .b6_page import BARE, PROBE, describe
from .harness import Row, Settings, percentile

RATES = (500, 1000, 2000, 4000, 8000, 16000)
QUICK_RATES = (1000, 2000)
LATENCY_RATE = 2000
"""Rate of the run whose arrival-to-screen times are reported (the one issue #3 names)."""
SECONDS = 3.0
CLEAN_RATE_TARGET = 8000
"""The highest clean rate must leave a margin of four times over ``LATENCY_RATE``."""
WARM_UP_RATE, WARM_UP_SECONDS = 1000, 0.1
QUICK_SECONDS = 0.5
LONG_TASK_MS = 50.0
QUIET_MS = 1000
"""The text is on screen for good once the watched element has not changed for this long (the
kernel's refresh of the output at the end of the run re-creates the view within it)."""
RUN_TIMEOUT_MS = 60_000

SETUP_CELL = "%load_ext neta_jupyter\nfrom pathlib import Path"
BARE_CELL = 'print("the bare client writes below")'
WIDGET_CELL = (
    'model = Path("b6-model.txt").read_text()\n'
    'get_ipython().run_line_magic("neta", f"--model {model} go");'
)
BARE_INDEX, WIDGET_INDEX = 1, 2

# The answer of the newest view in the widget's cell (not of the one the run before left).
ARM_WIDGET = """
([index, old]) => {
  const b6 = window.__b6;
  const cell = b6.cell(index);
  return b6.arm(cell, () => {
    const view = b6.lastView(cell);
    const fresh = view && view.dataset.requestId !== old;
    return fresh ? view.querySelector("[data-testid=neta-answer]") : null;
  });
}
"""
SHOW_OUTPUT = """
([index, show]) => {
  const output = window.__b6.cell(index).querySelector(".jp-Cell-outputWrapper");
  if (output) output.style.display = show ? "" : "none";
}
"""
SETTLED = """
([last, quiet, index]) => {
  const b6 = window.__b6;
  if (b6.shown < last || performance.now() - b6.changedAt < quiet) return false;
  if (index < 0) return true;
  const view = b6.lastView(b6.cell(index));
  const answer = view && view.querySelector("[data-testid=neta-answer]");
  return !!answer && view.dataset.status === "completed" && b6.lastWord(answer) === last;
}
"""


@dataclass
class Step:
    """One run at one rate."""

    rate: int
    long_tasks: list[float]
    """Durations (ms) of the main-thread tasks over 50 ms."""
    latencies: list[float] = field(default_factory=list)
    """Arrival to text on screen (ms), one per delta."""


@dataclass
class Sweep:
    """The runs of one side (widget or bare) in one repetition, lowest rate first."""

    steps: list[Step] = field(default_factory=list)

    @property
    def highest(self) -> int:
        """The highest rate that, like every rate below it, had no task over 50 ms (0: none)."""
        best = 0
        for step in self.steps:
            if step.long_tasks:
                break
            best = step.rate
        return best

    def p99(self) -> float:
        return next(percentile(s.latencies, 0.99) for s in self.steps if s.rate == LATENCY_RATE)


async def run(settings: Settings) -> list[Row]:
    rates = QUICK_RATES if settings.quick else RATES
    seconds = QUICK_SECONDS if settings.quick else SECONDS
    rate_figure = (
        "B6 widget: highest delta rate with no main-thread task over 50 ms "
        f"(tried {rates[0]:,} … {rates[-1]:,}/s, doubling, {seconds:g} s each)"
    )
    latency_figure = f"B6 widget: arrival to text on screen p99, {LATENCY_RATE:,} deltas/s"
    missing = _missing()
    if missing:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"CI=true but B6 cannot run: {missing}")
        print(f"B6 skipped: {missing}", file=sys.stderr, flush=True)
        return [Row(rate_figure, "", [], note=missing), Row(latency_figure, "", [], note=missing)]
    results = await asyncio.to_thread(_measure, settings, rates, seconds)
    widget = [w for w, _ in results]
    bare = [b for _, b in results]
    return [
        Row(
            rate_figure,
            "deltas/s",
            [float(s.highest) for s in widget],
            [float(s.highest) for s in bare],
            target=f">= {CLEAN_RATE_TARGET:,}",
            met=sorted(s.highest for s in widget)[len(widget) // 2] >= CLEAN_RATE_TARGET,
        ),
        Row(latency_figure, "ms", [s.p99() for s in widget], [s.p99() for s in bare]),
    ]


def _missing() -> str:
    """Why the browser part cannot run here ("" when it can)."""
    if chromium_path() is None:
        return "Chromium is not installed (Debian package chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e .[test])"
    return ""


def _measure(
    settings: Settings, rates: tuple[int, ...], seconds: float
) -> list[tuple[Sweep, Sweep]]:
    path = chromium_path()
    assert path is not None
    lab = JupyterProcess(settings.workdir / f"b6-{uuid.uuid4().hex[:8]}", app="jupyterlab")
    lab.start()
    try:
        with chromium(path) as browser:
            return [_repeat(browser, lab, n, rates, seconds) for n in range(settings.repeats)]
    finally:
        lab.stop()


def _repeat(
    browser: Any, lab: JupyterProcess, n: int, rates: tuple[int, ...], seconds: float
) -> tuple[Sweep, Sweep]:
    """One repetition: a fresh notebook page (and kernel); the bare sweep, then the widget's."""
    name = f"b6-{n}.ipynb"
    write_notebook(lab.root / name, SETUP_CELL, BARE_CELL, WIDGET_CELL)
    page = open_notebook(browser, lab, name, PROBE)
    try:
        page.click(".jp-Cell >> nth=0")
        page.keyboard.press("Escape")
        page.keyboard.press("Shift+Enter")
        page.keyboard.press("Shift+Enter")
        page.locator(".jp-Cell").nth(BARE_INDEX).locator(".jp-OutputArea-output").wait_for()
        # A first short run of each, not counted: loading the widget's module, first connections.
        _bare_run(page, lab, WARM_UP_RATE, WARM_UP_SECONDS, "bare warm-up")
        bare = _sweep(rates, lambda rate: _bare_run(page, lab, rate, seconds))
        _widget_run(page, lab, WARM_UP_RATE, WARM_UP_SECONDS, "widget warm-up")
        widget = _sweep(rates, lambda rate: _widget_run(page, lab, rate, seconds))
    finally:
        page.close()
        lab.shutdown_kernels()
    return widget, bare


def _sweep(rates: tuple[int, ...], step: Any) -> Sweep:
    """Rates upwards until one has a long task (but always up to the latency run's rate)."""
    sweep = Sweep()
    for rate in rates:
        found: Step = step(rate)
        sweep.steps.append(found)
        if found.long_tasks and rate >= LATENCY_RATE:
            break
    return sweep


def _script(lab: JupyterProcess, rate: int, seconds: float) -> tuple[str, int]:
    """A scripted model of ``rate * seconds`` one-word deltas paced at ``rate``: spec, count."""
    count = round(rate * seconds)
    path = lab.workdir / f"script-{uuid.uuid4().hex[:8]}.json"
    turn = {"text": [f"w{i} " for i in range(count)], "delay": 1 / rate}
    path.write_text(json.dumps({"turns": [turn]}))
    return f"scripted:{path}", count


def _bare_run(
    page: Any, lab: JupyterProcess, rate: int, seconds: float, side: str = "bare"
) -> Step:
    model, count = _script(lab, rate, seconds)
    # The widget's output (from the sweep before) stays out of the page's layout meanwhile.
    page.evaluate(SHOW_OUTPUT, [WIDGET_INDEX, False])
    try:
        started = page.evaluate(BARE, [BARE_INDEX, model])
        return _finish(page, side, rate, count, started, -1)
    finally:
        page.evaluate("document.querySelectorAll('.b6-bare').forEach((box) => box.remove())")
        page.evaluate(SHOW_OUTPUT, [WIDGET_INDEX, True])


def _widget_run(
    page: Any, lab: JupyterProcess, rate: int, seconds: float, side: str = "widget"
) -> Step:
    model, count = _script(lab, rate, seconds)
    (lab.root / "b6-model.txt").write_text(model)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(WIDGET_INDEX)
    view = cell.locator("[data-testid=neta-run]")
    old = view.last.get_attribute("data-request-id") if view.count() else None
    cell.locator(".jp-InputPrompt").click()
    # Window opens once JupyterLab has handled the key that runs the cell (its own work).
    page.keyboard.press("Control+Enter")
    started = page.evaluate(ARM_WIDGET, [WIDGET_INDEX, old])
    return _finish(page, side, rate, count, started, WIDGET_INDEX)


def _finish(page: Any, side: str, rate: int, count: int, started: float, index: int) -> Step:
    began = time.monotonic()
    try:
        page.wait_for_function(
            SETTLED, arg=[count - 1, QUIET_MS, index], timeout=RUN_TIMEOUT_MS, polling=100
        )
    except Exception as exc:
        shown = page.evaluate("window.__b6.shown")
        cell = page.locator(".jp-Notebook .jp-Cell").nth(max(index, 0)).inner_text()[-1000:]
        raise RuntimeError(
            f"B6 {side} {rate}/s: {shown + 1} of {count} deltas shown; {cell}"
        ) from exc
    found = page.evaluate("(since) => window.__b6.results(since)", started)
    step = Step(
        rate,
        [d for _, d in found["longTasks"] if d > LONG_TASK_MS],
        latencies(found["arrivals"], found["screens"]),
    )
    p99 = percentile(step.latencies, 0.99)
    tasks = [
        describe(start, duration, started, found["frames"])
        for start, duration in found["longTasks"]
        if duration > LONG_TASK_MS
    ]
    print(
        f"  B6 {side} {rate:,}/s: arrival to screen p99 {p99:.1f} ms; "
        f"{len(tasks)} tasks over 50 ms {' '.join(tasks)} ({time.monotonic() - began:.1f} s)",
        file=sys.stderr,
        flush=True,
    )
    return step


def latencies(
    arrivals: list[tuple[int, int, float]], screens: list[tuple[int, float]]
) -> list[float]:
    """Per delta: time from its batch's arrival to the first paint that showed it (ms)."""
    out: list[float] = []
    j = 0
    for first, last, arrived in arrivals:
        for i in range(first, last + 1):
            while j < len(screens) and screens[j][0] < i:
                j += 1
            if j == len(screens):
                return out
            out.append(screens[j][1] - arrived)
    return out
