"""A Jupyter server with the neta extension, for the one demo notebook that needs a server.

``notebooks/workspace.ipynb`` edits and runs cells through the server's notebook tools, so the
docs build runs it as JupyterLab would: in a kernel the server started for the notebook's
session, which gets the server's address and token from the server, as any kernel does. The
server runs in a subprocess on a scratch root folder, with the offline demo model; leaving
:func:`jupyter_server` always stops it (and the kernels it started).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import connect_sse
from jupyter_client.manager import KernelManager

STARTUP_SECONDS = 180.0
"""Only catches a hang: on a loaded machine importing JupyterLab alone can take a minute."""
TERMINAL = ("MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED")


@dataclass(frozen=True, slots=True)
class DocsServer:
    """A running server: where it serves, how to reach it, and the folders it works in."""

    url: str
    token: str
    root: Path
    runtime: Path

    def client(self) -> httpx.Client:
        """An authenticated HTTP client of the server."""
        headers = {"Authorization": f"token {self.token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, trust_env=False)

    def read(self, rid: str, after: int | None = None) -> list[dict[str, Any]]:
        """The run's events after ``after``, up to its next terminal event."""
        params: dict[str, Any] = {"requestId": rid}
        if after is not None:
            params["lastEventId"] = after
        out: list[dict[str, Any]] = []
        with (
            self.client() as http,
            connect_sse(http, "GET", "neta/api/agent/run/stream", params=params) as source,
        ):
            for sse in source.iter_sse():
                if sse.event == "HEARTBEAT":
                    continue
                out.append(json.loads(sse.data))
                if sse.event in TERMINAL:
                    break
        return out


class SessionKernel(KernelManager):  # type: ignore[misc]
    """The kernel the server started for a notebook's session.

    nbclient runs cells in it and leaves it to the server: it neither starts nor stops it.
    """

    @property
    def has_kernel(self) -> bool:
        """Always: the server owns the kernel process."""
        return True


def session_kernel(server: DocsServer, name: str) -> SessionKernel:
    """The kernel of a new session for notebook ``name``, as JupyterLab opens one."""
    session = {"path": name, "name": name, "type": "notebook", "kernel": {"name": "python3"}}
    with server.client() as http:
        response = http.post("api/sessions", json=session)
        response.raise_for_status()
        kernel_id = response.json()["kernel"]["id"]
    kernel = SessionKernel(
        connection_file=str(server.runtime / f"kernel-{kernel_id}.json"), owns_kernel=False
    )
    kernel.load_connection_file()
    return kernel


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _environment(runtime: Path) -> dict[str, str]:
    """The build's environment without what would point the server or its kernels elsewhere.

    That is the demo notebooks' embedded-runtime settings (``NETA_APPROVE=auto`` among them) and
    a parent server's variables.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETA_", "JPY_"))}
    env["JUPYTER_RUNTIME_DIR"] = str(runtime)
    env["MPLBACKEND"] = "agg"
    return env


def _answering(proc: subprocess.Popen[bytes], runtime: Path, log: Path) -> str:
    """The server's URL once it answers (read from the file it writes when it listens)."""
    deadline = time.monotonic() + STARTUP_SECONDS
    info = runtime / f"jpserver-{proc.pid}.json"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the docs' Jupyter server exited:\n{log.read_text()}")
        if info.exists():
            try:
                url = str(json.loads(info.read_text())["url"])
                if httpx.get(url + "api/status", timeout=2, trust_env=False).status_code < 500:
                    return url
            except (ValueError, KeyError, httpx.HTTPError):
                pass  # written but not yet complete, or not yet answering
        time.sleep(0.2)
    raise RuntimeError(f"the docs' Jupyter server did not start:\n{log.read_text()}")


def _stop(proc: subprocess.Popen[bytes], url: str | None, token: str) -> None:
    """Shut the server down (it stops its kernels); kill it if it does not go."""
    if proc.poll() is None and url is not None:
        try:
            headers = {"Authorization": f"token {token}"}
            httpx.post(url + "api/shutdown", headers=headers, timeout=10, trust_env=False)
            proc.wait(30)
        except (httpx.HTTPError, subprocess.TimeoutExpired):
            pass
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


@contextmanager
def jupyter_server(workdir: Path) -> Iterator[DocsServer]:
    """A server with the extension on ``workdir/root``, its data in ``workdir``.

    It is stopped when the block ends, however it ends.
    """
    root, runtime = workdir / "root", workdir / "runtime"
    root.mkdir(parents=True, exist_ok=True)
    token = os.urandom(16).hex()
    config = {
        "NetaApp": {"data_dir": str(workdir / "neta-data"), "demo_pace": 0.0},
        # The collaboration stack's file ids, kept with the rest of this server's data rather
        # than in the user's data folder.
        "BaseFileIdManager": {"root_dir": str(root), "db_path": str(workdir / "file-ids.db")},
    }
    (workdir / "config.json").write_text(json.dumps(config))
    log = workdir / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                f"--port={_free_port()}",
                f"--IdentityProvider.token={token}",
                "--ServerApp.open_browser=False",
                f"--ServerApp.root_dir={root}",
                f"--config={workdir / 'config.json'}",
                "--ip=127.0.0.1",
                "--allow-root",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_environment(runtime),
            cwd=workdir,
        )
    url: str | None = None
    try:
        url = _answering(proc, runtime, log)
        yield DocsServer(url=url, token=token, root=root, runtime=runtime)
    except Exception as exc:
        exc.add_note(f"The end of the docs' Jupyter server's log:\n{log.read_text()[-4000:]}")
        raise
    finally:
        _stop(proc, url, token)
