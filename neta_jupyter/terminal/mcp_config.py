"""``neta-jupyter mcp config CLIENT``: the snippet that connects an outside agent to neta.

The server is at ``{server URL}neta/mcp`` (the server URL includes its base URL); the Jupyter
token goes in the ``Authorization: Bearer <token>`` header, read from ``$JUPYTER_TOKEN`` where the
client can read the environment, so the snippet holds no secret unless ``--token`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

CLIENTS = ("claude", "codex", "vscode", "cursor")
NAME = "neta-jupyter"
TOKEN_VARIABLE = "JUPYTER_TOKEN"
DEFAULT_SERVER = "http://localhost:8888/"


def add_command(commands: Any) -> None:
    """``mcp config CLIENT [--server URL] [--token T]``."""
    mcp = commands.add_parser("mcp", help="connect an outside agent to the notebook over MCP")
    actions = mcp.add_subparsers(dest="mcp_command", required=True, metavar="ACTION")
    config = actions.add_parser(
        "config",
        help="print the snippet that connects CLIENT to this server's MCP endpoint",
        description="Print what to add to CLIENT's configuration so that it calls the\n"
        "notebook tools of the Jupyter server at --server (its URL with the base URL),\n"
        "through neta's MCP server at <server URL>neta/mcp. The token is read from\n"
        f"${TOKEN_VARIABLE} where the client can, unless --token is given.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    config.add_argument("client", choices=CLIENTS, help="the agent to connect")
    config.add_argument(
        "--server",
        metavar="URL",
        help=f"the Jupyter server's URL (default: $JUPYTER_SERVER_URL, else {DEFAULT_SERVER})",
    )
    config.add_argument("--token", metavar="T", help="write this token into the snippet")
    asks = actions.add_parser(
        "asks",
        help="answer the approvals outside agents' calls wait for",
        description="Answer, here, what the MCP calls of outside agents (Claude Code, Codex,\n"
        "...) ask before they change a notebook or run code: each waiting ask is shown with\n"
        "its tool and arguments and answered [y]es / [a]lways / [n]o, until Ctrl-C.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    asks.add_argument(
        "--server",
        metavar="URL",
        help=f"the Jupyter server's URL (default: $JUPYTER_SERVER_URL, else {DEFAULT_SERVER})",
    )
    asks.add_argument("--token", metavar="T", help="the server's token (default: $JUPYTER_TOKEN)")
    asks.add_argument("--yes", "-y", action="store_true", help="approve every ask without asking")
    asks.add_argument("--once", action="store_true", help="answer the asks waiting now, then end")


def server_url(server: str | None) -> str:
    """The Jupyter server's URL, ending in ``/`` (its base URL kept, no query)."""
    base = server or os.environ.get("JUPYTER_SERVER_URL") or DEFAULT_SERVER
    return base.split("?", 1)[0].rstrip("/") + "/"


def endpoint(server: str | None) -> str:
    """The MCP endpoint of the server at ``server`` (its base URL kept)."""
    return f"{server_url(server)}neta/mcp"


def snippet(client: str, url: str, token: str | None) -> tuple[str, str]:
    """Where ``client``'s configuration is, and what to add to it."""
    match client:
        case "claude":
            secret = token or f"${TOKEN_VARIABLE}"
            return "run in a shell (Claude Code)", (
                f'claude mcp add --transport http {NAME} {url} --header "Authorization: '
                f'Bearer {secret}"\n'
            )
        case "codex":
            auth = (
                f'http_headers = {{ Authorization = "Bearer {token}" }}'
                if token
                else f'bearer_token_env_var = "{TOKEN_VARIABLE}"'
            )
            return "~/.codex/config.toml", f'[mcp_servers.{NAME}]\nurl = "{url}"\n{auth}\n'
        case "vscode":
            secret = token or "${input:jupyter-token}"
            body: dict[str, Any] = {
                "servers": {NAME: _http(url, secret, typed=True)},
            }
            if token is None:
                body["inputs"] = [_token_input()]
            return ".vscode/mcp.json in the workspace", json.dumps(body, indent=2) + "\n"
        case "cursor":
            secret = token or f"${{env:{TOKEN_VARIABLE}}}"
            body = {"mcpServers": {NAME: _http(url, secret, typed=False)}}
            return "~/.cursor/mcp.json", json.dumps(body, indent=2) + "\n"
    raise ValueError(f"no snippet for {client!r}; one of {', '.join(CLIENTS)}")


def _http(url: str, secret: str, *, typed: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "http"} if typed else {}
    return entry | {"url": url, "headers": {"Authorization": f"Bearer {secret}"}}


def _token_input() -> dict[str, Any]:
    return {
        "type": "promptString",
        "id": "jupyter-token",
        "description": "The Jupyter server's token",
        "password": True,
    }


def command(args: argparse.Namespace) -> int:
    """Print the snippet (where it goes on stderr, so that stdout holds only it)."""
    where, text = snippet(args.client, endpoint(args.server), args.token)
    print(f"# {where}:", file=sys.stderr)
    print(text, end="")
    return 0
