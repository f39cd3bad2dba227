"""A real ``jupyter server`` in a subprocess, for tests that kill or restart it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """Start, kill -9, shut down gracefully and restart a server on the same data."""

    def __init__(
        self,
        workdir: Path,
        neta_config: dict[str, Any] | None = None,
        *,
        app: str = "jupyter_server",
    ) -> None:
        self.app = app
        """``jupyter_server``, or ``jupyterlab`` for the full JupyterLab page."""
        self.workdir = workdir
        self.root = workdir / "root"
        self.root.mkdir(parents=True, exist_ok=True)
        self.token = "test-token-" + os.urandom(6).hex()
        self.port = free_port()
        self.config_file = workdir / "jupyter_server_config.json"
        config = {
            "NetaApp": {
                "data_dir": str(workdir / "neta-data"),
                "demo_pace": 0.0,
                **(neta_config or {}),
            }
        }
        self.config_file.write_text(json.dumps(config))
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def start(self, timeout: float = 60.0) -> None:
        self.starts += 1
        log = (self.workdir / f"server-{self.starts}.log").open("wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NETA_", "JPY_"))}
        env["JUPYTER_RUNTIME_DIR"] = str(self.workdir / "runtime")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                self.app,
                f"--port={self.port}",
                "--port-retries=0",
                f"--IdentityProvider.token={self.token}",
                "--ServerApp.open_browser=False",
                f"--ServerApp.root_dir={self.root}",
                f"--config={self.config_file}",
                "--ip=127.0.0.1",
                "--allow-root",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.workdir,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_text()}")
            try:
                if (
                    httpx.get(self.url + "api/status", headers=self.headers, timeout=2).status_code
                    == 200
                ):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server did not start:\n{self.log_text()}")

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def shutdown(self) -> None:
        assert self.proc is not None
        httpx.post(self.url + "api/shutdown", headers=self.headers, timeout=10)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log_text(self) -> str:
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.workdir.glob("server-*.log"))
        )
