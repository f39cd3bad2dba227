"""Kernel tools on the server host: a real kernel of the test server runs the code."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from httpx_sse import aconnect_sse
from jupyter_client.blocking import BlockingKernelClient
from jupyter_client.session import Session

from neta_jupyter.providers import ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.server.kernels import ServerKernelBridge
from neta_jupyter.tools import ToolContext
from neta_jupyter.tools.kernel_tools import list_variables, python
from neta_jupyter.tools.values import ToolError
from tests.helpers import ApiClient, script, types

pytestmark = pytest.mark.timeout(60)

SETUP = """
import pandas as pd
df = pd.DataFrame({"x": [1.0, 2.0, None, 4.0], "label": ["a", "b", "c", None]})
"""

PLOT = """
import io
import matplotlib
matplotlib.use("agg")
import matplotlib.pyplot as plt
from IPython.display import Image, display
fig, ax = plt.subplots()
ax.plot(df["x"])
buffer = io.BytesIO()
fig.savefig(buffer, format="png")
plt.close(fig)
print("mean of x is", df["x"].mean())
display(Image(data=buffer.getvalue()))
made_by_agent = 42
"""


@asynccontextmanager
async def kernel_of(jp_serverapp: Any) -> AsyncIterator[tuple[str, ServerKernelBridge]]:
    km = jp_serverapp.kernel_manager
    kernel_id = await km.start_kernel()
    bridge = ServerKernelBridge(km, kernel_id)
    try:
        yield kernel_id, bridge
    finally:
        await bridge.close()
        await km.shutdown_kernel(kernel_id, now=True)


async def until_busy(kernel: Any) -> None:
    """Wait until the kernel reports a running cell (a hang fails the test by its timeout)."""
    for _ in range(1200):  # a minute at most
        if kernel.execution_state == "busy":
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the cell never started")


def call(tool_name: str, **arguments: Any) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedToolCall(tool_name, arguments)])


async def approve_pending(api: ApiClient, rid: str, events: list[dict[str, Any]]) -> None:
    ask = next(e for e in reversed(events) if e["eventType"] == "PERMISSION_ASK")["data"]
    assert ask["toolName"] == "python"
    response = await api.resume(rid, approved=True, askId=ask["askId"])
    assert response.status_code == 200, response.text


async def test_python_says_what_printed_nothing_and_which_files_exist(
    jp_serverapp: Any, tmp_path: Path
) -> None:
    """Small models read an empty result as a failure, and guess file paths."""
    (tmp_path / "sales.csv").write_text("a\n1\n")
    (tmp_path / "notes.txt").write_text("hi")
    async with kernel_of(jp_serverapp) as (_kid, bridge):
        ctx = ToolContext(
            root_dir=tmp_path, session_id="s", request_id="r", tool_call_id="c", kernel=bridge
        )
        quiet = await python.run(json.dumps({"code": "x = 1"}), ctx)
        assert (
            quiet.output == "(the code ran and printed nothing; print() the values you want to see)"
        )
        with pytest.raises(ToolError) as guessed:
            await python.run(json.dumps({"code": "open('data/sales.csv')"}), ctx)
        assert "FileNotFoundError" in str(guessed.value)
        assert str(guessed.value).endswith(
            "Files in the notebook folder (paths are relative to it): notes.txt, sales.csv"
        )


async def test_bridge_collects_outputs_and_errors(jp_serverapp: Any) -> None:
    async with kernel_of(jp_serverapp) as (_kid, bridge):
        result = await bridge.execute(
            # stdout and stderr are separate streams: flushed, hello is sent before oops
            "print('hello', flush=True); import sys; print('oops', file=sys.stderr)\n6*7"
        )
        assert result.output.splitlines() == ["hello", "oops", "42"]
        with pytest.raises(ToolError) as failure:
            await bridge.execute("print('before')\n1/0")
        message = str(failure.value)
        assert message.startswith("before")
        assert "ZeroDivisionError" in message and "\x1b[" not in message
        long = await bridge.execute("print('y' * 30000)")
        assert len(long.output) < 21_000 and "output truncated" in long.output
        assert long.files and len(long.files[0].content) > 30_000
        quiet = await bridge.execute_quietly("print('quiet'); 1 + 1")
        assert quiet.output == "quiet\n"


async def test_timeout_interrupts_the_kernel_which_stays_usable(jp_serverapp: Any) -> None:
    async with kernel_of(jp_serverapp) as (_kid, bridge):
        with pytest.raises(ToolError, match="interrupted"):
            await bridge.execute("import time\nfor i in range(100): time.sleep(0.1)", timeout=1)
        assert (await bridge.execute("print('still here')")).output == "still here\n"


async def test_code_runs_in_a_kernel_that_another_client_keeps_talking_to(
    jp_serverapp: Any,
) -> None:
    """A view that saves its widget's state several times a second never lets IOPub fall silent."""
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
        other = kernel.client(
            session=Session(
                key=kernel.session.key, signature_scheme=kernel.session.signature_scheme
            )
        )
        other.start_channels()
        await other.wait_for_ready(timeout=60)

        async def keep_talking() -> None:
            while True:
                other.kernel_info()
                await asyncio.sleep(0.05)

        talking = asyncio.ensure_future(keep_talking())
        try:
            result = await bridge.execute("print('hello')")
        finally:
            talking.cancel()
            other.stop_channels()
        assert result.output == "hello\n"


async def test_agent_inspects_data_runs_code_and_sees_errors(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any
) -> None:
    model = script(
        runtime,
        call("list_variables"),
        call("inspect_variable", name="df"),
        call("python", code=PLOT),
        call("python", code="print('about to fail')\nundefined_name + 1"),
        ScriptedTurn(text="All done."),
    )
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        await bridge.execute(SETUP)
        rid = (await api.start("look at df", model="scripted", kernelId=kernel_id))["requestId"]
        first = await api.segment(rid)
        await approve_pending(api, rid, first)
        second = await api.segment(rid, first[-1]["seq"])
        await approve_pending(api, rid, second)
        third = await api.segment(rid, second[-1]["seq"])
        events = first + second + third
        assert types(third)[-1] == "MESSAGE_COMPLETED"

        done = [e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED"]
        assert [d["toolName"] for d in done] == ["list_variables", "inspect_variable", "python"]
        listing, inspection, plot = (d["output"] for d in done)
        assert listing.splitlines()[0] == "Variables in the kernel (1):"
        assert listing.splitlines()[1].startswith("df: DataFrame (4, 2)")
        assert "bridge" not in listing and "pd:" not in listing
        assert "  x: float64, 1 missing" in inspection
        assert "head(5):" in inspection
        assert "mean of x is 2.33" in plot and "[image:" in plot

        image = done[2]["images"][0]
        download = await api.http.get(
            "neta/api/agent/attachment/download", params={"virtualPath": image}
        )
        assert download.status_code == 200
        assert download.headers["content-type"] == "image/png"
        assert download.content.startswith(b"\x89PNG")

        failed = next(e["data"] for e in events if e["eventType"] == "TOOL_FAILED")
        assert failed["toolName"] == "python" and "NameError" in failed["errorMessage"]
        told = model.requests[4].messages[-1]
        assert told.role == "tool"
        assert "about to fail" in told.content and "NameError" in told.content
        model.assert_complete()

        # The code ran in the user's kernel: what it defined is there.
        check = await bridge.execute("print(made_by_agent)")
        assert check.output == "42\n"


async def test_denied_python_call_never_runs(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any
) -> None:
    model = script(
        runtime,
        call("python", code="denied_marker = 1"),
        ScriptedTurn(text="I was not allowed to."),
    )
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        rid = (await api.start("set it", model="scripted", kernelId=kernel_id))["requestId"]
        first = await api.segment(rid)
        ask = next(e for e in first if e["eventType"] == "PERMISSION_ASK")["data"]
        await api.resume(rid, approved=False, askId=ask["askId"])
        second = await api.segment(rid, first[-1]["seq"])
        assert "TOOL_FAILED" in types(second) and types(second)[-1] == "MESSAGE_COMPLETED"
        probe = await bridge.execute_quietly("print('denied_marker' in globals())")
        assert probe.output == "False\n"
        model.assert_complete()


async def test_without_a_kernel_the_kernel_tools_are_not_offered(
    api: ApiClient, runtime: Runtime
) -> None:
    model = script(runtime, ScriptedTurn(text="ok"))
    rid = (await api.start("hi", model="scripted"))["requestId"]
    assert types(await api.segment(rid))[-1] == "MESSAGE_COMPLETED"
    offered = {t.name for t in model.requests[0].tools}
    assert "read_file" in offered and not offered & {"python", "list_variables"}
    assert json.dumps(sorted(offered))


async def test_code_waiting_behind_a_busy_cell_never_runs_once_the_run_is_stopped(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any, tmp_path: Path
) -> None:
    script(runtime, call("python", code="late_marker = 1"), ScriptedTurn(text="unreachable"))
    release = tmp_path / "release"
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        # The cell stays busy until the test releases it, however slow the machine is.
        busy = asyncio.ensure_future(
            bridge.execute(
                f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.05)"
            )
        )
        await until_busy(jp_serverapp.kernel_manager.get_kernel(kernel_id))
        rid = (await api.start("go", model="scripted", kernelId=kernel_id, approve="auto"))[
            "requestId"
        ]
        async with aconnect_sse(
            api.http, "GET", "neta/api/agent/run/stream", params={"requestId": rid}
        ) as source:
            async for sse in source.aiter_sse():
                if sse.event == "TOOL_RUNNING" and "kernel" in sse.data:
                    break  # the python call now waits for the kernel
        stopped = await api.post("terminateTask", {"requestId": rid})
        assert stopped.status_code == 200, stopped.text
        release.touch()
        await busy
        await asyncio.sleep(0.5)
        probe = await bridge.execute_quietly("print('late_marker' in globals())")
        assert probe.output == "False\n"


async def test_variables_come_from_the_prompt_when_a_queued_cell_gets_the_kernel_first(
    jp_serverapp: Any, tmp_path: Path
) -> None:
    """Run All: the cell after ``%neta`` reaches the kernel before the agent's first read."""
    release = tmp_path / "release"
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        await bridge.execute_quietly("sales = 1")  # the bridge is open: nothing delays the read
        kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
        # A blocking client: waiting on it does not let the server's loop read the kernel's
        # "busy", so the agent's read is sent while the server still believes the kernel idle.
        front_end = BlockingKernelClient()
        front_end.load_connection_info(kernel.get_connection_info())
        front_end.session = Session(
            key=kernel.session.key, signature_scheme=kernel.session.signature_scheme
        )
        front_end.start_channels()
        ctx = ToolContext(
            root_dir=tmp_path,
            session_id="s",
            request_id="r",
            tool_call_id="c",
            kernel=bridge,
            variables_at_prompt=["sales: int = 1"],
        )
        try:
            # Sent before the server has seen the kernel go busy, as a front end's Run All does.
            cell = front_end.execute(
                f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.05)"
            )
            _until_running(front_end, cell)
            assert not bridge.is_busy(), "the server must not have seen the cell start yet"
            listing = await list_variables.run("{}", ctx)
            assert "as of when the prompt ran" in listing.output
            assert "sales: int = 1" in listing.output
            assert kernel.execution_state == "busy", "the user's cell must still be running"
        finally:
            release.touch()
            front_end.stop_channels()
        # The read that was left queued ran once the cell ended, harmlessly.
        assert (await bridge.execute_quietly("print(sales)")).output == "1\n"


def _until_running(client: BlockingKernelClient, msg_id: str) -> None:
    """Block (without yielding to the server's loop) until the kernel runs ``msg_id``."""
    while True:
        msg = client.get_iopub_msg(timeout=60)
        state = msg["content"].get("execution_state")
        if msg["parent_header"].get("msg_id") == msg_id and state == "busy":
            return
