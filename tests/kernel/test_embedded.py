"""Embedded host: a kernel that no Jupyter server started runs the agent on its own loop."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_async_kernel

pytestmark = pytest.mark.timeout(90)

_NOT_INHERITED = ("NETA_SERVER_URL", "NETA_KERNEL_TOKEN", "NETA_SERVER_PID", "JPY_PARENT_PID")


class KernelSession:
    """A real kernel and every IOPub message it sends, whichever cell (or task) sent it."""

    def __init__(self, km: Any, kc: Any) -> None:
        self.km, self.kc = km, kc
        self.messages: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            msg = await self.kc.get_iopub_msg()
            self.messages.append(msg)
            self._arrived.set()

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for msg in self.messages[seen:]:
                if predicate(msg):
                    return msg
            seen = len(self.messages)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no such message from the kernel")
            self._arrived.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)

    async def run(self, code: str, timeout: float = 30) -> list[dict[str, Any]]:
        """Execute a cell; its own IOPub messages. A cell error fails the test."""
        msg_id = self.kc.execute(code, allow_stdin=False)
        reply = await self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = await self.kc.get_shell_msg(timeout=timeout)
        await self.wait_for(
            lambda m: (
                m["parent_header"].get("msg_id") == msg_id
                and m["msg_type"] == "status"
                and m["content"]["execution_state"] == "idle"
            ),
            timeout,
        )
        own = [m for m in self.messages if m["parent_header"].get("msg_id") == msg_id]
        errors = [m["content"] for m in own if m["msg_type"] == "error"]
        assert not errors, "\n".join("\n".join(e["traceback"]) for e in errors)
        assert reply["content"]["status"] == "ok", reply["content"]
        return own

    async def stdout(self, code: str, timeout: float = 30) -> str:
        own = await self.run(code, timeout)
        return "".join(
            m["content"]["text"]
            for m in own
            if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"
        )

    async def json(self, code: str, timeout: float = 30) -> Any:
        return json.loads((await self.stdout(code, timeout)).strip().splitlines()[-1])

    async def close(self) -> None:
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        self.kc.stop_channels()
        await self.km.shutdown_kernel(now=True)


@asynccontextmanager
async def kernel(
    cwd: Path, env: dict[str, str] | None = None, *, strip: bool = True
) -> AsyncIterator[KernelSession]:
    base = {k: v for k, v in os.environ.items() if not (strip and k in _NOT_INHERITED)}
    base["NETA_SCRIPTED_MODELS_DIR"] = str(cwd)  # the scripts a test writes, for embedded runs
    km, kc = await start_new_async_kernel(
        kernel_name="python3", env={**base, **(env or {})}, cwd=str(cwd)
    )
    session = KernelSession(km, kc)
    try:
        yield session
    finally:
        await session.close()


SETUP = """
%load_ext neta_jupyter
import neta_jupyter
import pandas as pd
df = pd.DataFrame({"x": [1.0, 2.0, 6.0], "y": [1, None, 3]})
"""

REPORT = """
import json
print(json.dumps({
    "status": run.status,
    "text": run.text,
    "tools": [e["data"].get("toolName") for e in run.events if e["eventType"] == "TOOL_COMPLETED"],
    "mode": run.host.mode,
}))
"""


async def test_ask_runs_the_demo_agent_in_the_kernel_itself(tmp_path: Path) -> None:
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0"}) as k:
        await k.run(SETUP)
        await k.run(
            'run = neta_jupyter.ask("what is the mean of df\'s column x? compute it",'
            " approve='auto')"
        )
        await k.run("await run.wait(60)", timeout=70)
        report = await k.json(REPORT)
        assert report["mode"] == "embedded"
        assert report["status"] == "completed"
        assert report["tools"] == ["list_variables", "inspect_variable", "python"]
        # The python tool ran df.describe() in this kernel: the mean of x is 3.
        assert "mean   3.0" in report["text"]
        # The agent's run handle is not offered as user data.
        listing = await k.json(
            "print(json.dumps([e['data'].get('output') for e in run.events"
            " if e['eventType'] == 'TOOL_COMPLETED'][0]))"
        )
        assert listing.startswith("Variables in the kernel (1):\ndf: DataFrame (3, 2)")
        assert "run:" not in listing


async def test_a_lasting_data_folder_deletes_the_events_of_runs_finished_over_a_week_ago(
    tmp_path: Path,
) -> None:
    import sqlite3
    from contextlib import closing

    from tests.store.test_retention import events_per_run

    env = {"NETA_DEMO_PACE": "0", "NETA_DATA_DIR": str(tmp_path / "data")}
    ask = "run = neta_jupyter.ask('what is 17*23?', approve='auto')"
    async with kernel(tmp_path, env) as k:
        await k.run(SETUP)
        await k.run(ask)
        await k.run("await run.wait(60)", timeout=70)
    with closing(sqlite3.connect(tmp_path / "data" / "neta.sqlite3", isolation_level=None)) as c:
        [(old,)] = c.execute("SELECT request_id FROM runs").fetchall()
        assert events_per_run(c)[old] > 0
        c.execute("UPDATE runs SET updated = updated - 8 * 86400")
    async with kernel(tmp_path, {**env, "NETA_DEMO_PACE": "0.05"}) as k:
        await k.run(SETUP)
        await k.run(ask)
        # The run lasts while the sweep started with the store looks at the file.
        await k.run("await run.wait(60)", timeout=70)
    with closing(sqlite3.connect(tmp_path / "data" / "neta.sqlite3", isolation_level=None)) as c:
        [(new,)] = c.execute("SELECT request_id FROM runs WHERE request_id != ?", (old,))
        kept = events_per_run(c)
        assert kept[old] == 0, "the old run's events are deleted"
        assert kept[new] > 0, "the new run's events are kept"


async def test_python_tool_changes_the_users_namespace_and_captures_figures(
    tmp_path: Path,
) -> None:
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0"}) as k:
        await k.run(SETUP)
        await k.run(
            "run = neta_jupyter.ask('plot a histogram of df column x', approve='auto')",
        )
        await k.run("await run.wait(60)", timeout=70)
        report = await k.json(REPORT)
        assert report["status"] == "completed" and report["tools"][-1] == "python"
        images = await k.json(
            "print(json.dumps([e['data'].get('images') for e in run.events"
            " if e['eventType'] == 'TOOL_COMPLETED' and e['data'].get('images')]))"
        )
        assert len(images) == 1 and images[0][0].endswith(".png")
        # There is no server to download from: the view gets the image inline.
        shown = await k.json(
            "print(json.dumps([i for e in run.events_after(-1)"
            " for i in e['data'].get('images') or []]))"
        )
        assert len(shown) == 1 and shown[0].startswith("data:image/png;base64,iVBOR")
        # The figure was closed: it will not show up under the next cell.
        assert await k.json("import matplotlib.pyplot as plt; print(len(plt.get_fignums()))") == 0
        # `column` was set by the agent's code in the user's namespace.
        assert await k.json("print(json.dumps(column))") == "x"


async def test_in_process_bridge_outputs_errors_and_rich_results(tmp_path: Path) -> None:
    async with kernel(tmp_path) as k:
        await k.run("%load_ext neta_jupyter")
        report = await k.json(
            """
before = get_ipython().execution_count
from neta_jupyter.kernel.inprocess import InProcessKernelBridge
from neta_jupyter.tools import ToolError
bridge = InProcessKernelBridge(get_ipython())
ok = await bridge.execute("print('out'); import sys; print('err', file=sys.stderr)\\n40 + 2")
try:
    await bridge.execute("print('first')\\nraise ValueError('bad value')")
    failed = None
except ToolError as exc:
    failed = str(exc)
try:
    await bridge.execute("while True: pass", timeout=0.5)
    slow = None
except ToolError as exc:
    slow = str(exc)
awaited = await bridge.execute("import asyncio\\nawait asyncio.sleep(0.01)\\nprint('awaited')")
print(json.dumps({"ok": ok.output, "failed": failed, "slow": slow, "awaited": awaited.output,
                  "count": get_ipython().execution_count, "before": before}))
""".replace("json.dumps", "__import__('json').dumps")
        )
        assert report["ok"] == "out\nerr\n42\n"
        assert report["failed"].startswith("first\n")
        assert "ValueError: bad value" in report["failed"]
        assert "inprocess.py" not in report["failed"], "our own frames are left out"
        assert "ran longer than 0.5 s" in report["slow"]
        assert report["awaited"] == "awaited\n"
        assert report["count"] == report["before"], "tool code does not count as a cell"
