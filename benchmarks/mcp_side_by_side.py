"""neta's MCP server beside Datalayer's ``jupyter-mcp-server``, on one scenario with a real user.

For each server, on a JupyterLab with real-time collaboration and the notebook open in headless
Chromium:

1. **race**: two MCP clients append ``--cells`` cells each at once while the user types into a
   cell of the notebook, key by key; then what the page's notebook holds is counted: each client's
   cells lost, duplicated or garbled, and whether the user's typing is all there.
2. **stale edit**: a client reads a cell, the user then changes it, and the client rewrites the
   cell from what it read; did the user's change survive?

It reports both, and the time each tool call took (median and max, ms). Datalayer's server runs
from a virtualenv of its own (``pip install jupyter-mcp-server`` there: its dependencies differ
from neta's), named by ``--datalayer``; without it only neta's side runs.

    python -m benchmarks.mcp_side_by_side --datalayer /tmp/dlvenv/bin/jupyter-mcp-server
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .b6_lab import JupyterProcess, chromium, chromium_path, free_port, open_notebook
from .mcp_sides import DatalayerSide, NetaSide, Side

NOTEBOOK = "race.ipynb"
USER_CELL, STALE_CELL = "user", "stale"
DIALOGS = """
window.__dialogs = [];
new MutationObserver(() => {
  for (const d of document.querySelectorAll('.jp-Dialog')) window.__dialogs.push(d.innerText);
}).observe(document.documentElement, { childList: true, subtree: true });
"""
MODEL = "window.jupyterapp.shell.currentWidget.content.model.toJSON()"


@dataclass
class Outcome:
    """What one server did with the scenario."""

    server: str
    lost: int = 0
    duplicated: int = 0
    garbled: int = 0
    user_typing_kept: bool = False
    stale_edit: str = ""
    dialogs: int = 0
    call_ms: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        ms = self.call_ms or [0.0]
        return {
            "server": self.server,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "garbled": self.garbled,
            "user typing kept": self.user_typing_kept,
            "stale edit": self.stale_edit,
            "dialogs": self.dialogs,
            "calls": len(self.call_ms),
            "median ms": round(statistics.median(ms), 1),
            "max ms": round(max(ms), 1),
        }


def cell_source(client: str, index: int) -> str:
    return f"# from {client} {index}\nvalue_{client}_{index} = {index}"


def write_notebook(root: Path) -> None:
    cells = [(USER_CELL, "note = 'typed: '"), (STALE_CELL, "v = 1")]
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "cells": [
            {
                "id": i,
                "cell_type": "code",
                "metadata": {},
                "source": s,
                "outputs": [],
                "execution_count": None,
            }
            for i, s in cells
        ],
    }
    (root / NOTEBOOK).write_text(json.dumps(notebook))


class Agents:
    """The clients' side of the scenario, on a thread and an event loop of their own."""

    def __init__(self, side: Side, cells: int) -> None:
        self.side = side
        self.cells = cells
        self.read_done = threading.Event()
        self.user_changed = threading.Event()
        self.race_done = threading.Event()
        self.stale_answer = ""
        self.error: BaseException | None = None

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._main, daemon=True)
        thread.start()
        return thread

    def _main(self) -> None:
        try:
            asyncio.run(self._scenario())
        except BaseException as exc:  # reported by the main thread
            self.error = exc
            self.race_done.set()
            self.read_done.set()

    async def _scenario(self) -> None:
        async with self.side.client("a") as a, self.side.client("b") as b:
            await asyncio.gather(self._append(a, "a"), self._append(b, "b"))
            self.race_done.set()
            await self.side.read(a, STALE_CELL)
            self.read_done.set()
            await asyncio.get_running_loop().run_in_executor(None, self.user_changed.wait, 120)
            self.stale_answer = await self.side.overwrite(a, STALE_CELL, "v = 2")

    async def _append(self, session: Any, client: str) -> None:
        for index in range(self.cells):
            await self.side.append(session, cell_source(client, index))


def type_until(page: Any, done: Callable[[], bool]) -> str:
    """Type into the user's cell key by key until ``done``; what was typed."""
    page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".cm-content").click()
    page.keyboard.press("End")
    typed = ""
    while not done():
        word = f"w{len(typed)} "
        page.keyboard.type(word, delay=15)
        typed += word
    return typed


def count(outcome: Outcome, cells: list[dict[str, Any]], per_client: int, typed: str) -> None:
    """Each client's cells lost, duplicated or garbled; whether the user's typing is all there."""
    sources = [_source(c) for c in cells]
    intended = {cell_source(c, i) for c in "ab" for i in range(per_client)}
    for source in intended:
        found = sources.count(source)
        outcome.lost += found == 0
        outcome.duplicated += max(0, found - 1)
    outcome.garbled = sum(1 for s in sources if "# from" in s and s not in intended)
    outcome.user_typing_kept = any(typed.strip() in s for s in sources)


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def run_side(side: Side, lab: JupyterProcess, browser: Any, cells: int) -> Outcome:
    """The scenario against one server; what it did."""
    outcome = Outcome(side.name)
    page = open_notebook(browser, lab, NOTEBOOK, DIALOGS)
    agents = Agents(side, cells)
    worker = agents.start()
    typed = type_until(page, agents.race_done.is_set)
    agents.read_done.wait(120)
    stale = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".cm-content")
    stale.click()
    page.keyboard.press("End")
    page.keyboard.type(" + 99", delay=15)
    time.sleep(1.0)  # the change reaches the server's document
    agents.user_changed.set()
    worker.join(180)
    if agents.error is not None:
        raise agents.error
    time.sleep(1.0)
    shown = page.evaluate(MODEL)["cells"]
    outcome.call_ms = side.timings
    count(outcome, shown, cells, typed)
    now = next(_source(c) for c in shown if c.get("id") == STALE_CELL)
    outcome.stale_edit = (
        "refused, user's change kept" if "99" in now else "applied over the user's change"
    )
    outcome.dialogs = len(page.evaluate("window.__dialogs"))
    page.close()
    return outcome


def _server_options(lab: JupyterProcess) -> list[str]:
    """The Jupyter server, for its documents and its kernels alike."""
    url = lab.url.rstrip("/")
    options: list[str] = []
    for part in ("jupyter", "document", "code-sandbox"):
        options += [f"--{part}-url", url, f"--{part}-token", lab.token]
    return options


def datalayer_process(binary: str, lab: JupyterProcess, workdir: Path) -> tuple[Any, str, str]:
    """Datalayer's server on its own port, talking to ``lab``: the process, URL and token."""
    port, token = free_port(), "bench-mcp-token"
    log = (workdir / "datalayer.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            "start",
            "--transport",
            "streamable-http",
            "--port",
            str(port),
            *_server_options(lab),
            "--mcp-token",
            token,
            "--start-new-code-sandbox",
            "false",
            "--document-id",
            NOTEBOOK,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/healthz", timeout=2)
            return proc, url, token
        except httpx.HTTPError:
            time.sleep(0.5)
    raise RuntimeError((workdir / "datalayer.log").read_text(errors="replace"))


Maker = Callable[[JupyterProcess, Path], Side]


def _sides(datalayer: str | None, started: list[Any]) -> list[tuple[str, Maker]]:
    """The servers to run the scenario against (Datalayer's when its command is given)."""
    sides: list[tuple[str, Maker]] = [("neta", lambda lab, _w: NetaSide(lab.url, lab.headers))]
    if datalayer:
        binary = datalayer

        def make(lab: JupyterProcess, work: Path) -> Side:
            proc, url, token = datalayer_process(binary, lab, work)
            started.append(proc)
            return DatalayerSide(url, token, NOTEBOOK)

        sides.append(("datalayer", make))
    return sides


def _one(
    name: str, make: Maker, tmp: str, browser: Any, args: argparse.Namespace
) -> dict[str, Any]:
    """The scenario on a JupyterLab of its own; the row of what the server did."""
    work = Path(tmp) / name
    work.mkdir()
    lab = JupyterProcess(
        work,
        {"permission_rules": [{"tool": "*_cell", "action": "allow"}]},
        app="jupyterlab",
        args=["--LabApp.expose_app_in_browser=True"],
    )
    write_notebook(lab.root)
    lab.start()
    try:
        side = make(lab, work)
        row = run_side(side, lab, browser, args.cells).row()
        if args.answers:
            print("\n".join(side.answers))
            for log in work.glob("datalayer.log"):
                print(log.read_text(errors="replace")[-3000:])
        return row
    finally:
        lab.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_side_by_side")
    parser.add_argument("--datalayer", help="the jupyter-mcp-server command of its virtualenv")
    parser.add_argument("--cells", type=int, default=8, help="cells each client appends")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--answers", action="store_true", help="print what each call answered")
    args = parser.parse_args(argv)
    path = chromium_path()
    if path is None:
        parser.error("Chromium is needed (Debian's chromium package)")
    started: list[Any] = []
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp, chromium(path) as browser:
            for name, make in _sides(args.datalayer, started):
                rows.append(_one(name, make, tmp, browser, args))
                for proc in started:
                    proc.kill()
    finally:
        for proc in started:
            proc.kill()
    for row in rows:
        print(json.dumps(row))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
