"""Jupyter's auth in front of the MCP server: a wrong token, another user's token and a request
from another origin are refused; one user's client sees neither another's notebooks nor runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import ApiClient
from tests.notebook_mcp.agent import SESSION_HEADER, agent, text_of, write_notebook
from tests.server.test_ownership import TOKENS, TwoUsers

pytestmark = pytest.mark.timeout(180)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def jp_server_config(tmp_path: Path) -> dict[str, Any]:
    return {
        "ServerApp": {
            "jpserver_extensions": {"neta_jupyter": True},
            "identity_provider_class": TwoUsers,
        },
        "NetaApp": {
            "data_dir": str(tmp_path / "neta-data"),
            "permission_rules": [{"tool": "run_cell", "action": "allow"}],
        },
    }


def token(user: str) -> dict[str, str]:
    return {"Authorization": f"token {TOKENS[user]}"}


async def post(server_url: str, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30, trust_env=False) as http:
        return await http.post(
            f"{server_url}neta/mcp", json=INITIALIZE, headers={**ACCEPT, **headers}
        )


async def test_a_wrong_token_another_origin_and_another_users_token_are_refused(
    server_url: str,
) -> None:
    wrong = await post(server_url, {"Authorization": "token not-a-token"})
    assert wrong.status_code == 403
    assert wrong.json()["errCode"] == "NOT_AUTHENTICATED"
    assert "Authorization: token" in wrong.json()["message"]

    elsewhere = await post(server_url, {**token("alice"), "Origin": "https://evil.example"})
    assert elsewhere.status_code == 403
    assert elsewhere.json()["errCode"] == "ORIGIN_NOT_ALLOWED"

    opened = await post(server_url, token("alice"))
    assert opened.status_code == 200, opened.text
    session_id = opened.headers[SESSION_HEADER]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient(timeout=30, trust_env=False) as http:
        headers = {**ACCEPT, SESSION_HEADER: session_id, "Mcp-Protocol-Version": "2025-06-18"}
        bobs = await http.post(
            f"{server_url}neta/mcp", json=listing, headers={**headers, **token("bob")}
        )
    assert bobs.status_code == 404  # alice's session does not exist for bob


async def test_one_users_client_sees_neither_anothers_notebooks_nor_runs(
    server_url: str, jp_root_dir: Path
) -> None:
    write_notebook(jp_root_dir, "alice.ipynb", [("a", "secret = 42")])
    async with (
        agent(server_url, token("alice"), "alice-agent") as alice,
        agent(server_url, token("bob"), "bob-agent") as bob,
    ):
        ran = await alice.call_tool("run_cell", {"notebook": "alice.ipynb", "cell_id": "a"})
        assert not ran.is_error, text_of(ran)
        assert "alice.ipynb" in text_of(await alice.call_tool("list_notebooks", {}))
        assert "alice.ipynb" not in text_of(await bob.call_tool("list_notebooks", {}))
        used = await bob.call_tool("list_variables", {"notebook": "alice.ipynb"})
        assert used.is_error and "another user" in text_of(used)
        async with httpx.AsyncClient(base_url=server_url, timeout=30, trust_env=False) as http:
            alices = (await http.get("neta/api/agent/runs", headers=token("alice"))).json()
            bobs = (await http.get("neta/api/agent/runs", headers=token("bob"))).json()
        assert [r["prompt"] for r in alices["runs"]] == ["MCP client alice-agent 1.0"]
        assert [r["prompt"] for r in bobs["runs"]] == ["MCP client bob-agent 1.0"]
        alices_run = alices["runs"][0]["requestId"]
        async with httpx.AsyncClient(base_url=server_url, timeout=30, trust_env=False) as http:
            bob_api = ApiClient(http)
            http.headers.update(token("bob"))
            assert (await bob_api.resume(alices_run, approved=True)).status_code == 404
        await asyncio.sleep(0)
