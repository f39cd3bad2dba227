"""A real ``jupyter server`` in a subprocess, for tests that kill or restart it."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import httpx
from httpx_sse import connect_sse

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

    def client(self) -> httpx.Client:
        """An authenticated HTTP client of the server."""
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=30, trust_env=False)

    def read(
        self,
        rid: str,
        after: int | None = None,
        limit: int | None = None,
        until_type: str | None = None,
    ) -> list[dict[str, Any]]:
        """One segment of the run's stream (up to its next terminal event, ``limit`` events, or
        the first event of type ``until_type``)."""
        params: dict[str, Any] = {"requestId": rid}
        if after is not None:
            params["lastEventId"] = after
        out: list[dict[str, Any]] = []
        with (
            self.client() as http,
            connect_sse(http, "GET", "neta/api/agent/run/stream", params=params) as src,
        ):
            for sse in src.iter_sse():
                if sse.event != "HEARTBEAT":
                    out.append(json.loads(sse.data))
                if limit is not None and len(out) >= limit:
                    break
                if until_type is not None and sse.event == until_type:
                    break
        return out
