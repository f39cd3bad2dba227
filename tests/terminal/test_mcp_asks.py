"""``neta-jupyter mcp asks`` answers, at the terminal, what an outside agent's MCP call asks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from neta_jupyter.cli import main
from tests.helpers import ApiClient
from tests.notebook_mcp.agent import agent, cells_of, text_of, write_notebook
from tests.notebook_mcp.test_asks import pending_ask

pytestmark = pytest.mark.timeout(120)


async def test_the_terminal_approves_an_ask_and_denies_one_it_cannot_ask_about(
    server_url: str,
    jp_auth_header: dict[str, str],
    jp_root_dir: Path,
    api: ApiClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_notebook(jp_root_dir, "term.ipynb", [("c1", "t = 1")])
    token = jp_auth_header["Authorization"].split(" ", 1)[1]
    command = ["mcp", "asks", "--server", server_url, "--token", token, "--once"]
    async with agent(server_url, jp_auth_header, "term-agent") as session:
        insert = {"notebook": "term.ipynb", "source": "t = 2"}
        call = asyncio.ensure_future(session.call_tool("insert_cell", insert))
        await pending_ask(api, "MCP client term-agent 1.0")
        assert await asyncio.to_thread(main, [*command, "--yes"]) == 0
        assert not (await asyncio.wait_for(call, 60)).is_error
        assert [c["source"] for c in cells_of(path)] == ["t = 1", "t = 2"]
        assert "approved: insert_cell of term-agent" in capsys.readouterr().out

        again = asyncio.ensure_future(session.call_tool("insert_cell", insert))
        await pending_ask(api, "MCP client term-agent 1.0")
        assert await asyncio.to_thread(main, command) == 0  # stdin is no terminal here
        denied = await asyncio.wait_for(again, 60)
        assert denied.is_error and "denied" in text_of(denied)
        assert "denied: insert_cell of term-agent" in capsys.readouterr().out
