"""Tools from MCP servers: their configuration, one held session per server, their results."""

from .config import CONFIG_FILE, Entries, HttpServer, ServerEntry, StdioServer, parse, read_file
from .servers import McpServer, McpServers, McpTool, neta_name

__all__ = [
    "CONFIG_FILE",
    "Entries",
    "HttpServer",
    "McpServer",
    "McpServers",
    "McpTool",
    "ServerEntry",
    "StdioServer",
    "neta_name",
    "parse",
    "read_file",
]
