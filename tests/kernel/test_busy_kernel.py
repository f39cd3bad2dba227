"""A kernel busy with the user's cell: the prompt's variables travel with it, tools wait.

"Run All" on a notebook runs a ``%neta`` cell and then the next cells at once: the agent works
while a later cell keeps the kernel busy. The variables the prompt refers to are the ones its own
cell saw, so ``%neta`` sends them with the run; tools that must read the kernel wait for it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from httpx_sse import aconnect_sse

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, types
from tests.kernel.test_magics import server_kernel
from tests.tools.test_kernel_tools import call, kernel_of, script, until_busy

pytestmark = pytest.mark.timeout(120)

CAPTURED = ["sales: DataFrame (2, 1), columns: q (int64)", "n: int = 3"]


def hold_until(release: Path, then: str = "") -> str:
    """A cell that keeps the kernel busy until the test creates ``release``."""
    return f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.05)\n{then}"


async def test_captured_variables_answer_while_a_cell_runs_and_are_the_context(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any, tmp_path: Path
) -> None:
    model = script(runtime, call("list_variables"), ScriptedTurn(text="You have sales and n."))
    release = tmp_path / "release"
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
        busy = asyncio.ensure_future(bridge.execute(hold_until(release)))
        await until_busy(kernel)
        rid = (
            await api.start(
                "what do I have?", model="scripted", kernelId=kernel_id, kernelVariables=CAPTURED
            )
        )["requestId"]
        events = await api.segment(rid)
        assert types(events)[-1] == "MESSAGE_COMPLETED"
        assert kernel.execution_state == "busy", "the run did not wait for the cell"
        listing = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
        assert listing["toolName"] == "list_variables"
        assert "as of when the prompt ran" in listing["output"]
        assert all(row in listing["output"] for row in CAPTURED)
        system = model.requests[0].system
        assert "(as of when the prompt ran)\n" + "\n".join(CAPTURED) in system
        record = await runtime.store.records.get_run(rid)
        assert record is not None and record.options["kernelVariables"] == CAPTURED
        release.touch()
        await busy


async def test_inspection_waits_for_the_running_cell_and_says_so(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any, tmp_path: Path
) -> None:
    script(runtime, call("inspect_variable", name="late"), ScriptedTurn(text="late is 7."))
    release = tmp_path / "release"
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        busy = asyncio.ensure_future(bridge.execute(hold_until(release, "late = 7")))
        await until_busy(jp_serverapp.kernel_manager.get_kernel(kernel_id))
        rid = (await api.start("what is late?", model="scripted", kernelId=kernel_id))["requestId"]
        async with aconnect_sse(
            api.http, "GET", "neta/api/agent/run/stream", params={"requestId": rid}
        ) as source:
            async for sse in source.aiter_sse():
                assert sse.event not in ("TOOL_COMPLETED", "TOOL_FAILED"), sse.data
                if sse.event == "TOOL_RUNNING" and "Waiting for the kernel" in sse.data:
                    break
        assert sse.json()["data"]["title"] == "Waiting for the kernel: a cell is running"
        # The answer is read once the cell has ended: it sees what the cell defined last.
        release.touch()
        await busy
        events = await api.segment(rid)
        assert types(events)[-1] == "MESSAGE_COMPLETED"
        done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
        assert done["output"].startswith("late: int = 7")


async def test_captured_variables_are_validated(api: ApiClient) -> None:
    response = await api.post("async", {"content": "hi", "kernelVariables": "sales"})
    assert response.status_code == 400 and response.json()["errCode"]
    response = await api.post("async", {"content": "hi", "kernelVariables": ["x" * 3000]})
    assert response.status_code == 400 and response.json()["errCode"]


async def test_run_all_the_prompt_sends_its_variables_and_is_answered_while_a_cell_runs(
    jp_serverapp: Any, api: ApiClient, runtime: Runtime, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    async with server_kernel(jp_serverapp) as (kernel_id, k):
        await k.run(
            "%load_ext neta_jupyter\nimport pandas as pd\nsales = pd.DataFrame({'q': [1, 2]})"
        )
        # The %neta line and then a long computation, as Run All gives them to the kernel: it
        # stays busy from before the run starts until the test releases it.
        cell = k.kc.execute("%neta what variables do I have?\n" + hold_until(release))
        kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
        rid = await started_run(api)
        events = await api.segment(rid)
        assert types(events)[-1] == "MESSAGE_COMPLETED"
        assert kernel.execution_state == "busy", "the run did not wait for the cell"
        listing = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
        assert listing["toolName"] == "list_variables"
        assert "as of when the prompt ran" in listing["output"]
        assert "sales: DataFrame (2, 1)" in listing["output"]
        record = await runtime.store.records.get_run(rid)
        assert record is not None and record.options["kernelId"] == kernel_id
        assert record.options["kernelVariables"][0].startswith("sales: DataFrame (2, 1)")
        answer = "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")
        assert "`sales`" in answer
        release.touch()
        await k.wait_for(
            lambda m: (
                m["parent_header"].get("msg_id") == cell
                and m["msg_type"] == "status"
                and m["content"]["execution_state"] == "idle"
            ),
            60,
        )


async def started_run(api: ApiClient) -> str:
    """The id of the only run, once the server has it."""
    for _ in range(1200):  # a minute at most
        runs = (await api.http.get("neta/api/agent/runs")).json()
        if isinstance(runs, dict):
            runs = runs.get("runs", [])
        if runs:
            return str(runs[0]["requestId"])
        await asyncio.sleep(0.05)
    raise AssertionError("no run was started")
