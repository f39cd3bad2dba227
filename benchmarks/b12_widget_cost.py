"""B12 widget cost as an answer grows: main-thread time per 1,000 deltas, short and long answers.

In JupyterLab in headless Chromium (as B6), a ``%neta`` cell streams an answer of one-word
deltas at ``RATE`` per second: 1,000 deltas, then 20,000. The page's main-thread task time
(Chromium's ``TaskDuration`` metric over the DevTools protocol) is read when the first delta is
on screen and again when the last one is; divided by the deltas in between, per 1,000. If the
widget's cost per delta does not grow with the answer, the long answer's figure is no higher than
the short one's (the baseline, measured in the same page): target ratio <= 1.3.

Without Chromium the figure is skipped with a message, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any

from .b6_lab import JupyterProcess, chromium, chromium_path, open_notebook, write_notebook
from .b6_page import PROBE
from .b6_widget import ARM_WIDGET, SETUP_CELL, WIDGET_CELL, WIDGET_INDEX, _missing, _script
from .harness import Row, Settings

RATE = 2_000
SHORT, LONG = 1_000, 20_000
FLAT = 1.3
SHOWN = "(n) => window.__b6.shown >= n"


def _task_seconds(cdp: Any) -> float:
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return float(next(m["value"] for m in metrics if m["name"] == "TaskDuration"))


def _run(page: Any, cdp: Any, lab: JupyterProcess, count: int) -> float:
    """Main-thread ms per 1,000 deltas while ``count`` deltas stream into the widget."""
    model, count = _script(lab, RATE, count / RATE)
    (lab.root / "b6-model.txt").write_text(model)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(WIDGET_INDEX)
    view = cell.locator("[data-testid=neta-run]")
    old = view.last.get_attribute("data-request-id") if view.count() else None
    cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("Control+Enter")
    page.evaluate(ARM_WIDGET, [WIDGET_INDEX, old])
    first = min(50, count // 10)
    page.wait_for_function(SHOWN, arg=first, timeout=120_000, polling=20)
    began = _task_seconds(cdp)
    page.wait_for_function(SHOWN, arg=count - 1, timeout=300_000, polling=20)
    used = _task_seconds(cdp) - began
    page.wait_for_function(
        "(i) => window.__b6.lastView(window.__b6.cell(i)).dataset.status === 'completed'",
        arg=WIDGET_INDEX,
        timeout=60_000,
    )
    per = used * 1e6 / (count - 1 - first)
    print(f"  B12 {count:,} deltas: {per:.1f} ms per 1,000", file=sys.stderr, flush=True)
    return per


def _measure(settings: Settings, short: int, long: int) -> tuple[list[float], list[float]]:
    path = chromium_path()
    assert path is not None
    lab = JupyterProcess(settings.workdir / f"b12-{uuid.uuid4().hex[:8]}", app="jupyterlab")
    lab.start()
    shorts: list[float] = []
    longs: list[float] = []
    try:
        with chromium(path) as browser:
            for n in range(settings.repeats):
                name = f"b12-{n}.ipynb"
                write_notebook(lab.root / name, SETUP_CELL, 'print("-")', WIDGET_CELL)
                page = open_notebook(browser, lab, name, PROBE)
                try:
                    cdp = page.context.new_cdp_session(page)
                    cdp.send("Performance.enable")
                    page.click(".jp-Cell >> nth=0")
                    page.keyboard.press("Escape")
                    page.keyboard.press("Shift+Enter")
                    _run(page, cdp, lab, 200)  # warm up: the widget's module, first connections
                    shorts.append(_run(page, cdp, lab, short))
                    longs.append(_run(page, cdp, lab, long))
                finally:
                    page.close()
                    lab.shutdown_kernels()
    finally:
        lab.stop()
    return shorts, longs


async def run(settings: Settings) -> list[Row]:
    short, long = settings.size(SHORT, 500), settings.size(LONG, 4_000)
    figure = f"B12 widget main-thread time per 1,000 deltas at {RATE:,}/s"
    missing = _missing()
    if missing:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"CI=true but B12 cannot run: {missing}")
        print(f"B12 skipped: {missing}", file=sys.stderr, flush=True)
        return [Row(figure, "", [], note=missing)]
    shorts, longs = await asyncio.to_thread(_measure, settings, short, long)
    flat = Row(
        f"{figure}, {long:,}-delta answer (baseline: {short:,}-delta answer)",
        "ms",
        longs,
        shorts,
        target=f"ratio <= {FLAT}",
    )
    flat.met = (flat.ratio or 0) <= FLAT
    return [flat]
