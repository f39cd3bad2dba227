"""Every configured MCP server, as one tool source of a runtime's registry.

A run about to start asks the source to prepare the tools it may use: the servers it needs that
are not running are started then, and the run's timeline shows each start as it goes. Servers
marked ``"startup": true`` start with the Jupyter server instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..events.redact import Redactor
from ..tools import ToolRegistry
from ..tools.registry import ProcessSink
from .config import Entries, configured
from .relay import DEFAULT_MAX_RESULT_BYTES
from .servers import McpServer
from .starts import watch_start


class McpServers:
    """Every configured server: started when first needed, closed with the runtime."""

    def __init__(
        self,
        entries: Entries,
        *,
        redact: Callable[[str], str],
        logger: logging.Logger,
        start_timeout: float = 30.0,
        call_timeout: float | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        problems: list[str] | None = None,
    ) -> None:
        self.servers = [
            McpServer(
                e,
                redact=redact,
                logger=logger,
                start_timeout=start_timeout,
                call_timeout=call_timeout,
                max_result_bytes=max_result_bytes,
                on_ready=self._register,
            )
            for e in entries.servers
        ]
        self.problems = [redact(p) for p in problems or []]
        """Configuration problems that belong to no one server (an unreadable file)."""
        self._registry: ToolRegistry | None = None
        for entry in entries.servers:
            if entry.error:
                logger.warning("neta: %s", redact(entry.error))

    def attach(self, registry: ToolRegistry) -> None:
        """Offer the servers' tools through ``registry`` (each once its server is up)."""
        self._registry = registry
        registry.add_source(self)

    def _register(self, server: McpServer) -> None:
        if self._registry is not None:
            for t in server.neta_tools():
                self._registry.register(t)

    def claims(self, name: str) -> bool:
        """Whether ``name`` may be a tool of a configured server."""
        return any(s.claims(name) for s in self.servers)

    async def prepare(self, names: list[str] | None, progress: ProcessSink) -> None:
        """Start the servers whose tools a run may use (``names``; ``None``: any), in parallel."""
        wanted = [
            s for s in self.servers if names is None or any(n.startswith(s.prefix) for n in names)
        ]
        starts = [(s, task) for s in wanted if (task := s.ensure_started()) is not None]
        await asyncio.gather(*(watch_start(s, task, progress) for s, task in starts))

    async def start_at_startup(self) -> None:
        """Start the servers marked ``"startup": true``."""
        starts = [t for s in self.servers if s.at_startup and (t := s.ensure_started())]
        await asyncio.gather(*starts, return_exceptions=True)

    async def aclose(self) -> None:
        """Close every session and stop every server."""
        await asyncio.gather(*(s.close() for s in self.servers))

    def as_json(self) -> dict[str, Any]:
        """What ``GET /neta/api/mcp`` answers."""
        return {"servers": [s.as_json() for s in self.servers], "problems": self.problems}


def build(
    traits: dict[str, Any],
    config_dir: Path,
    *,
    redactor: Redactor,
    logger: logging.Logger,
    start_timeout: float,
    call_timeout: float | None,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> McpServers:
    """The servers of ``mcp.json`` in ``config_dir`` and ``traits``, their secrets registered.

    ``redactor`` learns the secrets before anything starts, so no event, log line or error can
    show them.
    """
    entries, problems = configured(traits, config_dir)
    redactor.add(*entries.secrets)
    return McpServers(
        entries,
        redact=redactor,
        logger=logger,
        start_timeout=start_timeout,
        call_timeout=call_timeout,
        max_result_bytes=max_result_bytes,
        problems=problems,
    )


def servers_of(registry: ToolRegistry) -> McpServers | None:
    """The MCP servers whose tools ``registry`` offers, if any are attached."""
    return next((s for s in registry.sources if isinstance(s, McpServers)), None)
