"""The notebook as an MCP server: outside agents call neta's notebook and kernel tools.

Each MCP session is a run of kind ``mcp`` in the durable log; its calls pass neta's permission
rules, edit cells by id (refused when stale), and leave provenance and revertible edits. The
server's transport (``server/mcp_endpoint.py``) puts it behind Jupyter's auth.
"""

from .catalogue import LIST_NOTEBOOKS, offered
from .server import PRINCIPAL_KEY, McpDoor
from .session import Binding, McpSession, Workspace, session_prompt

__all__ = [
    "LIST_NOTEBOOKS",
    "PRINCIPAL_KEY",
    "Binding",
    "McpDoor",
    "McpSession",
    "Workspace",
    "offered",
    "session_prompt",
]
