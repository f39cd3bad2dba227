"""An outside agent edits and runs a notebook through neta's MCP server, as one run of the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.tools.notebook_doc import source_hash
from tests.helpers import ApiClient, types
from tests.notebook_mcp.agent import agent, cells_of, text_of, write_notebook

pytestmark = pytest.mark.timeout(180)

CLIENT_RULES = [
    {"tool": "*_cell", "action": "allow", "client": "test-agent"},
]


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"permission_rules": CLIENT_RULES}


async def test_an_agent_reads_inserts_and_has_a_stale_edit_refused_then_edits(
    server_url: str, jp_auth_header: dict[str, str], jp_root_dir: Path, api: ApiClient
) -> None:
    path = write_notebook(jp_root_dir, "work.ipynb", [("c1", "x = 1")])
    async with agent(server_url, jp_auth_header) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"list_notebooks", "read_notebook", "insert_cell", "edit_cell", "run_cell"} <= names
        read = await session.call_tool("read_notebook", {"notebook": "work.ipynb"})
        assert not read.is_error, text_of(read)
        assert "c1" in text_of(read) and source_hash("x = 1") in text_of(read)

        inserted = await session.call_tool(
            "insert_cell", {"notebook": "work.ipynb", "source": "y = 2", "after_cell_id": "c1"}
        )
        assert not inserted.is_error, text_of(inserted)
        assert [c["source"] for c in cells_of(path)] == ["x = 1", "y = 2"]

        path.write_text(path.read_text().replace('"x = 1"', '"x = 10"'))  # the user changed it
        stale = await session.call_tool(
            "edit_cell",
            {
                "notebook": "work.ipynb",
                "cell_id": "c1",
                "source": "x = 3",
                "source_hash": source_hash("x = 1"),
            },
        )
        assert stale.is_error
        assert "x = 10" in text_of(stale) and source_hash("x = 10") in text_of(stale)
        assert cells_of(path)[0]["source"] == "x = 10"

        edited = await session.call_tool(
            "edit_cell",
            {
                "notebook": "work.ipynb",
                "cell_id": "c1",
                "source": "x = 3",
                "source_hash": source_hash("x = 10"),
            },
        )
        assert not edited.is_error, text_of(edited)
        unhashed = {"notebook": "work.ipynb", "cell_id": "c1", "source": "x = 4"}
        path.write_text(path.read_text().replace('"x = 3"', '"x = 30"'))  # the user again
        refused = await session.call_tool("edit_cell", unhashed)  # no hash: as last seen
        assert refused.is_error and "x = 30" in text_of(refused)
        assert cells_of(path)[0]["source"] == "x = 30"
        path.write_text(path.read_text().replace('"x = 30"', '"x = 3"'))
        cell = cells_of(path)[0]
        assert cell["source"] == "x = 3"
        assert cell["metadata"]["neta"]["prompt"] == "MCP client test-agent 1.0"
    undone = await api.http.post("neta/api/notebook/revert", json={"notebookPath": "work.ipynb"})
    assert undone.status_code == 200, undone.text  # as `%neta undo` asks it
    assert cells_of(path)[0]["source"] == "x = 10"
    runs = (await api.http.get("neta/api/agent/runs")).json()["runs"]
    run = next(r for r in runs if r["prompt"] == "MCP client test-agent 1.0")
    events = await api.segment(run["requestId"])
    assert types(events)[-1] == "MESSAGE_COMPLETED"
