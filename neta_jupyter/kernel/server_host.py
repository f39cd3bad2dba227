"""Runs on the Jupyter server: created over REST with this kernel's id, followed over SSE.

Actions and follows are async (on the kernel's loop, so a cell is never blocked); the small
queries behind ``%neta status`` and friends are answered synchronously, which is what a magic
printing a table needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..client import HttpTransport, RunClient, RunRequest, Started
from .discovery import ServerInfo
from .host import Host, Mode


class ServerHost(Host):
    """:class:`~neta_jupyter.kernel.host.Host` over the extension's run API."""

    mode: Mode = "server"

    def __init__(self, server: ServerInfo, kernel_id: str | None) -> None:
        # The server is local to the kernel: proxies from the environment would only get between.
        transport = HttpTransport(server.url, headers=server.headers, trust_env=False)
        super().__init__(RunClient(transport))
        self.server = server
        self.kernel_id = kernel_id

    def _in_this_kernel(self, request: RunRequest) -> RunRequest:
        """The run's kernel tools run here."""
        return request.model_copy(update={"kernel_id": self.kernel_id})

    async def start(self, request: RunRequest, files: Sequence[Path] = ()) -> Started:
        """``POST agent/run/async`` with this kernel's id (``files`` uploaded first)."""
        return await super().start(self._in_this_kernel(request), files)

    def start_now(self, request: RunRequest, files: Sequence[Path] = ()) -> Started:
        """The same, synchronously: the run exists before the cell that asked for it returns."""
        return self.client.start_blocking(self._in_this_kernel(request), files)

    def undo(self, notebook_path: str) -> dict[str, Any]:
        """``POST notebook/revert`` with the notebook: its latest run's last edit is reverted."""
        return self.client.revert_edit(notebook_path=notebook_path)

    def describe(self) -> dict[str, Any]:
        """Where runs go."""
        return {
            "mode": "server",
            "server": self.server.url,
            "found via": self.server.source,
            "kernel id": self.kernel_id or "(unknown: kernel tools are unavailable)",
        }
