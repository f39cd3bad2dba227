"""Running ``neta-jupyter`` as a user does: a real process, its output read as it comes."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

TERMINAL = {"MESSAGE_COMPLETED", "MESSAGE_SUSPENDED", "MESSAGE_FAILED"}
READ_THEN_DONE = {
    "turns": [
        {"toolCalls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "done"},
    ]
}
SLOW = {"turns": [{"repeat": ["tok ", 3000], "delay": 0.01}]}


EMPTY_CONFIG_DIR = Path(tempfile.mkdtemp(prefix="neta-cli-config-"))
"""The Jupyter config folder of every CLI run: the user's own config must not steer the tests."""


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_TOKEN", "NO_COLOR")}
    env["PYTHONUNBUFFERED"] = "1"
    env["JUPYTER_CONFIG_DIR"] = str(EMPTY_CONFIG_DIR)
    return env


def cli(
    *args: str, stdin: str = "", env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neta_jupyter.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**cli_env(), **(env or {})},
    )


class LiveCli:
    """The CLI in the background, its output collected as it arrives (to act mid-run)."""

    def __init__(self, *args: str, stdin: int | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "neta_jupyter.cli", *args],
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=cli_env(),
        )
        self.chunks: list[bytes] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read1(65536):
            self.chunks.append(chunk)

    @property
    def output(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            assert time.monotonic() < deadline, f"{text!r} never appeared in:\n{self.output}"
            assert self.proc.poll() is None, f"exited {self.proc.returncode}:\n{self.output}"
            time.sleep(0.02)

    def finish(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout)
        self.reader.join(5)
        return code


def on_a_terminal(*args: str, answer: bytes) -> tuple[int, str]:
    """Run with stdin on a pseudo-terminal (so the CLI may ask) and type ``answer`` once asked."""
    master, slave = pty.openpty()
    try:
        live = LiveCli(*args, stdin=slave)
        os.close(slave)
        live.wait_for("[y]es / [a]lways / [n]o:")
        os.write(master, answer)
        return live.finish(), live.output
    finally:
        os.close(master)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("alpha contents\n")
    (root / "sales.csv").write_text("region,amount\nnorth,10\n")
    return tmp_path


def embedded(workdir: Path, *args: str) -> list[str]:
    return [
        *args,
        "--pace",
        "0",
        "--root",
        str(workdir / "root"),
        "--data-dir",
        str(workdir / "data"),
    ]


def script(workdir: Path, turns: dict[str, object]) -> str:
    path = workdir / "script.json"
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"
