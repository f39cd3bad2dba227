"""How a server's start shows in a run's timeline (and on the card of a call waiting for it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sized
from typing import Any, Protocol

from ..tools.registry import ProcessSink, ProcessSource, ProcessStatus, ProcessTarget


class Starting(Protocol):
    """What the timeline reads of a server being started (an :class:`.servers.McpServer`)."""

    @property
    def name(self) -> str:
        """Its configured name."""
        ...

    @property
    def attempts(self) -> int:
        """Starts begun so far."""
        ...

    @property
    def restarting(self) -> bool:
        """The start follows an exit."""
        ...

    @property
    def pause(self) -> float:
        """Seconds the start waits first."""
        ...

    @property
    def over_http(self) -> bool:
        """A streamable-HTTP server (neta does not start its process)."""
        ...

    @property
    def lost(self) -> str:
        """How it is said to have ended."""
        ...

    @property
    def start_timeout(self) -> float:
        """Seconds a start may take."""
        ...

    @property
    def state(self) -> str:
        """Where it is (ready once started)."""
        ...

    @property
    def error(self) -> str | None:
        """Why it failed."""
        ...

    @property
    def tools(self) -> Sized:
        """Its tools, once ready."""
        ...


async def watch_start(
    server: Starting,
    starting: asyncio.Task[None],
    progress: ProcessSink,
    *,
    target: ProcessTarget = "runtime",
    title: Callable[[str], None] | None = None,
) -> None:
    """Wait for ``starting``, reporting it each second as an operation of ``progress``.

    ``title``: where a tool call waiting for the start shows it (its card's title). A run stopped
    meanwhile leaves the start going: the next run that needs the server has it.
    """
    loop = asyncio.get_running_loop()
    began = loop.time()
    source: ProcessSource = "runtime" if target == "runtime" else "tool"
    operation = f"op_mcp_{server.name}_{server.attempts}"

    def say(status: ProcessStatus, message: str, **more: Any) -> None:
        progress.report(
            status=status,
            stage=server.name,
            message=message,
            operation_id=operation,
            target_type=target,
            source=source,
            **more,
        )
        if title is not None and status in ("started", "running"):
            title(message)

    what = f"MCP server {server.name}"
    if server.restarting:
        pause = f" in {server.pause:g} s" if server.pause else ""
        again = "connecting again" if server.over_http else "starting it again"
        say("started", f"{what} {server.lost}; {again}{pause}")
    else:
        say("started", f"starting {what}")
    while not (await asyncio.wait({starting}, timeout=1.0))[0]:
        waited = round(loop.time() - began)
        limit = server.start_timeout
        say("running", f"starting {what} ({waited} s)", current=waited, total=limit)
    if server.state == "ready":
        say("completed", f"{what} is ready ({len(server.tools)} tools)")
    else:
        say("failed", f"{what}: {server.error or server.state}", level="error")
