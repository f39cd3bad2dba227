"""The notebook as the agent's workspace, in a real JupyterLab with real-time collaboration.

The user types into one cell with real key presses while the agent (the offline demo model,
prompted from another cell) inserts a cell and runs it. Both land in the one shared document the
server holds, the room saves it, and a reload shows the agent's cell with its provenance and its
outputs. JupyterLab never asks which version to keep.

Locally this skips when Chromium is missing; under ``CI=true`` it fails.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.b6_lab import write_notebook
from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

DATA_CELL = (
    "%load_ext neta_jupyter\nimport pandas as pd\nsales = pd.DataFrame({'units': [3, 5, 7, 4, 6]})"
)
PROMPT = "%neta --approve auto add a cell that plots the units column of sales"
USER_CELL = 'title = "draft"'

DIALOG_WATCH = """
window.__dialogs = [];
new MutationObserver(() => {
  for (const dialog of document.querySelectorAll('.jp-Dialog')) {
    const text = dialog.innerText;
    if (!window.__dialogs.includes(text)) window.__dialogs.push(text);
  }
}).observe(document.documentElement, { childList: true, subtree: true });
"""
"""Remembers every JupyterLab dialog the page shows (e.g. "File Changed"), however briefly."""

AGENT_PLOT = ".jp-Cell:not(:has([data-testid=neta-run])) .jp-OutputArea-output img"
"""A plot in a cell's outputs (not a picture in the widget's tool card)."""

NOTEBOOK_JSON = "window.jupyterapp.shell.currentWidget.content.model.toJSON()"
"""The notebook as the page's own model holds it (the app is exposed for the test)."""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path,
        {"demo_pace": 0.04},
        app="jupyterlab",
        args=["--LabApp.expose_app_in_browser=True"],
    )
    yield server
    server.stop()


def cells_in(path: Path) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["cells"])


def agent_cells(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cells if "neta" in c.get("metadata", {})]


def text_of(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)


def has_plot(cell: dict[str, Any]) -> bool:
    return any("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


def type_while_agent_works(page: Any, cell: Any, cells_before: int) -> str:
    """Type into ``cell`` key by key until the agent's cell has run and shows its plot, then a
    little more; what was typed."""
    cell.locator(".cm-content").click()
    page.keyboard.press("End")
    typed, after_plot = "", 0
    deadline = time.monotonic() + 60
    while after_plot < 10:
        if time.monotonic() > deadline:
            shot(page, "browser-workspace-no-plot")
            shown = [
                (c["source"][:30], c.get("outputs")) for c in page.evaluate(NOTEBOOK_JSON)["cells"]
            ]
            raise AssertionError(f"the agent's cell never showed its plot: {shown}")
        word = f" # w{len(typed)}" if not typed else f" w{len(typed)}"
        page.keyboard.type(word, delay=20)
        typed += word
        cells = page.locator(".jp-Notebook .jp-Cell")
        if cells.count() > cells_before and page.locator(AGENT_PLOT).count():
            after_plot += 1
    return typed


def test_agent_inserts_and_runs_a_cell_while_the_user_types(
    lab: ServerProcess, browser: Any
) -> None:
    notebook = lab.root / "work.ipynb"
    write_notebook(notebook, DATA_CELL, USER_CELL, PROMPT)
    lab.start()
    rooms: list[str] = []
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page.on("websocket", lambda ws: rooms.append(ws.url))
    page = open_notebook_on(page, lab, "work.ipynb")
    assert any("/api/collaboration/room/json:notebook:" in url for url in rooms), rooms

    # Run the magic's cell and the prompt's cell; the user's cell stays as it is.
    cells = page.locator(".jp-Notebook .jp-Cell")
    for index in (0, 2):
        cells.nth(index).locator(".cm-content").click()
        page.keyboard.press("Control+Enter")
    page.wait_for_selector("[data-testid=neta-run][data-status=running]", timeout=90_000)
    assert cells.count() == 3, "the user starts typing before the agent inserts its cell"

    typed = type_while_agent_works(page, cells.nth(1), 3)
    page.wait_for_selector("[data-testid=neta-run][data-status=completed]", timeout=120_000)
    shot(page, "browser-workspace-typed")
    rid = only_run(lab)
    # The agent inserted and ran its cell in one call (the notebook's map is in its context) while
    # the user typed: the typing began before that cell appeared and went on after its plot.
    calls = [e["data"]["toolName"] for e in lab.read(rid) if e["eventType"] == "TOOL_START"]
    assert calls[-1] == "insert_cell" and "read_notebook" not in calls, calls

    # The room saves; Ctrl+S asks it to now.
    page.keyboard.press("Control+s")
    saved = wait_for_saved(notebook, USER_CELL + typed)
    written = agent_cells(saved)
    assert len(written) == 1, saved
    assert_provenance(written[0], rid)
    assert has_plot(written[0]), written[0]
    sources = [text_of(c["source"]) for c in saved]
    assert sources[:3] == [DATA_CELL, USER_CELL + typed, PROMPT], sources
    assert page.evaluate("window.__dialogs") == []

    page.reload()
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_function(f"{NOTEBOOK_JSON}.cells.length === {len(saved)}", timeout=60_000)
    shown = page.evaluate(NOTEBOOK_JSON)["cells"]
    assert [text_of(c["source"]) for c in shown] == sources
    reloaded = agent_cells(shown)
    assert len(reloaded) == 1 and has_plot(reloaded[0])
    assert reloaded[0]["metadata"]["neta"] == written[0]["metadata"]["neta"]
    index = next(i for i, c in enumerate(shown) if "neta" in c["metadata"])
    picture = page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea img")
    picture.wait_for(timeout=30_000)
    shot(page, "browser-workspace-reloaded")
    assert page.evaluate("window.__dialogs") == []


def open_notebook_on(page: Any, lab: ServerProcess, name: str) -> Any:
    """``open_notebook`` on a page made here (to watch its sockets), with the dialog watch."""
    page.add_init_script(DIALOG_WATCH)
    page.goto(f"{lab.url}lab/tree/{name}?reset&token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=90_000)
    return page


def wait_for_saved(notebook: Path, user_source: str) -> list[dict[str, Any]]:
    """The saved cells, once the file holds the user's typing and the agent's cell."""
    deadline = time.monotonic() + 30
    while True:
        cells = cells_in(notebook)
        if any(text_of(c["source"]) == user_source for c in cells) and agent_cells(cells):
            return cells
        assert time.monotonic() < deadline, f"not saved: {[c['source'] for c in cells]}"
        time.sleep(0.2)


def only_run(lab: ServerProcess) -> str:
    """The requestId of the one run the page started."""
    with lab.client() as http:
        runs = http.get("neta/api/agent/runs").json()["runs"]
    assert len(runs) == 1, runs
    return str(runs[0]["requestId"])


def assert_provenance(cell: dict[str, Any], rid: str) -> None:
    provenance = cell["metadata"]["neta"]
    assert provenance["requestId"] == rid, provenance
    assert provenance.get("toolCallId"), provenance
    assert provenance.get("prompt", "").startswith("add a cell that plots"), provenance
