"""A real ``jupyter server`` started from the virtualenv the wheel was installed into.

Everything runs as a user's fresh install does: the package is the installed wheel (never the
checkout), Jupyter's config, data and runtime folders are empty temporary ones, and the
extension is enabled only by the config file the wheel installed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from jupyter_client.blocking import BlockingKernelClient

import neta_jupyter

BIN = Path(sys.executable).parent
TERMINAL = {"MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED"}


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to run against anything but an installed package."""
    where = Path(neta_jupyter.__file__).resolve()
    if "site-packages" not in where.parts:
        raise pytest.UsageError(f"neta_jupyter comes from {where}, not from an installed wheel")


def clean_env(home: Path) -> dict[str, str]:
    """The environment of a user with nothing configured: Jupyter's folders empty, under home."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NETA_", "JPY_", "JUPYTER_")) and k not in ("PYTHONPATH", "IPYTHONDIR")
    }
    for name, folder in (
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("IPYTHONDIR", "ipython"),
    ):
        env[name] = str(home / folder)
        (home / folder).mkdir(parents=True, exist_ok=True)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """``jupyter server`` of the installed package, on its own port, root and folders."""

    def __init__(self, home: Path, neta: dict[str, Any] | None = None) -> None:
        self.home = home
        self.root = home / "root"
        self.root.mkdir(parents=True, exist_ok=True)
        self.env = clean_env(home)
        self.token = os.urandom(12).hex()
        self.port = free_port()
        settings = {"data_dir": str(home / "neta-data"), "demo_pace": 0.0, **(neta or {})}
        config = {"NetaApp": settings}
        (home / "config.json").write_text(json.dumps(config))
        self.log = home / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    str(BIN / "jupyter"),
                    "server",
                    f"--port={self.port}",
                    "--port-retries=0",
                    "--ip=127.0.0.1",
                    "--allow-root",
                    "--ServerApp.open_browser=False",
                    f"--IdentityProvider.token={self.token}",
                    f"--ServerApp.root_dir={self.root}",
                    f"--config={self.home / 'config.json'}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.home,
            )
        deadline = time.monotonic() + 180  # only a hang: imports are slow on a loaded machine
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited:\n{self.log.read_text()}")
            try:
                if self.client().get("api/status").status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError(f"the server did not answer:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"token {self.token}"},
            timeout=60,
            trust_env=False,
        )

    def start_run(self, **fields: Any) -> str:
        with self.client() as http:
            answer = http.post("neta/api/agent/run/async", json=fields)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["requestId"])

    def follow(self, request_id: str, after: int | None = None) -> list[dict[str, Any]]:
        """The run's events over SSE after seq ``after``, up to its next terminal event."""
        events: list[dict[str, Any]] = []
        params: dict[str, Any] = {"requestId": request_id}
        if after is not None:
            params["lastEventId"] = after
        with (
            self.client() as http,
            connect_sse(http, "GET", "neta/api/agent/run/stream", params=params) as source,
        ):
            for sse in source.iter_sse():
                if sse.event == "HEARTBEAT":
                    continue
                events.append(json.loads(sse.data))
                if sse.event in TERMINAL:
                    break
        return events


EXTRAS = set(filter(None, os.environ.get("SMOKE_EXTRAS", "").split(",")))
"""The extras installed with the wheel (scripts/smoke.sh says which)."""


@pytest.fixture(scope="session")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """With the redis extra, a real redis-server the servers keep their runs in; else SQLite."""
    if "redis" not in EXTRAS:
        yield ""
        return
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI") == "true":
            raise RuntimeError("CI=true but redis-server is missing")
        pytest.skip("redis-server is not installed")
    where = tmp_path_factory.mktemp("redis")
    socket_path = where / "redis.sock"
    redis = subprocess.Popen(
        [binary, "--port", "0", "--unixsocket", str(socket_path), "--dir", str(where),
         "--save", "", "--appendonly", "yes", "--maxmemory-policy", "noeviction"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not socket_path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"unix://{socket_path}"
    redis.terminate()
    redis.wait(30)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[Server]:
    """One server for the session, keeping its runs where the extras under test allow."""
    running = Server(tmp_path_factory.mktemp("server"), {"store_url": store_url})
    running.start()
    yield running
    running.stop()


class Kernel:
    """A kernel the server started, spoken to through its connection file like a front end."""

    def __init__(self, server: Server) -> None:
        with server.client() as http:
            self.id = http.post("api/kernels", json={"name": "python3"}).json()["id"]
        self.client = BlockingKernelClient()
        self.client.load_connection_file(
            Path(server.env["JUPYTER_RUNTIME_DIR"]) / f"kernel-{self.id}.json"
        )
        # No heartbeat: a client that is not the kernel's manager would take a heartbeat not yet
        # answered for a dead kernel.
        self.client.start_channels(hb=False)
        self.client.wait_for_ready(timeout=120)

    def run(self, code: str) -> list[dict[str, Any]]:
        """Execute ``code`` as a cell; the iopub messages it caused (an error fails the test)."""
        messages: list[dict[str, Any]] = []
        reply = self.client.execute_interactive(code, timeout=180, output_hook=messages.append)
        errors = [m["content"] for m in messages if m["msg_type"] == "error"]
        assert reply["content"]["status"] == "ok", errors or reply["content"]
        return messages

    def printed(self, code: str) -> str:
        """What the cell printed."""
        return "".join(m["content"]["text"] for m in self.run(code) if m["msg_type"] == "stream")

    def close(self) -> None:
        self.client.stop_channels()
