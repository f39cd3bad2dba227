"""The MCP servers of the extension: read from its configuration, and ``GET /neta/api/mcp``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from jupyter_core.paths import jupyter_config_dir
from jupyter_server.auth.decorator import authorized
from tornado import web

from ..events.redact import Redactor
from ..mcp import CONFIG_FILE, McpServers, parse, read_file
from .base import NetaHandler


class _Configured(Protocol):
    mcp_servers: dict[str, Any]
    mcp_start_timeout: float
    mcp_call_timeout: float
    log: Any


def mcp_servers(app: _Configured, redactor: Redactor) -> McpServers:
    """The servers of ``mcp.json`` with ``c.NetaApp.mcp_servers`` over them; secrets registered."""
    path = Path(jupyter_config_dir()) / CONFIG_FILE
    raw, problem = read_file(path)
    configured = dict(app.mcp_servers)
    if set(configured) == {"mcpServers"}:  # the file's shape, pasted whole
        configured = dict(configured["mcpServers"])
    entries = parse({**raw, **configured})
    # Registered before anything runs, so no event, log line or error can show them.
    redactor.add(*entries.secrets)
    return McpServers(
        entries,
        redact=redactor,
        logger=app.log,
        start_timeout=app.mcp_start_timeout,
        call_timeout=app.mcp_call_timeout,
        problems=[problem] if problem else [],
    )


class McpHandler(NetaHandler):
    """``GET /neta/api/mcp``: the configured MCP servers, their state and their tools."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        servers: McpServers = self.settings["neta_mcp"]
        self.reply(servers.as_json())
