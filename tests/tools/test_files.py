"""File tools never block the server: special files are refused, links that lead nowhere listed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import ToolContext, files, list_files, read_file
from neta_jupyter.tools.values import ToolError
from tests.helpers import ApiClient

HANG = 5.0
"""Seconds after which a tool call counts as hanging (the fixed tools answer at once)."""


def ctx(root: Path) -> ToolContext:
    return ToolContext(root_dir=root, session_id="s", request_id="r", tool_call_id="c")


def call_in_thread(
    call: Callable[[], Coroutine[Any, Any, Any]], unblock: Callable[[], None]
) -> Any:
    """The tool call's result or error, run on a loop of its own in a thread.

    A call that blocks fails the test after :data:`HANG` seconds instead of hanging it
    (``unblock`` then frees the thread).
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = asyncio.run(call())
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    if thread.is_alive():
        unblock()
        thread.join(HANG)
        pytest.fail(f"the tool call blocked for more than {HANG} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def release_fifo(path: Path) -> Callable[[], None]:
    def unblock() -> None:
        with contextlib.suppress(OSError):  # the reader sees the end of the file
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    return unblock


@pytest.fixture
def root() -> Iterator[Path]:
    """A short root path (a Unix socket's path is limited to about 100 bytes)."""
    with tempfile.TemporaryDirectory(prefix="neta-files-") as folder:
        yield Path(folder)


def test_a_named_pipe_is_refused_at_once(root: Path) -> None:
    fifo = root / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ToolError, match="pipe is a named pipe, not a regular file"):
        call_in_thread(lambda: read_file.run('{"path": "pipe"}', ctx(root)), release_fifo(fifo))


@pytest.mark.parametrize("name", ["zero", "urandom", "null"])
def test_devices_are_refused(name: str) -> None:
    # /dev as the root: the devices are inside it, so only the kind of file can refuse them.
    with pytest.raises(ToolError, match=f"{name} is a device, not a regular file"):
        call_in_thread(lambda: read_file.run(f'{{"path": "{name}"}}', ctx(Path("/dev"))), _none)


def test_a_socket_is_refused(root: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(root / "sock"))
        server.listen()
        with pytest.raises(ToolError, match="sock is a socket, not a regular file"):
            call_in_thread(lambda: read_file.run('{"path": "sock"}', ctx(root)), _none)


def test_links_that_lead_nowhere_or_in_circles_are_listed_and_refused(root: Path) -> None:
    (root / "data.csv").write_text("x\n1\n")
    (root / "sub").mkdir()
    os.symlink("missing.txt", root / "dangling")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink("/etc/hostname", root / "elsewhere")
    os.mkfifo(root / "pipe")
    listing = call_in_thread(lambda: list_files.run("{}", ctx(root)), release_fifo(root / "pipe"))
    assert listing.output.splitlines() == [
        "Files in the notebook folder (7 entries; folders end with /):",
        "sub/",
        "dangling   (broken link)",
        "data.csv   4 bytes",
        "elsewhere  (link outside the notebook root)",
        "loop_a     (link loop)",
        "loop_b     (link loop)",
        "pipe       (named pipe, not readable)",
    ]
    with pytest.raises(ToolError, match="dangling is a broken symbolic link"):
        call_in_thread(lambda: read_file.run('{"path": "dangling"}', ctx(root)), _none)
    with pytest.raises(ToolError, match="loop_a is a symbolic link loop"):
        call_in_thread(lambda: read_file.run('{"path": "loop_a"}', ctx(root)), _none)
    with pytest.raises(ToolError, match="outside the notebook root"):
        call_in_thread(lambda: read_file.run('{"path": "elsewhere"}', ctx(root)), _none)


async def test_a_listing_lines_its_sizes_up_in_one_column(root: Path) -> None:
    (root / "a.txt").write_text("x" * 5)
    (root / "quarterly_revenue.csv").write_text("y" * 45_569)
    (root / "notes.md").write_text("z" * 321)
    listing = (await list_files.run("{}", ctx(root))).output
    assert listing.splitlines()[1:] == [
        "a.txt                       5 bytes",
        "notes.md                  321 bytes",
        "quarterly_revenue.csv  45,569 bytes",
    ]
    assert "\t" not in listing


async def test_a_huge_file_is_read_only_up_to_the_limit(root: Path) -> None:
    (root / "big.log").write_bytes(b"line of a big log\n" * 1_000_000)  # 18 MB
    text = (await read_file.run('{"path": "big.log", "max_bytes": 1000}', ctx(root))).output
    header, body = text.split("\n", 1)
    assert header.startswith("Only lines 1-55 of big.log, which has 932,068 lines or more")
    assert "(18,000,000 bytes) in all" in header
    assert len(body.encode()) <= 1000


async def test_a_read_the_file_system_never_answers_times_out(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "slow.txt").write_text("eventually")
    disk = SlowDisk()
    monkeypatch.setattr(files, "_read_regular", disk.read)
    monkeypatch.setattr(files, "FILE_TOOL_TIMEOUT", 0.2)
    try:
        with pytest.raises(ToolError, match=r"did not answer within 0\.2 s"):
            await read_file.run('{"path": "slow.txt"}', ctx(root))
        assert not disk.finished.is_set()
    finally:
        disk.released.set()


def _none() -> None:
    pass


class SlowDisk:
    """A stand-in for the file system's read that blocks until released (a hung mount)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.finished = threading.Event()
        self._read = files._read_regular

    def read(self, root: Path, path: str, limit: int) -> bytes:
        self.entered.set()
        self.released.wait(HANG)
        self.finished.set()
        return self._read(root, path, limit)


# --- in a real server ------------------------------------------------------------------------


async def _best_status_time(http: httpx.AsyncClient, tries: int = 5) -> float:
    best = float("inf")
    for _ in range(tries):
        began = time.perf_counter()
        response = await http.get("api/status")
        assert response.status_code == 200
        best = min(best, time.perf_counter() - began)
    return best


async def test_the_server_answers_while_a_file_tool_is_blocked(
    api: ApiClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    (runtime.config.root_dir / "notes.txt").write_text("on a slow disk")
    disk = SlowDisk()
    monkeypatch.setattr(files, "_read_regular", disk.read)
    runtime.models.register(
        "reader",
        ScriptedModel(
            [
                ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "notes.txt"})]),
                ScriptedTurn(text="read it"),
            ]
        ),
    )
    rid = (await api.start("read notes.txt", model="reader"))["requestId"]
    try:
        for _ in range(500):
            if disk.entered.is_set():
                break
            await asyncio.sleep(0.01)
        assert disk.entered.is_set(), "the tool started reading"
        best = await _best_status_time(api.http)
        assert not disk.finished.is_set(), "the server answered while the read was blocked"
    finally:
        disk.released.set()
    assert best < 0.1, f"GET /api/status took {best * 1000:.0f} ms at best"
    events = await api.segment(rid)
    done = next(e for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert done["data"]["output"] == "Contents of notes.txt (1 line, 14 bytes):\non a slow disk"
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
