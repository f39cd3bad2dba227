"""A run tree in the side panel: a sub-agent's ask waits in the panel beside its parent, is
approved there, and the followed parent shows its sub-agent as the cell widget does.

Locally these tests skip when Chromium is missing; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.browser_lab  # noqa: F401 (skips the module without Chromium)
from benchmarks.b6_lab import open_notebook, write_notebook
from tests.browser.panel_lab import FOLLOWED, PANEL, panel_server, run_row
from tests.browser.test_subagents import ASK_TO_READ, script
from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = panel_server(tmp_path, {"permission_rules": [ASK_TO_READ]})
    (server.root / "data.txt").write_text("forty-two\n")
    yield server
    server.stop()


def test_a_sub_agents_ask_is_approved_in_the_panel_and_its_parent_shows_the_sub_agent(
    lab: ServerProcess, browser: Any, tmp_path: Path
) -> None:
    reader = script(
        tmp_path / "reader.json",
        {"toolCalls": [{"name": "read_file", "arguments": {"path": "data.txt"}, "id": "c_read"}]},
        {"text": "data.txt says forty-two"},
    )
    task = {
        "task": "Read data.txt and say what it holds.",
        "name": "reader",
        "model": f"scripted:{reader}",
    }
    boss = script(
        tmp_path / "boss.json",
        {"toolCalls": [{"name": "delegate", "arguments": {"tasks": [task]}, "id": "c_delegate"}]},
        {"text": "Its sub-agent found forty-two."},
    )
    write_notebook(lab.root / "empty.ipynb", "")
    lab.start()
    with lab.client() as http:
        started = http.post(
            "neta/api/agent/run/async",
            json={"content": "read data.txt through a sub-agent", "model": f"scripted:{boss}"},
        )
    assert started.status_code == 200, started.text
    page = open_notebook(browser, lab, "empty.ipynb")

    # Nothing on the page shows the run: with the panel closed, a notification says a run asks,
    # and its button opens the panel.
    toast = page.locator(".Toastify__toast:has-text('A neta run asks to run read_file')")
    toast.wait_for(timeout=90_000)
    toast.locator("button:has-text('Open neta')").click()
    panel = page.locator(PANEL)
    panel.wait_for(state="visible", timeout=30_000)
    assert panel.locator("[data-testid=neta-panel-asks-heading]").inner_text() == (
        "Waiting for you (1)"
    )

    # The sub-agent's ask waits in the panel; the list shows the parent, not the child.
    ask = panel.locator("[data-testid=neta-panel-ask]")
    ask.locator("[data-testid=neta-permission]").wait_for(timeout=90_000)
    assert "read_file" in ask.inner_text()
    assert "sub-agent" in ask.inner_text()
    parent = run_row(page, "api", "read data.txt through a sub-agent")
    parent.wait_for(timeout=60_000)
    assert panel.locator("[data-testid=neta-panel-run][data-origin=subagent]").count() == 0

    # Followed, the parent shows its sub-agent's row, waiting for the same approval.
    parent.click()
    sub = panel.locator("[data-testid=neta-panel-followed-view] [data-testid=neta-subagent]")
    sub.wait_for(timeout=60_000)
    assert sub.locator("[data-testid=neta-subagent-name]").inner_text() == "reader"
    approve = ask.locator("[data-testid=neta-approve]")
    approve.scroll_into_view_if_needed()
    page.wait_for_function(
        "document.querySelector('[data-testid=neta-panel-ask] [data-testid=neta-approve]')"
        "?.dataset.armed === 'true'",
        timeout=30_000,
    )
    approve.click()
    page.wait_for_selector(f"{FOLLOWED}[data-status=completed]", timeout=90_000)
    assert sub.get_attribute("data-status") == "completed"
    followed = panel.locator("[data-testid=neta-panel-followed-view]")
    assert (
        "Its sub-agent found forty-two."
        in followed.locator("[data-testid=neta-answer]").first.inner_text()
    )

    # Opened, the sub-agent's row is the child's own run, in the same view.
    sub.locator("[data-testid=neta-subagent-toggle]").click()
    nested = sub.locator("[data-testid=neta-subagent-run] [data-testid=neta-run]")
    nested.wait_for(timeout=30_000)
    page.wait_for_function(
        "document.querySelector('[data-testid=neta-subagent-run] [data-testid=neta-run]')"
        "?.dataset.status === 'completed'",
        timeout=60_000,
    )
    assert "data.txt says forty-two" in nested.locator("[data-testid=neta-answer]").inner_text()
    # A search lists the child too, as a sub-agent.
    panel.locator("[data-testid=neta-panel-search]").fill("Read data.txt and say")
    run_row(page, "subagent", "Read data.txt").wait_for(timeout=30_000)
    shot(page, "browser-panel-subagent")
