"""``GET /neta/api/mcp``: the MCP servers of the extension, their state and their tools."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..mcp import McpServers
from .base import NetaHandler


class McpHandler(NetaHandler):
    """``GET /neta/api/mcp``: the configured MCP servers, their state and their tools."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        servers: McpServers | None = self.settings.get("neta_mcp")
        self.reply(servers.as_json() if servers else {"servers": [], "problems": []})
