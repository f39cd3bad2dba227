"""The crew board in a real JupyterLab driven by headless Chromium: live statuses, and an
approval the crew waits for given by a click.

Locally these tests skip when Chromium is missing; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.b6_lab import open_notebook, run_cells, write_notebook
from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

CREW = {
    "name": "files",
    "agents": [{"name": "reader", "role": "You read files."}],
    "tasks": [
        {"id": "one", "agent": "reader", "description": "read notes.txt", "approval": "before"},
        {"id": "two", "agent": "reader", "description": "read data.csv"},
        {
            "id": "summary",
            "agent": "reader",
            "description": "read notes.txt, knowing: {one} {two}",
            "depends_on": ["one", "two"],
        },
    ],
}
BOARD = "document.querySelector('[data-testid=neta-crew]')?.dataset.status === {!r}"
ROW = "document.querySelector('[data-testid=neta-crew-task][data-task={}]')?.dataset.status"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path, {"demo_pace": 0.01}, app="jupyterlab")
    (server.root / "notes.txt").write_text("first note\nsecond note\n")
    (server.root / "data.csv").write_text("a,b\n1,2\n")
    yield server
    server.stop()


def test_the_board_updates_live_and_an_approval_is_given_by_a_click(
    lab: ServerProcess, browser: Any
) -> None:
    write_notebook(
        lab.root / "crew.ipynb",
        "%load_ext neta_jupyter",
        f"import neta_jupyter\nc = neta_jupyter.crew({json.dumps(CREW)}, approve='auto')",
    )
    lab.start()
    page = open_notebook(browser, lab, "crew.ipynb")
    run_cells(page, 2)
    page.locator("[data-testid=neta-crew]").first.wait_for(timeout=90_000)
    page.wait_for_function(BOARD.format("waiting"), timeout=90_000)
    assert page.evaluate(ROW.format("one")) == "waiting_approval"
    assert page.evaluate(ROW.format("two")) == "completed", "the other task went on meanwhile"
    assert page.evaluate(ROW.format("summary")) == "pending"
    escalation = page.locator("[data-testid=neta-crew-escalation][data-task=one]")
    assert escalation.get_attribute("data-kind") == "approval_before"
    shot(page, "browser-crew-waiting")
    escalation.locator("[data-testid=neta-crew-approve]").click()
    page.wait_for_function(BOARD.format("completed"), timeout=120_000)
    for task in ("one", "two", "summary"):
        assert page.evaluate(ROW.format(task)) == "completed", task
    assert page.locator("[data-testid=neta-crew-escalation]").count() == 0
    assert "every task is done" in page.inner_text("[data-testid=neta-crew-log]")
    shot(page, "browser-crew-completed")


TASK_RUN = "[data-testid=neta-crew-task-run][data-task=one] [data-testid=neta-run]"
RECORD_STATUSES = (
    "() => { window.__taskRunStatuses = []; setInterval(() => {"
    f" const run = document.querySelector({TASK_RUN!r});"
    " if (run) window.__taskRunStatuses.push(run.dataset.status); }, 20); }"
)


@pytest.fixture
def paced_lab(tmp_path: Path) -> Iterator[ServerProcess]:
    # Tokens paced so that the task's answer is still being written while the board shows it.
    server = ServerProcess(tmp_path, {"demo_pace": 0.05}, app="jupyterlab")
    (server.root / "notes.txt").write_text("first note\nsecond note\n")
    yield server
    server.stop()


def test_a_task_opens_into_its_run_and_its_answer_streams_inside_the_board(
    paced_lab: ServerProcess, browser: Any
) -> None:
    crew = {
        "name": "notes",
        "agents": [{"name": "reader", "role": "You read files."}],
        "tasks": [
            {"id": "one", "agent": "reader", "description": "read notes.txt", "approval": "before"}
        ],
    }
    write_notebook(
        paced_lab.root / "crew.ipynb",
        "%load_ext neta_jupyter",
        f"import neta_jupyter\nc = neta_jupyter.crew({json.dumps(crew)}, approve='auto')",
    )
    paced_lab.start()
    page = open_notebook(browser, paced_lab, "crew.ipynb")
    run_cells(page, 2)
    page.wait_for_function(BOARD.format("waiting"), timeout=90_000)
    row = page.locator("[data-testid=neta-crew-task][data-task=one]")
    row.locator("[data-testid=neta-crew-expand]").click()
    page.locator("[data-testid=neta-crew-task-run][data-task=one]").wait_for(timeout=30_000)
    page.evaluate(RECORD_STATUSES)
    page.locator("[data-testid=neta-crew-approve]").click()
    page.wait_for_function(
        f"document.querySelector({TASK_RUN!r})?.dataset.status === 'completed'", timeout=120_000
    )
    page.wait_for_function(BOARD.format("completed"), timeout=60_000)
    run = page.locator(TASK_RUN)
    child = page.evaluate(
        "document.querySelector('[data-testid=neta-crew-task][data-task=one] td:last-child')"
        ".textContent"
    )
    assert child and run.get_attribute("data-request-id") == child, "the task's own run"
    statuses = page.evaluate("window.__taskRunStatuses")
    assert "running" in statuses, f"the run was shown while it ran: {statuses}"
    answer = run.locator("[data-testid=neta-answer]").inner_text()
    assert "note" in answer, answer
    assert page.locator(f"{TASK_RUN} script").count() == 0
    shot(page, "browser-crew-task-run")
    row.locator("[data-testid=neta-crew-expand]").click()
    assert page.locator("[data-testid=neta-crew-task-run]").count() == 0
