"""The browser harness: a real Jupyter server (or JupyterLab) with the extension in a subprocess,
and headless Chromium driving a notebook page.

Benchmark B6 measures the widget with it and ``tests/browser/test_widget.py`` tests the widget
with it; it lives here because benchmarks never import from the tests.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import nbformat

REPO = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_PORT_TAKEN = "is already in use"
"""What ``jupyter server`` logs when its port is taken."""


class JupyterProcess:
    """A ``jupyter server`` (or ``jupyterlab``) with the extension, on its own port and data."""

    def __init__(
        self,
        workdir: Path,
        neta_config: dict[str, Any] | None = None,
        *,
        app: str = "jupyter_server",
        args: Sequence[str] = (),
    ) -> None:
        self.app = app
        """``jupyter_server``, or ``jupyterlab`` for the full JupyterLab page."""
        self.args = list(args)
        """More command-line options of the server."""
        self.env: dict[str, str] = {}
        """More environment of the server (what a spawner would give it)."""
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
                # Scripts beside the server's folder too: tests keep theirs in the folder that
                # holds the folders of their servers.
                "scripted_models_dir": str(workdir.parent),
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

    def start(self, timeout: float = 180.0) -> None:
        """Start the server and wait until it answers.

        The timeout only catches a hang: on a loaded machine, importing JupyterLab alone can take
        a minute.
        """
        self.starts += 1
        log = (self.workdir / f"server-{self.starts}.log").open("wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NETA_", "JPY_"))}
        env["JUPYTER_RUNTIME_DIR"] = str(self.workdir / "runtime")
        # JupyterLab restores the notebooks a workspace had open: each server keeps its own.
        env["JUPYTERLAB_WORKSPACES_DIR"] = str(self.workdir / "workspaces")
        env.update(self.env)
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
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.workdir,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                said = self.log_text()
                if self.starts == 1 and _PORT_TAKEN in said:
                    # Another process (often a connection's own ephemeral port) took the port
                    # chosen for this server before it bound it: a first start takes another.
                    self.port, self.starts = free_port(), 0
                    self.start(deadline - time.monotonic())
                    return
                raise RuntimeError(f"server exited early:\n{said}")
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

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def shutdown_kernels(self) -> None:
        """End every notebook session (and its kernel) the pages opened."""
        sessions = httpx.get(self.url + "api/sessions", headers=self.headers, timeout=10)
        for session in sessions.json():
            httpx.delete(
                self.url + f"api/sessions/{session['id']}", headers=self.headers, timeout=30
            )

    def log_text(self) -> str:
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.workdir.glob("server-*.log"))
        )


# --- the browser -------------------------------------------------------------------------------


def chromium_path() -> Path | None:
    """Debian's Chromium, which the browser tests and B6 drive; None when it is not installed."""
    found = shutil.which("chromium") or "/usr/bin/chromium"
    return Path(found) if Path(found).exists() else None


@contextmanager
def chromium(path: Path) -> Iterator[Any]:
    """Headless Chromium (a playwright ``Browser``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(path), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def write_notebook(path: Path, *cells: str) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.write_text(nbformat.writes(nb))


def open_notebook(browser: Any, lab: JupyterProcess, name: str, init_script: str = "") -> Any:
    """A new page with the notebook open and its kernel idle; ``init_script`` runs first."""
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    if init_script:
        page.add_init_script(init_script)
    page.goto(f"{lab.url}lab/tree/{name}?reset&token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=90_000)
    return page


def run_cells(page: Any, count: int) -> None:
    """Run the first ``count`` cells, from the top (Shift+Enter each)."""
    page.click(".jp-Cell >> nth=0")
    page.keyboard.press("Escape")
    for _ in range(count):
        page.keyboard.press("Shift+Enter")
