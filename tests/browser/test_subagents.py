"""Sub-agents in the widget, in a real JupyterLab driven by headless Chromium.

Locally these tests skip when Chromium is missing; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.b6_lab import open_notebook, run_cells, write_notebook
from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser


ASK_TO_READ = {"tool": "read_file", "action": "ask", "description": "Reading files needs approval"}


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path, {"demo_pace": 0.01, "permission_rules": [ASK_TO_READ]}, app="jupyterlab"
    )
    (server.root / "data.txt").write_text("forty-two\n")
    yield server
    server.stop()


def script(path: Path, *turns: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"name": path.stem, "turns": list(turns)}))
    return path


def child_log(lab: ServerProcess, request_id: str) -> list[dict[str, Any]]:
    """The child run's whole log, over the run API's event stream (one segment per request)."""
    log: list[dict[str, Any]] = []
    while not log or log[-1]["eventType"] == "MESSAGE_SUSPENDED":
        params = {"requestId": request_id}
        if log:
            params["lastEventId"] = str(log[-1]["seq"])
        response = httpx.get(
            lab.url + "neta/api/agent/run/stream", params=params, headers=lab.headers, timeout=30
        )
        assert response.status_code == 200, response.text
        lines = [line for line in response.text.splitlines() if line.startswith("data: {")]
        segment = [json.loads(line.removeprefix("data: ")) for line in lines]
        assert segment, f"the stream of {request_id} ended at {log[-1]['eventType']}"
        log += segment
    return log


def test_a_sub_agents_permission_ask_is_approved_through_the_parent_widget(
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
        "role": "You read files carefully.",
        "model": f"scripted:{reader}",
    }
    boss = script(
        tmp_path / "boss.json",
        {"toolCalls": [{"name": "delegate", "arguments": {"tasks": [task]}, "id": "c_delegate"}]},
        {"text": "Its sub-agent found forty-two."},
    )
    write_notebook(
        lab.root / "tree.ipynb",
        "%load_ext neta_jupyter",
        f"%neta --model scripted:{boss} read data.txt through a sub-agent",
    )
    lab.start()
    page = open_notebook(browser, lab, "tree.ipynb")
    run_cells(page, 2)
    parent = page.locator("[data-testid=neta-run]").first
    parent.wait_for(timeout=90_000)

    # The child's ask surfaces in its row of the parent's widget, while the parent waits for it.
    row = page.locator("[data-testid=neta-subagent]").first
    prompt = row.locator("[data-testid=neta-permission]")
    prompt.wait_for(state="visible", timeout=90_000)
    assert "read_file" in prompt.inner_text()
    assert row.locator("[data-testid=neta-subagent-name]").inner_text() == "reader"
    assert (
        "Waiting for your approval"
        in row.locator("[data-testid=neta-subagent-status]").inner_text()
    )
    child = row.get_attribute("data-request-id")
    assert child and child != parent.get_attribute("data-request-id")
    assert parent.get_attribute("data-status") == "running"
    shot(page, "browser-subagent-asks")

    # Approved from the parent's widget: the decision goes to the child's run.
    row.locator("[data-testid=neta-approve]").click()
    page.wait_for_function(
        "document.querySelector('[data-testid=neta-run]').dataset.status === 'completed'",
        timeout=90_000,
    )
    assert row.get_attribute("data-status") == "completed"
    assert "forty-two" in row.locator("[data-testid=neta-subagent-preview]").inner_text()
    assert prompt.is_hidden()
    assert "forty-two" in parent.locator("[data-testid=neta-answer]").first.inner_text()
    log = child_log(lab, child)
    resolved = [e["data"] for e in log if e["eventType"] == "PERMISSION_ASK_RESOLVED"]
    assert [r["approved"] for r in resolved] == [True]
    assert log[-1]["eventType"] == "MESSAGE_COMPLETED"

    # Opened, the row shows the child's own run: the same view, following the child's stream.
    row.locator("[data-testid=neta-subagent-toggle]").click()
    nested = row.locator("[data-testid=neta-subagent-run] [data-testid=neta-run]")
    nested.wait_for(timeout=30_000)
    page.wait_for_function(
        f"document.querySelector('[data-testid=neta-run][data-request-id=\"{child}\"]')"
        "?.dataset.status === 'completed'",
        timeout=60_000,
    )
    card = nested.locator("[data-testid=neta-tool-card][data-tool-name=read_file]")
    assert card.get_attribute("data-status") == "completed"
    assert "forty-two" in card.inner_text()
    assert "data.txt says forty-two" in nested.locator("[data-testid=neta-answer]").inner_text()
    shot(page, "browser-subagent-open")
