"""What the widget shows is written for a person, in a real JupyterLab: after the agent inserts a
cell and runs it (a plot), after a Stop, and under a prompt as long as a pasted file.

The offline demo model does the work. What the model reads (an edit's hash, the placeholder of a
picture, a file named after its call, an error code) must not reach the person; the picture shows
once, with its file chip; the approval shows the code once, and says why it asks in words; a Stop
reads "Stopped"; a long prompt is a heading of two lines.

Locally this skips when Chromium is missing; under ``CI=true`` it fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.b6_lab import open_notebook, write_notebook
from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

DATA_CELL = (
    "%load_ext neta_jupyter\nimport pandas as pd\nsales = pd.DataFrame({'units': [3, 5, 7, 4, 6]})"
)
PLOT = "%neta --approve auto add a cell that plots the units column of sales"
ASK = "%neta what is 17*23? compute it in python"
LONG = "%neta summarise this log: " + "2026-07-24 10:00:00 INFO one line of a pasted log. " * 400

MODEL_WORDS = [
    re.compile(r"new hash"),
    re.compile(r"\b(insert|edit) of cell\b"),
    re.compile(r"\bapplied\b"),
    re.compile(r"\[image: "),
    re.compile(r"call_\w+-"),
    re.compile(r"USER_CANCELLED"),
    re.compile(r"\bFailed\b"),
    re.compile(r"\bpreparing\b"),
    re.compile(r"Running (python|run_cell|delegate)"),
    re.compile(r"needs approval python"),
    re.compile(r"need approval \*"),
    re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    re.compile(r"\t"),
]
"""What is written for the model, or is a code, and must not be what the person reads."""

WIDGET = "[data-testid=neta-run]"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path,
        {"demo_pace": 0.01},
        app="jupyterlab",
        args=["--LabApp.expose_app_in_browser=True"],
    )
    yield server
    server.stop()


def run_cell(page: Any, index: int) -> Any:
    """Run cell ``index``; its cell."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+Enter")
    return cell


def widget_ended(cell: Any, status: str) -> Any:
    """The cell's widget, once its run has ``status`` (completed, failed)."""
    widget = cell.locator(WIDGET)
    widget.wait_for(timeout=90_000)
    cell.locator(f"{WIDGET}[data-status={status}]").wait_for(timeout=120_000)
    return widget


def model_words_in(text: str) -> list[str]:
    return [found.group() for pattern in MODEL_WORDS if (found := pattern.search(text))]


def test_the_widget_speaks_to_a_person(lab: ServerProcess, browser: Any) -> None:
    write_notebook(lab.root / "work.ipynb", DATA_CELL, PLOT, ASK, LONG)
    lab.start()
    page = open_notebook(browser, lab, "work.ipynb")
    run_cell(page, 0)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=90_000)

    plotted = widget_ended(run_cell(page, 1), "completed")
    assert_plot_shown_for_a_person(page, plotted)

    stopped = assert_ask_then_stop(page, run_cell(page, 2))
    assert stopped.locator("[data-testid=neta-status]").inner_text() == "Stopped"
    assert stopped.locator("[data-testid=neta-finish]").inner_text() == "Stopped"
    assert not stopped.locator("[data-testid=neta-error]").is_visible()
    card = stopped.locator("[data-testid=neta-tool-card]")
    assert card.locator(".neta-badge").inner_text() == "stopped"
    shot(page, "browser-person-stopped")
    for widget in (plotted, stopped):
        text = widget.inner_text()
        assert model_words_in(text) == [], text

    assert_long_prompt_folded(page, run_cell(page, 3))


def assert_plot_shown_for_a_person(page: Any, widget: Any) -> None:
    """The insert card says what it did; the picture shows once, a thumbnail with its chip."""
    insert = widget.locator("[data-testid=neta-tool-card][data-tool-name=insert_cell]")
    assert insert.locator("[data-testid=neta-edit-what]").inner_text().startswith("Inserted a cell")
    pictures = widget.locator("img")
    assert pictures.count() == 1
    figure = widget.locator("[data-testid=neta-figure]")
    figure.locator("img").wait_for(timeout=30_000)
    page.wait_for_function(
        "el => el.complete && el.naturalHeight > 0", arg=figure.locator("img").element_handle()
    )
    # The cell the agent ran draws the figure in the notebook: the card keeps a thumbnail.
    agent_plot = page.locator(".jp-Cell:not(:has([data-testid=neta-run])) .jp-OutputArea img")
    agent_plot.first.wait_for(timeout=60_000)
    thumbnail = figure.locator("img").bounding_box()
    in_cell = agent_plot.first.bounding_box()
    assert thumbnail is not None and in_cell is not None
    assert thumbnail["height"] <= in_cell["height"] / 2, (thumbnail, in_cell)
    chip = figure.locator("[data-testid=neta-file-chip]")
    assert chip.locator(".neta-file-chip-name").inner_text() == "figure-1.png"
    listed = widget.locator("[data-testid=neta-attachment]")
    assert listed.count() == 0, listed.all_inner_texts()
    figure.scroll_into_view_if_needed()
    shot(page, "browser-person-plot")


def assert_ask_then_stop(page: Any, cell: Any) -> Any:
    """While it waits for approval the code shows once, with why it asks; then the user stops it."""
    widget = cell.locator(WIDGET)
    widget.wait_for(timeout=90_000)
    prompt = cell.locator("[data-testid=neta-permission]")
    prompt.wait_for(timeout=120_000)
    shot(page, "browser-person-ask")
    text = widget.inner_text()
    assert text.count("print(17*23)") == 1, text
    rule = prompt.locator("[data-testid=neta-permission-rule]").inner_text()
    assert rule == "Why: running code in your kernel needs approval.", rule
    assert model_words_in(text) == [], text
    cell.locator("[data-testid=neta-stop]").click()
    return widget_ended(cell, "failed")


def assert_long_prompt_folded(page: Any, cell: Any) -> None:
    """A prompt the length of a pasted log is a heading of two lines, and opens on a click."""
    header = cell.locator("[data-testid=neta-prompt-text]")
    header.wait_for(timeout=90_000)
    line = header.evaluate("el => parseFloat(getComputedStyle(el).lineHeight)")
    folded = header.bounding_box()
    assert folded is not None and folded["height"] <= 2 * line + 2, (folded, line)
    more = cell.locator("[data-testid=neta-prompt-more]")
    assert more.inner_text() == "show more"
    shot(page, "browser-person-long-prompt")
    more.click()
    opened = header.bounding_box()
    assert opened is not None and opened["height"] > 2 * line + 2, opened
    assert "one line of a pasted log" in header.inner_text()
