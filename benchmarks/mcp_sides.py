"""The two MCP servers of ``mcp_side_by_side``, as its scenario calls them.

Each side opens an SDK client session per agent and says how its server appends a cell, reads
one and rewrites one, timing every tool call. neta addresses cells by id and checks a rewrite
against the version the session read; Datalayer's server takes a notebook name per call.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


class Side(Protocol):
    """One server under test."""

    name: str
    timings: list[float]
    answers: list[str]

    def client(self, agent: str) -> Any:
        """An async context: a session of the agent ``agent`` with the notebook in use."""
        ...

    async def append(self, session: ClientSession, source: str) -> None:
        """Append a code cell."""
        ...

    async def read(self, session: ClientSession, cell_id: str) -> None:
        """Read the cell (the agent sees its source now)."""
        ...

    async def overwrite(self, session: ClientSession, cell_id: str, source: str) -> str:
        """Rewrite the cell as the agent would from what it read; what the server answered."""
        ...


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@asynccontextmanager
async def _session(url: str, headers: dict[str, str], agent: str) -> AsyncIterator[ClientSession]:
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300))
    info = types.Implementation(name=f"bench-{agent}", version="1")
    async with (
        http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, client_info=info) as session,
    ):
        await session.initialize()
        yield session


class _Timed:
    name = ""

    def __init__(self) -> None:
        self.timings: list[float] = []
        self.answers: list[str] = []
        """Each call's tool and answer (the start of it), in order."""

    async def call(self, session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
        began = time.perf_counter()
        result = await session.call_tool(tool, arguments)
        self.timings.append((time.perf_counter() - began) * 1000)
        answer = ("ERROR: " if result.is_error else "") + _text(result)
        self.answers.append(f"{tool}: {answer[:300]}")
        return answer


class NetaSide(_Timed):
    """neta's MCP server at ``{server}neta/mcp``."""

    name = "neta"

    def __init__(self, server_url: str, headers: dict[str, str], notebook: str = "race.ipynb"):
        super().__init__()
        self._url = f"{server_url}neta/mcp"
        self._headers = headers
        self._notebook = notebook

    def client(self, agent: str) -> Any:
        return _session(self._url, self._headers, agent)

    async def append(self, session: ClientSession, source: str) -> None:
        await self.call(
            session,
            "insert_cell",
            {"notebook": self._notebook, "source": source, "position": "end"},
        )

    async def read(self, session: ClientSession, cell_id: str) -> None:
        await self.call(session, "read_notebook", {"notebook": self._notebook, "cell_id": cell_id})

    async def overwrite(self, session: ClientSession, cell_id: str, source: str) -> str:
        arguments = {"notebook": self._notebook, "cell_id": cell_id, "source": source}
        return await self.call(session, "edit_cell", arguments)


class DatalayerSide(_Timed):
    """Datalayer's ``jupyter-mcp-server`` (streamable HTTP, its own token)."""

    name = "datalayer jupyter-mcp-server"

    def __init__(self, url: str, token: str, notebook: str = "race.ipynb") -> None:
        super().__init__()
        self._url = url
        self._headers = {"Authorization": f"Bearer {token}"}
        self._notebook = notebook

    @asynccontextmanager
    async def client(self, agent: str) -> AsyncIterator[ClientSession]:
        async with _session(self._url, self._headers, agent) as session:
            await self.call(
                session,
                "use_notebook",
                {"notebook_name": agent, "notebook_path": self._notebook, "mode": "connect"},
            )
            self._names = getattr(self, "_names", {}) | {id(session): agent}
            yield session

    async def append(self, session: ClientSession, source: str) -> None:
        name = self._names[id(session)]
        await self.call(
            session,
            "insert_cell",
            {"cell_index": -1, "cell_type": "code", "cell_source": source, "notebook_name": name},
        )

    async def read(self, session: ClientSession, cell_id: str) -> None:
        name = self._names[id(session)]
        await self.call(session, "read_cell", {"cell_id": cell_id, "notebook_name": name})

    async def overwrite(self, session: ClientSession, cell_id: str, source: str) -> str:
        name = self._names[id(session)]
        arguments = {"cell_id": cell_id, "cell_source": source, "notebook_name": name}
        return await self.call(session, "overwrite_cell_source", arguments)
