"""Pause and Resume in the widget, in a real JupyterLab driven by headless Chromium.

Locally these tests skip when Chromium is missing; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.b6_lab import chromium, chromium_path, open_notebook, run_cells, write_notebook
from tests.server_process import ServerProcess

CHROMIUM = chromium_path()
OUTPUT = Path(__file__).parent.parent / "test-output"

pytestmark = pytest.mark.browser

if CHROMIUM is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI=true but Chromium is missing: install Debian's chromium package")
    pytest.skip("Chromium is not installed; the browser tests need it", allow_module_level=True)

pytest.importorskip("playwright.sync_api")

STATUS = "document.querySelector('[data-testid=neta-run]')?.dataset.status === {!r}"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path, app="jupyterlab")
    (server.root / "notes.txt").write_text("quarterly revenue grew 12%\n")
    yield server
    server.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    assert CHROMIUM is not None
    with chromium(CHROMIUM) as found:
        yield found


def test_pause_shows_the_run_paused_and_resume_completes_it(
    lab: ServerProcess, browser: Any, tmp_path: Path
) -> None:
    # The first reply streams for a while before its tool call: the pause is taken after it.
    words = " ".join(f"word{i}" for i in range(80))
    first = {"text": words, "delay": 0.2, "toolCalls": [{"name": "list_files"}]}
    script = tmp_path / "paced.json"
    script.write_text(json.dumps({"turns": [first, {"text": "All listed."}]}))
    write_notebook(
        lab.root / "pause.ipynb",
        "%load_ext neta_jupyter",
        f"%neta --model scripted:{script} list the files",
    )
    lab.start()
    page = open_notebook(browser, lab, "pause.ipynb")
    run_cells(page, 2)
    page.locator("[data-testid=neta-run]").first.wait_for(timeout=60_000)

    page.wait_for_selector("[data-testid=neta-pause]:visible", timeout=60_000)
    assert page.locator("[data-testid=neta-resume]:visible").count() == 0
    page.click("[data-testid=neta-pause]")
    page.wait_for_function(STATUS.format("suspended"), timeout=90_000)
    assert page.inner_text("[data-testid=neta-status]") == "Paused"
    assert page.locator("[data-testid=neta-pause]:visible").count() == 0
    card = page.locator("[data-testid=neta-tool-card][data-tool-name=list_files]")
    assert card.count() == 0 or card.get_attribute("data-status") != "completed", (
        "the pause came before the tool call ran"
    )
    OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUTPUT / "browser-run-paused.png"), full_page=True)

    page.click("[data-testid=neta-resume]")
    page.wait_for_function(STATUS.format("completed"), timeout=90_000)
    assert "All listed." in page.inner_text("[data-testid=neta-answer]")
    assert card.get_attribute("data-status") == "completed"
