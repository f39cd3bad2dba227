"""An outside agent's MCP client: the official SDK's, over streamable HTTP, with a Jupyter token."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

SESSION_HEADER = "mcp-session-id"


@asynccontextmanager
async def agent(
    server_url: str, headers: dict[str, str], name: str = "test-agent", version: str = "1.0"
) -> AsyncIterator[ClientSession]:
    """A client session with neta's MCP server, initialized, named ``name`` ``version``."""
    http = httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(60, read=300), trust_env=False
    )
    async with (
        http,
        streamable_http_client(f"{server_url}neta/mcp", http_client=http) as (read, write),
        ClientSession(
            read, write, client_info=types.Implementation(name=name, version=version)
        ) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: types.CallToolResult) -> str:
    """The text parts of a result, joined."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def write_notebook(root: Path, name: str, cells: list[tuple[str, str]]) -> Path:
    """A notebook of code cells ``(id, source)`` under the server root."""
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "cells": [
            {
                "id": cell_id,
                "cell_type": "code",
                "metadata": {},
                "source": source,
                "outputs": [],
                "execution_count": None,
            }
            for cell_id, source in cells
        ],
    }
    path = root / name
    path.write_text(json.dumps(notebook))
    return path


def cells_of(path: Path) -> list[dict[str, Any]]:
    """The cells of the notebook file as saved."""
    cells: list[dict[str, Any]] = json.loads(path.read_text())["cells"]
    return [
        c | {"source": "".join(c["source"]) if isinstance(c["source"], list) else c["source"]}
        for c in cells
    ]
