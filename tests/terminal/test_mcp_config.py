"""``neta-jupyter mcp config CLIENT`` prints a snippet with which that client reaches the server."""

from __future__ import annotations

import json
import shlex
import tomllib

import pytest

from neta_jupyter.cli import main
from tests.notebook_mcp.agent import agent

pytestmark = pytest.mark.timeout(120)


def endpoint_of(client: str, printed: str, token: str) -> tuple[str, str]:
    """The URL and the Authorization header the client would use, as the snippet says."""
    match client:
        case "claude":
            words = shlex.split(printed.replace("$JUPYTER_TOKEN", token))
            assert words[:5] == ["claude", "mcp", "add", "--transport", "http"]
            return words[6], words[words.index("--header") + 1].split(": ", 1)[1]
        case "codex":
            entry = tomllib.loads(printed)["mcp_servers"]["neta-jupyter"]
            assert entry["bearer_token_env_var"] == "JUPYTER_TOKEN"
            return entry["url"], f"Bearer {token}"
        case "vscode":
            body = json.loads(printed)
            assert body["inputs"][0]["id"] == "jupyter-token" and body["inputs"][0]["password"]
            entry = body["servers"]["neta-jupyter"]
            assert entry["type"] == "http"
            header = entry["headers"]["Authorization"]
            return entry["url"], header.replace("${input:jupyter-token}", token)
        case _:
            entry = json.loads(printed)["mcpServers"]["neta-jupyter"]
            header = entry["headers"]["Authorization"]
            return entry["url"], header.replace("${env:JUPYTER_TOKEN}", token)


@pytest.mark.parametrize("client", ["claude", "codex", "vscode", "cursor"])
async def test_the_printed_snippet_reaches_the_mcp_server_under_its_base_url(
    client: str, server_url: str, jp_auth_header: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "config", client, "--server", server_url]) == 0
    out = capsys.readouterr()
    token = jp_auth_header["Authorization"].split(" ", 1)[1]
    assert token not in out.out  # the snippet holds no secret
    url, header = endpoint_of(client, out.out, token)
    assert url == f"{server_url}neta/mcp"
    async with agent(url.removesuffix("neta/mcp"), {"Authorization": header}) as session:
        assert "read_notebook" in {t.name for t in (await session.list_tools()).tools}


def test_a_given_token_is_written_into_the_snippet(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["mcp", "config", "codex", "--server", "http://h:8888/base/", "--token", "t0k"]) == 0
    )
    entry = tomllib.loads(capsys.readouterr().out)["mcp_servers"]["neta-jupyter"]
    assert entry == {
        "url": "http://h:8888/base/neta/mcp",
        "http_headers": {"Authorization": "Bearer t0k"},
    }
