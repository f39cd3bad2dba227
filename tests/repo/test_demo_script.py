"""``scripts/demo.sh`` leaves the repository clean: JupyterLab works on a copy of the notebooks.

A checkout of the repository (its tracked files as they are now, committed in a fresh git
repository) runs the demo script; a Run All on the quickstart in headless Chromium writes outputs,
files and collaboration state; after the server stops, ``git status`` shows nothing.

Locally this skips when Chromium is missing; under ``CI=true`` it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.b6_lab import free_port
from tests.browser_lab import shot

pytestmark = pytest.mark.browser

REPO = Path(__file__).parents[2]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def checkout(into: Path) -> Path:
    """The repository's tracked files, as they are, committed in a repository of their own; its
    ``.venv`` is the virtualenv running the tests (set up already)."""
    into.mkdir()
    for name in git(REPO, "ls-files", "-z").split("\0"):
        source = REPO / name
        if name and source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    git(into, "init", "-q")
    git(into, "add", "-A")
    git(into, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "checkout")
    (into / ".venv").symlink_to(sys.prefix)
    return into


class Demo:
    """``scripts/demo.sh --no-setup`` in ``root``, on a port and token of its own."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root, self.port, self.token = root, free_port(), "demo-" + os.urandom(6).hex()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NETA_", "JPY_"))}
        env.update(
            NETA_APPROVE="auto",
            JUPYTER_DATA_DIR=str(home / "data"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        )
        self.log = (home / "demo.log").open("wb")
        self.proc = subprocess.Popen(
            [
                "bash",
                "scripts/demo.sh",
                "--no-setup",
                f"--port={self.port}",
                "--port-retries=0",
                f"--IdentityProvider.token={self.token}",
                "--ServerApp.open_browser=False",
                "--ip=127.0.0.1",
                "--NetaApp.demo_pace=0.02",
            ],
            cwd=root,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}/"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 180  # importing JupyterLab on a loaded machine is slow
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "the demo script ended early"
            try:
                if httpx.get(self.url + "api/status", params={"token": self.token}).is_success:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise AssertionError("the demo's JupyterLab did not answer")

    def runs(self) -> list[dict[str, Any]]:
        answer = httpx.get(self.url + "neta/api/agent/runs", params={"token": self.token})
        return list(answer.json()["runs"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the script exec'd JupyterLab: its group
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    running = Demo(checkout(tmp_path / "checkout"), tmp_path)
    yield running
    running.stop()


def test_the_demo_leaves_the_repository_clean(demo: Demo, browser: Any) -> None:
    demo.wait_ready()
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page.goto(f"{demo.url}lab/tree/quickstart.ipynb?reset&token={demo.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=90_000)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    deadline = time.monotonic() + 300
    while not (len(runs := demo.runs()) == 4 and all(r["status"] == "completed" for r in runs)):
        assert time.monotonic() < deadline, [(r["prompt"], r["status"]) for r in runs]
        time.sleep(0.5)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=90_000)
    page.keyboard.press("Control+s")
    copy = demo.root / "demo-notebooks"
    deadline = time.monotonic() + 60
    while not any(
        c.get("outputs") for c in json.loads((copy / "quickstart.ipynb").read_text())["cells"]
    ):
        assert time.monotonic() < deadline, "the working copy was never saved with its outputs"
        time.sleep(0.5)
    shot(page, "demo-run-all")
    page.close()
    demo.stop()

    assert (copy / "notes.txt").is_file(), "the notebook wrote its file in the working copy"
    assert git(demo.root, "status", "--porcelain", "--untracked-files=all") == ""
