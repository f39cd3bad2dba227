"""A real ``jupyter server`` in a subprocess, for tests that kill or restart it."""

from __future__ import annotations

import os
import signal

import httpx

from benchmarks.b6_lab import JupyterProcess

__all__ = ["ServerProcess"]


class ServerProcess(JupyterProcess):
    """Start, kill -9, shut down gracefully and restart a server on the same data."""

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def shutdown(self) -> None:
        assert self.proc is not None
        httpx.post(self.url + "api/shutdown", headers=self.headers, timeout=10)
        self.proc.wait(30)
