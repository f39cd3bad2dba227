"""An outside agent's MCP call that asks is approved by a click in JupyterLab's side panel.

The call waits (its client receives progress meanwhile); the panel lists the ask of the MCP
session's run with the diff of the change, the click answers it through the run API, and the
call goes on: the cell is in the notebook.

Locally this skips when Chromium is missing; under ``CI=true`` it fails.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.b6_lab import open_notebook
from tests.browser.panel_lab import open_panel, panel_server
from tests.browser_lab import shot
from tests.notebook_mcp.agent import agent, text_of, write_notebook
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

APPROVE = "[data-testid=neta-panel-ask] [data-testid=neta-approve]"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = panel_server(tmp_path)
    yield server
    server.stop()


class Agent:
    """An MCP client inserting a cell, from a thread of its own."""

    def __init__(self, lab: ServerProcess) -> None:
        self.lab = lab
        self.answer: Any = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._insert()), daemon=True)

    async def _insert(self) -> None:
        async with agent(self.lab.url, self.lab.headers, "claude-code", "2.1.0") as session:
            arguments = {"notebook": "panel.ipynb", "source": "answer = 6 * 7"}
            self.answer = await session.call_tool("insert_cell", arguments)


def test_an_mcp_calls_ask_is_approved_in_the_side_panel_and_the_call_goes_on(
    lab: ServerProcess, browser: Any
) -> None:
    write_notebook(lab.root, "panel.ipynb", [("c1", "x = 1")])
    lab.start()
    page = open_notebook(browser, lab, "panel.ipynb")
    panel = open_panel(page)
    caller = Agent(lab)
    caller.thread.start()
    ask = panel.locator("[data-testid=neta-panel-ask]")
    ask.wait_for(timeout=90_000)
    assert "MCP · claude-code" in ask.inner_text()
    assert "answer = 6 * 7" in ask.inner_text()  # the diff of the new cell
    approve = ask.locator("[data-testid=neta-approve]")
    approve.scroll_into_view_if_needed()
    page.wait_for_function(
        f"(() => {{ const b = document.querySelector('{APPROVE}'); "
        "return b && !b.disabled && b.dataset.armed !== 'false'; })()",
        timeout=30_000,
    )
    with page.expect_response(lambda r: "resumeTask" in r.url, timeout=30_000) as sent:
        approve.click()
    assert sent.value.status == 200
    caller.thread.join(90)
    assert caller.answer is not None and not caller.answer.is_error, caller.answer
    assert "insert of cell" in text_of(caller.answer)
    # The cell is in the open notebook at once (the room saves the file later).
    page.locator(".jp-Notebook .jp-Cell .cm-content >> text=answer = 6 * 7").wait_for(
        timeout=60_000
    )
    ask.wait_for(state="detached", timeout=60_000)
    shot(page, "browser-mcp-panel-approved")
