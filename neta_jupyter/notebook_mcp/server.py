"""The MCP server: the official SDK's low-level server and its streamable-HTTP session manager.

The transport in front of it (``server/``) authenticates each request and puts its principal in
the ASGI scope (:data:`PRINCIPAL_KEY`), and an ``AuthenticatedUser`` naming it, so that the SDK
answers a session only to the user who opened it. Each MCP session is a run
(:class:`~.session.McpSession`), made at its first call and ended with it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from .._version import __version__
from ..runtime.data.state import McpClient
from ..tools import ToolError, ToolResult
from .asks import Progress
from .catalogue import LIST_NOTEBOOKS, offered
from .session import McpSession, Workspace

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ..runtime.manager import Runtime

PRINCIPAL_KEY = "neta.principal"
"""Where the transport puts the request's principal in the ASGI scope."""
SESSION_HEADER = "mcp-session-id"
UNNAMED = McpClient(name="unnamed-client")

INSTRUCTIONS = (
    "neta's Jupyter workspace. Cells are addressed by id: read_notebook shows each cell's id and "
    "hash; edit_cell and delete_cell carry the hash and are refused when the cell changed since "
    "you read it (the refusal holds the current source and hash). Changes and code may wait for "
    "the user's approval in JupyterLab."
)


class McpDoor:
    """The MCP server of one Jupyter server: the SDK's server, its sessions and their runs."""

    def __init__(
        self,
        runtime: Runtime,
        workspace: Workspace,
        *,
        ask_timeout: float = 300.0,
        keepalive: float = 5.0,
        idle_timeout: float | None = 3600.0,
    ) -> None:
        self._runtime = runtime
        self._workspace = workspace
        self._ask_timeout = ask_timeout
        self._keepalive = keepalive
        self._sessions: dict[str, McpSession] = {}
        self._opening = asyncio.Lock()
        self.server: Server[Any] = Server(
            "neta-jupyter",
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.manager = StreamableHTTPSessionManager(self.server, session_idle_timeout=idle_timeout)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The session manager runs; once it stops, every session's run has ended."""
        try:
            async with self.manager.run():
                yield
        finally:
            for mcp in list(self._sessions.values()):
                await mcp.end("the server stopped")
            self._sessions.clear()

    def session_run(self, mcp_session_id: str) -> str | None:
        """The requestId of an MCP session's run (``None``: no call made yet, or no session)."""
        found = self._sessions.get(mcp_session_id)
        return found.run.request_id if found is not None else None

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        await self._session(ctx)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.input_schema,
                    annotations=types.ToolAnnotations(read_only_hint=t.readonly),
                )
                for t in offered(self._runtime.tools)
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        mcp = await self._session(ctx)
        arguments = dict(params.arguments or {})
        try:
            if params.name == LIST_NOTEBOOKS:
                listed = await self._workspace.notebooks(mcp.run.principal)
                return _text(json.dumps({"notebooks": listed}, indent=1))
            progress = Progress()
            async with _keeping_alive(ctx, progress, self._keepalive):
                result = await mcp.call(params.name, arguments, progress)
        except ToolError as exc:
            return types.CallToolResult(content=[types.TextContent(text=str(exc))], is_error=True)
        return _content(result)

    async def _session(self, ctx: ServerRequestContext[Any, Any]) -> McpSession:
        """The run of the request's MCP session, born at its first call."""
        request = ctx.request
        principal = request.scope.get(PRINCIPAL_KEY) if request is not None else None
        key = request.headers.get(SESSION_HEADER) if request is not None else None
        if not isinstance(principal, str) or key is None:
            raise ToolError("this server answers authenticated streamable-HTTP sessions only")
        async with self._opening:
            found = self._sessions.get(key)
            if found is None:
                found = await McpSession.born(
                    self._runtime,
                    self._workspace,
                    principal,
                    _client(ctx),
                    ask_timeout=self._ask_timeout,
                )
                self._sessions[key] = found
                _on_close(ctx, lambda: self._forget(key))
        return found

    async def _forget(self, key: str) -> None:
        found = self._sessions.pop(key, None)
        if found is not None:
            await found.end()


def _client(ctx: ServerRequestContext[Any, Any]) -> McpClient:
    params = ctx.session.client_params
    if params is None:
        return UNNAMED
    info = params.client_info
    return McpClient(name=info.name or UNNAMED.name, version=info.version or "")


def _on_close(ctx: ServerRequestContext[Any, Any], then: Any) -> None:
    """Run ``then`` when the MCP session's connection closes (DELETE, idle, shutdown)."""
    # The connection's exit stack is where the SDK runs per-connection cleanup; the session
    # object holds the connection without a public accessor.
    connection = getattr(ctx.session, "_connection", None)
    stack = getattr(connection, "exit_stack", None)
    if stack is not None:
        stack.push_async_callback(then)


@contextlib.asynccontextmanager
async def _keeping_alive(
    ctx: ServerRequestContext[Any, Any], progress: Progress, every: float
) -> AsyncIterator[None]:
    """Progress notifications while the call runs or waits, so that its client keeps waiting."""

    async def tick() -> None:
        count = 0
        while True:
            await asyncio.sleep(every)
            count += 1
            with contextlib.suppress(Exception):  # a client gone away: the call ends anyway
                await ctx.session.report_progress(count, None, progress.message)

    ticker = asyncio.ensure_future(tick())
    try:
        yield
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


def _content(result: ToolResult) -> types.CallToolResult:
    """Text, then figures as image content."""
    content: list[types.TextContent | types.ImageContent] = [types.TextContent(text=result.output)]
    for image in result.images:
        data = base64.b64encode(image.content).decode("ascii")
        content.append(types.ImageContent(data=data, mime_type=image.content_type))
    return types.CallToolResult(content=list(content))
