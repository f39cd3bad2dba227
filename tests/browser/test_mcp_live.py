"""An outside agent's MCP edits land live in the notebook open in JupyterLab, with no dialog.

The notebook is open in a real JupyterLab (headless Chromium) with real-time collaboration; an
MCP client from the official SDK inserts a cell that runs and edits another through neta's MCP
server. The page shows both at once, from the one shared document, and never asks which version
of the file to keep.

Locally this skips when Chromium is missing; under ``CI=true`` it fails.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.tools.notebook_doc import source_hash
from tests.browser.test_workspace import NOTEBOOK_JSON, open_notebook_on
from tests.browser_lab import shot
from tests.notebook_mcp.agent import agent, text_of, write_notebook
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

RULES = [{"tool": "*_cell", "action": "allow", "client": "test-agent"}]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path,
        {"permission_rules": RULES},
        app="jupyterlab",
        args=["--LabApp.expose_app_in_browser=True"],
    )
    yield server
    server.stop()


async def edit_and_insert(url: str, headers: dict[str, str]) -> list[str]:
    """What the agent's calls answered (each one's text)."""
    async with agent(url, headers) as session:
        inserted = await session.call_tool(
            "insert_cell",
            {
                "notebook": "live.ipynb",
                "source": "print('from the agent', 6 * 7)",
                "after_cell_id": "c1",
                "run": True,
            },
        )
        edited = await session.call_tool(
            "edit_cell",
            {
                "notebook": "live.ipynb",
                "cell_id": "c1",
                "source": "total = 2",
                "source_hash": source_hash("total = 1"),
            },
        )
        assert not inserted.is_error and not edited.is_error, (
            text_of(inserted),
            text_of(edited),
        )
        return [text_of(inserted), text_of(edited)]


def in_a_thread(url: str, headers: dict[str, str]) -> list[str]:
    """The agent works from a thread of its own, as another process would."""
    answers: list[Any] = []
    worker = threading.Thread(
        target=lambda: answers.append(asyncio.run(edit_and_insert(url, headers)))
    )
    worker.start()
    worker.join(180)
    assert answers, "the agent's calls did not end"
    return list(answers[0])


def test_an_mcp_clients_edits_appear_live_in_the_open_notebook(
    lab: ServerProcess, browser: Any
) -> None:
    write_notebook(lab.root, "live.ipynb", [("c1", "total = 1")])
    lab.start()
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page = open_notebook_on(page, lab, "live.ipynb")
    answers = in_a_thread(lab.url, lab.headers)
    assert "from the agent 42" in answers[0]
    page.wait_for_function(
        f"{NOTEBOOK_JSON}.cells.map(c => c.source).join('|') === "
        "\"total = 2|print('from the agent', 6 * 7)\"",
        timeout=60_000,
    )
    page.locator(".jp-OutputArea-output >> text=from the agent 42").wait_for(timeout=60_000)
    shot(page, "browser-mcp-live")
    shown = page.evaluate(NOTEBOOK_JSON)["cells"]
    assert shown[1]["metadata"]["neta"]["prompt"] == "MCP client test-agent 1.0"
    assert page.evaluate("window.__dialogs") == []
