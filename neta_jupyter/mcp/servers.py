"""One session per configured MCP server, held for the server's lifetime, and its tools.

Each session lives in a task of its own: the SDK's transports are anyio task groups, which must be
entered and left by the same task. Calls from runs go through the held session; a server that
cannot start is kept with its error, and its tools are simply not offered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import BaseModel, ConfigDict

from ..providers.base import ToolDefinition
from ..tools import Tool, ToolContext, ToolError, ToolRegistry, ToolResult
from ..tools.registry import json_arguments
from .config import Entries, HttpServer, ServerEntry, ServerSpec
from .results import tool_result

State = Literal["starting", "ready", "failed", "exited", "stopped", "invalid", "disabled"]
SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class _AnyArguments(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, slots=True)
class McpTool(Tool):
    """A tool of an MCP server, offered as ``<server>__<tool>`` with the server's JSON Schema."""

    schema: dict[str, Any] = field(default_factory=dict, compare=False)
    server: str = ""
    remote_name: str = ""

    @property
    def definition(self) -> ToolDefinition:
        """The tool with its server's schema (no pydantic model stands between them)."""
        return ToolDefinition(self.name, self.description, self.schema)

    def parse_arguments(self, arguments: str) -> dict[str, Any]:
        """A JSON object; the server checks it against its schema."""
        return json_arguments(self.name, arguments)


def neta_name(server: str, tool: str) -> str:
    """The name the model sees: ``<server>__<tool>``, with characters models refuse replaced."""
    return f"{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"[:64]


class McpServer:
    """One configured server and its held session."""

    def __init__(
        self,
        entry: ServerEntry,
        *,
        redact: Callable[[str], str],
        logger: logging.Logger,
        start_timeout: float,
        call_timeout: float | None,
    ) -> None:
        self.entry = entry
        self.name = entry.name
        self.state: State = (
            "invalid" if entry.spec is None else "disabled" if entry.disabled else "stopped"
        )
        self.error: str | None = entry.error
        self.tools: list[types.Tool] = []
        self._redact = redact
        self._log = logger
        self._start_timeout = start_timeout
        self._call_timeout = (entry.spec.timeout if entry.spec else None) or call_timeout
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._restart = asyncio.Lock()
        self._crashes = 0

    async def start(self) -> None:
        """Start the server and list its tools; on failure the error is kept, never raised."""
        if self.entry.spec is None or self.entry.disabled:
            return
        self.state = "starting"
        self._ready, self._stop = asyncio.Event(), asyncio.Event()
        self._task = asyncio.create_task(self._hold(), name=f"mcp-{self.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), self._start_timeout)
        except TimeoutError:
            self._fail(f"did not start within {self._start_timeout:g} s")
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def _hold(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._connect(stack)
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.tools = await _list_tools(session)
                self._session, self.state = session, "ready"
                self._ready.set()
                await self._stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # any failure is the server's state, not ours
            began = self.state == "starting"
            self._fail(f"could not start: {_describe(exc)}" if began else _describe(exc))
        finally:
            self._session = None
            if self.state == "ready":
                self.state = "stopped"
            self._ready.set()

    async def _connect(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        """The transport's streams, open until ``stack`` closes."""
        spec = self.entry.spec
        if isinstance(spec, HttpServer):
            client = create_mcp_http_client(headers=dict(spec.headers))
            streams: tuple[Any, Any] = await stack.enter_async_context(
                streamable_http_client(spec.url, http_client=client)
            )
            return streams
        assert spec is not None
        params = StdioServerParameters(
            command=spec.command, args=list(spec.args), env=dict(spec.env), cwd=spec.cwd
        )
        errlog = stack.enter_context(_StderrLog(self.name, self._log, self._redact))
        streams = await stack.enter_async_context(stdio_client(params, errlog=errlog.file))
        errlog.started()
        return streams

    def _fail(self, message: str) -> None:
        self.state = "failed"
        self.error = self._redact(message)
        self._log.warning("neta: MCP server %s: %s", self.name, self.error)

    async def close(self) -> None:
        """End the session and the server."""
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 10)
            except (TimeoutError, Exception):  # closing must not fail the shutdown
                self._task.cancel()
        if self.state in ("ready", "starting"):
            self.state = "stopped"

    async def call(self, remote: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Call a tool of this server; failures of any kind are a :class:`ToolError`.

        The server's progress notifications become the call's process events and card title;
        a cancelled call (the run was stopped) is cancelled on the server too, by the SDK.
        """
        if self.state == "exited":
            await self._start_again()
        session = self._session
        if session is None:
            raise ToolError(f"MCP server {self.name} is not running ({self.error or self.state})")

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            ctx.process.report(stage=remote, message=message, current=progress, total=total)
            if message:
                ctx.report(message)

        try:
            result = await session.call_tool(
                remote,
                arguments,
                read_timeout_seconds=self._call_timeout,
                progress_callback=on_progress,
            )
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                await self._exited()
                raise ToolError(
                    f"MCP server {self.name} exited during the call; it is started again for "
                    "the next one"
                ) from exc
            if exc.code == REQUEST_TIMEOUT:
                raise ToolError(
                    f"MCP server {self.name}: {remote} gave no answer within "
                    f"{self._call_timeout:g} s, so the call was cancelled"
                ) from exc
            raise ToolError(f"MCP server {self.name}: {exc.message}") from exc
        except (ToolError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise ToolError(f"MCP server {self.name}: {_describe(exc)}") from exc
        self._crashes = 0
        return tool_result(remote, result)

    async def _exited(self) -> None:
        """The server is gone: end what is left of its session; the next call starts it again."""
        if self.state != "ready":
            return
        await self.close()
        self.state, self.error = "exited", "exited; started again on the next call"
        self._crashes += 1
        self._log.warning("neta: MCP server %s exited", self.name)

    async def _start_again(self) -> None:
        """Start an exited server: at once, then after 1, 2, 4 … 30 s while it keeps crashing."""
        async with self._restart:
            if self.state != "exited":
                return  # another call started it meanwhile
            if self._crashes > 1:
                await asyncio.sleep(min(30.0, 2.0 ** (self._crashes - 2)))
            self.error = None
            await self.start()

    def neta_tools(self) -> list[McpTool]:
        """The server's tools as neta tools."""
        return [self._tool(t) for t in self.tools]

    def _tool(self, remote: types.Tool) -> McpTool:
        async def run(ctx: ToolContext, **arguments: Any) -> ToolResult:
            return await self.call(remote.name, arguments, ctx)

        annotations = remote.annotations
        schema = dict(remote.input_schema or {})
        schema.setdefault("type", "object")
        return McpTool(
            name=neta_name(self.name, remote.name),
            description=remote.description or remote.title or remote.name,
            function=run,
            arguments_model=_AnyArguments,
            readonly=bool(annotations is not None and annotations.read_only_hint),
            schema=schema,
            server=self.name,
            remote_name=remote.name,
        )

    def as_json(self) -> dict[str, Any]:
        """The server, its state and its tools (no command line or headers: they hold secrets)."""
        spec = self.entry.spec
        out: dict[str, Any] = {
            "name": self.name,
            "transport": None
            if spec is None
            else "http"
            if isinstance(spec, HttpServer)
            else "stdio",
            "state": self.state,
            "tools": [
                {
                    "name": t.name,
                    "tool": t.remote_name,
                    "description": t.description,
                    "readOnly": t.readonly,
                    "inputSchema": t.schema,
                }
                for t in self.neta_tools()
            ],
        }
        if self.error:
            out["error"] = self._redact(self.error)
        return out


class McpServers:
    """Every configured server: started with the extension, closed at shutdown."""

    def __init__(
        self,
        entries: Entries,
        *,
        redact: Callable[[str], str],
        logger: logging.Logger,
        start_timeout: float = 30.0,
        call_timeout: float | None = None,
        problems: list[str] | None = None,
    ) -> None:
        self.servers = [
            McpServer(
                e,
                redact=redact,
                logger=logger,
                start_timeout=start_timeout,
                call_timeout=call_timeout,
            )
            for e in entries.servers
        ]
        self.problems = [redact(p) for p in problems or []]
        """Configuration problems that belong to no one server (an unreadable file)."""
        for entry in entries.servers:
            if entry.error:
                logger.warning("neta: %s", redact(entry.error))

    async def start(self, registry: ToolRegistry) -> None:
        """Start every server at once; each one's tools join ``registry`` once it is up."""

        async def start(server: McpServer) -> None:
            await server.start()
            for t in server.neta_tools():
                registry.register(t)

        await asyncio.gather(*(start(s) for s in self.servers))

    async def close(self) -> None:
        """Close every session."""
        await asyncio.gather(*(s.close() for s in self.servers))

    def as_json(self) -> dict[str, Any]:
        """What ``GET /neta/api/mcp`` answers."""
        return {"servers": [s.as_json() for s in self.servers], "problems": self.problems}


class _StderrLog:
    """A stdio server's stderr, line by line into the server log with secrets cut out."""

    def __init__(self, name: str, logger: logging.Logger, redact: Callable[[str], str]) -> None:
        read_end, write_end = os.pipe()
        self.file: TextIO = os.fdopen(write_end, "w")
        self._reader = threading.Thread(
            target=self._pump,
            args=(os.fdopen(read_end, encoding="utf-8", errors="replace"),),
            name=f"mcp-{name}-stderr",
            daemon=True,
        )
        self._name, self._log, self._redact = name, logger, redact
        self._reader.start()

    def _pump(self, lines: TextIO) -> None:
        with lines:
            for line in lines:
                if text := line.rstrip():
                    self._log.info("neta: MCP server %s: %s", self._name, self._redact(text))

    def started(self) -> None:
        """The server has its own copy of the pipe: ours closes, so its exit ends the reader."""
        self.file.close()

    def __enter__(self) -> _StderrLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        if not self.file.closed:
            self.file.close()


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def _transport_name(spec: ServerSpec | None) -> str | None:
    return None if spec is None else "http" if isinstance(spec, HttpServer) else "stdio"


def _describe(exc: BaseException) -> str:
    """The innermost failures of an exception (task groups wrap them in groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.message
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, OSError | ToolError) else f"{type(exc).__name__}: {text}"
