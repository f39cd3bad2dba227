"""One configured MCP server: its held session, its lifecycle and its tools.

Each session lives in a task of its own: the SDK's transports are anyio task groups, which must be
entered and left by the same task. A server starts when a run first may use its tools (or with
the Jupyter server, ``"startup": true``); one that exits (an HTTP server: goes away, see
``http.py``) is started or connected to again when next needed, after a pause that grows while it
keeps crashing or staying away; one that cannot start keeps its error, its tools are not offered,
and a later run tries again once a growing pause has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from ..tools import ToolContext
from ..tools.values import ToolError, ToolResult
from .config import HttpServer, ServerEntry, ServerSpec
from .relay import DEFAULT_MAX_RESULT_BYTES
from .starts import watch_start
from .stderr import StderrLog
from .tools import SEPARATOR, McpTool, mcp_tool

if TYPE_CHECKING:
    from mcp import ClientSession, types

SDK = ("mcp", "mcp.client.stdio", "mcp.client.streamable_http", "httpx2", "jsonschema")
"""What a server's session needs, imported when the first server starts (see :func:`_sdk`)."""

State = Literal["idle", "starting", "ready", "failed", "exited", "stopped", "invalid", "disabled"]


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
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        on_ready: Callable[[McpServer], None] = lambda server: None,
    ) -> None:
        self.entry = entry
        self.name = entry.name
        spec = entry.spec
        self.state: State = "invalid" if spec is None else "disabled" if entry.disabled else "idle"
        self.error: str | None = entry.error
        self.tools: list[types.Tool] = []
        self.attempts = 0
        """Starts begun so far (each names its own operation in a run's timeline)."""
        self.restarting = False
        """The start under way follows an exit (not a first start, nor a failed one)."""
        self._redact = redact
        self._log = logger
        self.start_timeout = (spec.start_timeout if spec else None) or start_timeout
        self._call_timeout = (spec.timeout if spec else None) or call_timeout
        self.max_result_bytes = max_result_bytes
        self._on_ready = on_ready
        self._session: ClientSession | None = None
        self._gone = asyncio.Event()
        """The server the session speaks to went away (its pipe closed, it stopped answering)."""
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._crashes = 0
        self._failed_starts = 0
        self._retry_at = 0.0

    @property
    def prefix(self) -> str:
        """What the names of its tools begin with."""
        return f"{self.name}{SEPARATOR}"

    @property
    def at_startup(self) -> bool:
        """Started with the Jupyter server rather than on first use."""
        spec = self.entry.spec
        return spec is not None and spec.startup and not self.entry.disabled

    def claims(self, name: str) -> bool:
        """Whether ``name`` may be one of its tools (it is configured and enabled)."""
        return name.startswith(self.prefix) and self.state not in ("invalid", "disabled")

    def ensure_started(self) -> asyncio.Task[None] | None:
        """The start under way, or one begun now; ``None`` when there is none to wait for.

        Nothing starts for a running, invalid or disabled server, nor for one whose last start
        failed less than its pause ago.
        """
        if self._starting is not None and not self._starting.done():
            return self._starting
        if self.state not in ("idle", "exited", "failed", "stopped"):
            return None
        if self.state == "failed" and time.monotonic() < self._retry_at:
            return None
        self.attempts += 1
        self.restarting = self.state == "exited"
        self._starting = asyncio.create_task(self._start(), name=f"mcp-start-{self.name}")
        return self._starting

    @property
    def pause(self) -> float:
        """Seconds the next start waits: none after one crash, then 1, 2, 4 … 30 s."""
        return 0.0 if self._crashes <= 1 else min(30.0, 2.0 ** (self._crashes - 2))

    async def _start(self) -> None:
        if self.state == "exited" and self.pause:
            await asyncio.sleep(self.pause)
        await self.start()
        if self.state == "ready":
            self._failed_starts = 0
            self._on_ready(self)
        elif self.state == "failed" and self.restarting and self.over_http:
            # Someone else's server, down for a while: tried again on the crash pauses.
            self.state = "exited"
            self._crashes += 1
        elif self.state == "failed":
            self._failed_starts += 1
            wait = min(300.0, 5.0 * 2.0 ** (self._failed_starts - 1))
            self._retry_at = time.monotonic() + wait

    async def start(self) -> None:
        """Start the server and list its tools; on failure the error is kept, never raised."""
        if self.entry.spec is None or self.entry.disabled:
            return
        await self._last_session_ended()
        self.state, self.error = "starting", None
        self._ready, self._stop = asyncio.Event(), asyncio.Event()
        self._task = asyncio.create_task(self._hold(), name=f"mcp-{self.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), self.start_timeout)
        except TimeoutError:
            self._fail(f"did not start within {self.start_timeout:g} s")
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def _last_session_ended(self) -> None:
        """Wait for a session noticed gone to finish ending (its end would mark the new one's)."""
        last = self._task
        if last is not None and not last.done():
            self._stop.set()
            if not (await asyncio.wait({last}, timeout=10))[0]:
                last.cancel()
                with contextlib.suppress(BaseException):
                    await last

    @property
    def over_http(self) -> bool:
        """A streamable-HTTP server (neta connects to it; it is not neta's process)."""
        return isinstance(self.entry.spec, HttpServer)

    async def _hold(self) -> None:
        self._gone = gone = asyncio.Event()
        try:
            await _sdk()
            from mcp import ClientSession

            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._connect(stack, gone)
                read = await _watched(stack, read, gone)
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.tools = await _list_tools(session)
                self._session, self.state = session, "ready"
                self._ready.set()
                await _first(self._stop, gone)
                if gone.is_set() and not self._stop.is_set():
                    self._mark_exited()  # between calls: the next one starts it again
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # any failure is the server's state, not ours
            if self.state == "starting":
                self._fail(f"could not start: {_describe(exc)}")
            else:  # the session broke under it (an HTTP server's connection failed)
                self._mark_exited(_describe(exc))
        finally:
            self._session = None
            if self.state == "ready":
                self.state = "stopped"
            self._ready.set()

    async def _connect(
        self, stack: contextlib.AsyncExitStack, gone: asyncio.Event
    ) -> tuple[Any, Any]:
        """The transport's streams, open until ``stack`` closes; ``gone`` set if it is lost."""
        from mcp import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        from .http import watched_client
        from .relay import relayed

        spec = self.entry.spec
        if isinstance(spec, HttpServer):
            client = watched_client(spec.url, dict(spec.headers), gone, self.max_result_bytes)
            await stack.enter_async_context(client)
            # The client caps each message itself, with the error the relay gives a stdio server.
            streams: tuple[Any, Any] = await stack.enter_async_context(
                streamable_http_client(spec.url, http_client=client, max_sse_event_size=None)
            )
            return streams
        assert spec is not None
        params = relayed(spec, self.max_result_bytes)
        errlog = stack.enter_context(StderrLog(self.name, self._log, self._redact))
        streams = await stack.enter_async_context(stdio_client(params, errlog=errlog.file))
        errlog.started()
        return streams

    def _fail(self, message: str) -> None:
        self.state = "failed"
        self.error = self._redact(message)
        self._log.warning("neta: MCP server %s: %s", self.name, self.error)

    async def close(self) -> None:
        """End the session and the server (and a start under way)."""
        if self._starting is not None and self._starting is not asyncio.current_task():
            self._starting.cancel()
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            if self._session is None:
                task.cancel()  # still connecting: there is no session to end politely
            try:
                await asyncio.wait_for(asyncio.shield(task), 10)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # this close itself was cancelled
            except (TimeoutError, Exception):  # closing must not fail the shutdown
                task.cancel()
        if self.state in ("ready", "starting"):
            self.state = "stopped"

    async def call(self, remote: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Call a tool of this server; failures of any kind are a :class:`ToolError`.

        The server's progress notifications become the call's process events and card title;
        a cancelled call (the run was stopped) is cancelled on the server too, by the SDK.
        """
        if self.state != "ready" and (starting := self.ensure_started()) is not None:
            await watch_start(self, starting, ctx.process, target="tool", title=ctx.report)
        session, gone = self._session, self._gone
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
        except (ToolError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise await self._failure(exc, remote, gone) from exc
        self._crashes = 0
        from .results import tool_result

        return tool_result(remote, result)

    async def _failure(self, exc: Exception, remote: str, gone: asyncio.Event) -> ToolError:
        """What a failed call tells the model; a server lost meanwhile is marked exited."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        code = exc.code if isinstance(exc, MCPError) else None
        if code == CONNECTION_CLOSED or gone.is_set():
            await self._exited()
            again = "connected to" if self.over_http else "started"
            return ToolError(
                f"MCP server {self.name} {self.lost} during the call; it is {again} again for "
                "the next one"
            )
        if code == REQUEST_TIMEOUT:
            return ToolError(
                f"MCP server {self.name}: {remote} gave no answer within "
                f"{self._call_timeout:g} s, so the call was cancelled"
            )
        return ToolError(f"MCP server {self.name}: {_describe(exc)}")

    @property
    def lost(self) -> str:
        """How the server is said to have ended: a process exits, an HTTP server goes away."""
        return "went away" if self.over_http else "exited"

    async def _exited(self) -> None:
        """The server is gone: end what is left of its session; the next call starts it again."""
        self._mark_exited()
        await self.close()

    def _mark_exited(self, why: str | None = None) -> None:
        if self.state != "ready":
            return  # already known
        again = "connected to" if self.over_http else "started"
        self.state, self.error = "exited", f"{self.lost}; {again} again when next needed"
        self._crashes += 1
        cause = f" ({self._redact(why)})" if why else ""
        self._log.warning("neta: MCP server %s %s%s", self.name, self.lost, cause)

    def neta_tools(self) -> list[McpTool]:
        """The server's tools as neta tools."""
        return [self._tool(t) for t in self.tools]

    def _tool(self, remote: types.Tool) -> McpTool:
        async def run(ctx: ToolContext, **arguments: Any) -> ToolResult:
            return await self.call(remote.name, arguments, ctx)

        return mcp_tool(self.name, remote, run)

    def as_json(self) -> dict[str, Any]:
        """The server, its state and its tools (no command line or headers: they hold secrets)."""
        spec = self.entry.spec
        out: dict[str, Any] = {
            "name": self.name,
            "transport": _transport_name(spec),
            "state": self.state,
            "startup": self.at_startup,
            "tools": [
                {
                    "name": t.name,
                    "tool": t.mcp_tool,
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


async def _watched(
    stack: contextlib.AsyncExitStack, read: MemoryObjectReceiveStream[Any], gone: asyncio.Event
) -> MemoryObjectReceiveStream[Any]:
    """``read`` passed on as it is, with ``gone`` set when it ends (the server went away)."""
    send, received = anyio.create_memory_object_stream[Any](0)

    async def pump() -> None:
        try:
            async with read, send:
                async for item in read:
                    await send.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # our side closed first: the session is ending
        gone.set()

    group = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(group.cancel_scope.cancel)  # left before the group waits for the pump
    group.start_soon(pump)
    return received


async def _sdk() -> None:
    """Have the MCP SDK, and ``jsonschema`` it uses at the first call, imported off the loop.

    The SDK is imported only when a server is first needed (a Jupyter server with none
    configured starts faster without it), and in a thread: the import takes a second or more,
    and ``jsonschema``'s compiles grammars for seconds, which would freeze the loop (the
    terminal's display, every other run) in the middle of a run.
    """
    for name in SDK:
        if name not in sys.modules:
            with contextlib.suppress(ImportError):
                await asyncio.to_thread(importlib.import_module, name)


async def _first(*events: asyncio.Event) -> None:
    """Until one of ``events`` is set."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    from mcp.types import PaginatedRequestParams

    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def _transport_name(spec: ServerSpec | None) -> str | None:
    return None if spec is None else "http" if isinstance(spec, HttpServer) else "stdio"


def _describe(exc: BaseException) -> str:
    """The innermost failures of an exception (task groups wrap them in groups)."""
    from mcp import MCPError

    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.message
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, OSError | ToolError) else f"{type(exc).__name__}: {text}"
