"""Tools from MCP servers: their configuration, one held session per server, their results."""

from .config import (
    CONFIG_FILE,
    Entries,
    HttpServer,
    ServerEntry,
    StdioServer,
    configured,
    parse,
    read_file,
)
from .fleet import McpServers, build, servers_of
from .servers import McpServer
from .tools import McpTool, neta_name

__all__ = [
    "CONFIG_FILE",
    "Entries",
    "HttpServer",
    "McpServer",
    "McpServers",
    "McpTool",
    "ServerEntry",
    "StdioServer",
    "build",
    "configured",
    "neta_name",
    "parse",
    "read_file",
    "servers_of",
]
