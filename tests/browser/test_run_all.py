"""Run All on the demo notebooks in a real JupyterLab, with approvals asked, as a new user does.

No ``NETA_APPROVE``: every tool call that needs permission asks in its widget, and the test
approves each prompt as it appears. The prompts of a notebook are one conversation, so they queue:
each waits for the one before it to finish, a run waiting for an approval holds the ones behind it
(whose widgets say so), and none is superseded. Every cell of the notebook runs, ``%neta undo``
included (it takes its turn after the prompts above it).

Locally this skips when Chromium is missing; under ``CI=true`` it fails.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
NOTEBOOK_JSON = "window.jupyterapp.shell.currentWidget.content.model.toJSON()"
"""The notebook as the page's own model holds it (the app is exposed for the test)."""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path,
        {"demo_pace": 0.02},
        app="jupyterlab",
        args=["--LabApp.expose_app_in_browser=True"],
    )
    yield server
    server.stop()


def open_and_run_all(browser: Any, lab: ServerProcess, name: str) -> Any:
    shutil.copy(NOTEBOOKS / name, lab.root / name)
    lab.start()
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page.goto(f"{lab.url}lab/tree/{name}?reset&token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=90_000)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    return page


def runs_of(lab: ServerProcess) -> list[dict[str, Any]]:
    with lab.client() as http:
        return list(http.get("neta/api/agent/runs").json()["runs"])


def approve_each_until_done(page: Any, lab: ServerProcess, prompts: int) -> list[str]:
    """Approve every prompt as it appears until the notebook's ``prompts`` runs have completed;
    what the queued widgets said meanwhile."""
    from playwright.sync_api import Error as PlaywrightError

    said: list[str] = []
    deadline = time.monotonic() + 600  # a hang, not slowness: a loaded machine is slow
    while True:
        runs = runs_of(lab)
        failed = [(r["prompt"], r.get("error")) for r in runs if r["status"] == "failed"]
        assert not failed, f"a run failed: {failed}"
        if len(runs) == prompts and all(r["status"] == "completed" for r in runs):
            return said
        assert time.monotonic() < deadline, [(r["prompt"], r["status"]) for r in runs]
        for text in page.locator("[data-testid=neta-queued]:visible").all_inner_texts():
            if text not in said:
                said.append(text)
        approve = page.locator("[data-testid=neta-approve]:visible")
        if approve.count():
            # A prompt arms only once it has been in view a moment: scroll to it, as a user does.
            # The prompt just answered leaves once its run moves on, and JupyterLab re-creates a
            # cell's view at times: a button gone between finding and clicking is looked for again.
            with contextlib.suppress(PlaywrightError):  # the timeout too: clicked before it armed
                approve.first.scroll_into_view_if_needed(timeout=5_000)
                approve.first.click(timeout=5_000)
        time.sleep(0.3)


def cells_when_idle(page: Any) -> list[dict[str, Any]]:
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=90_000)
    return list(page.evaluate(NOTEBOOK_JSON)["cells"])


def output_text(cell: dict[str, Any]) -> str:
    parts = []
    for out in cell.get("outputs", []):
        text = out.get("text") or out.get("data", {}).get("text/plain", "")
        parts.append(text if isinstance(text, str) else "".join(text))
    return "".join(parts)


def assert_every_cell_ran(page: Any, name: str) -> list[dict[str, Any]]:
    ids = [
        c["id"]
        for c in json.loads((NOTEBOOKS / name).read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    cells = {c.get("id"): c for c in cells_when_idle(page)}
    not_run = [i for i in ids if cells[i].get("execution_count") is None]
    assert not not_run, f"cells that never ran: {not_run}"
    errors = [i for i in ids if any(o["output_type"] == "error" for o in cells[i]["outputs"])]
    assert not errors, f"cells that failed: {errors}"
    return list(cells.values())


def test_run_all_on_the_quickstart_with_approvals(lab: ServerProcess, browser: Any) -> None:
    page = open_and_run_all(browser, lab, "quickstart.ipynb")
    approve_each_until_done(page, lab, prompts=4)
    shot(page, "browser-run-all-quickstart")
    cells = {c["id"]: c for c in assert_every_cell_ran(page, "quickstart.ipynb")}
    assert "completed" in output_text(cells["3ad709c0"]), "await run: the answer was there"
    assert "superseded" not in page.inner_text(".jp-Notebook")


def test_run_all_on_the_workspace_with_approvals(lab: ServerProcess, browser: Any) -> None:
    page = open_and_run_all(browser, lab, "workspace.ipynb")
    said = approve_each_until_done(page, lab, prompts=4)
    shot(page, "browser-run-all-workspace")
    assert any(
        s.startswith("Waiting for the prompt above: it needs your approval") for s in said
    ), said
    cells = {c["id"]: c for c in assert_every_cell_ran(page, "workspace.ipynb")}
    # The undo waited for the plot prompt above it, then took back the cell that prompt added.
    assert "reverted the insert of cell" in output_text(cells["undo"]), cells["undo"]["outputs"]
    assert "forecast for July" in output_text(cells["forecast"])
    assert "superseded" not in page.inner_text(".jp-Notebook")
