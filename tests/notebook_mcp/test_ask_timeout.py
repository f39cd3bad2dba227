"""An MCP call whose ask nobody answers fails once c.NetaApp.mcp_ask_timeout is over, clearly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ApiClient
from tests.notebook_mcp.agent import agent, cells_of, text_of, write_notebook

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"mcp_ask_timeout": 1.0, "mcp_progress_interval": 0.2}


async def test_an_ask_nobody_answers_fails_the_call_saying_so(
    server_url: str, jp_auth_header: dict[str, str], jp_root_dir: Path, api: ApiClient
) -> None:
    path = write_notebook(jp_root_dir, "late.ipynb", [("c1", "z = 1")])
    async with agent(server_url, jp_auth_header) as session:
        late = await session.call_tool("insert_cell", {"notebook": "late.ipynb", "source": "z = 2"})
        assert late.is_error
        assert "nobody answered the approval of insert_cell within 1 s" in text_of(late)
        assert [c["source"] for c in cells_of(path)] == ["z = 1"]
        runs = (await api.http.get("neta/api/agent/runs")).json()["runs"]
        assert runs[0]["status"] == "running" and runs[0].get("pendingAsk") is None
    events = await api.segment(runs[0]["requestId"])
    resolved = [e["data"] for e in events if e["eventType"] == "PERMISSION_ASK_RESOLVED"]
    assert [(r["approved"], r["reason"]) for r in resolved] == [(False, "timeout")]
