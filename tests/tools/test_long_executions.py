"""Long executions in a real kernel of a real server, followed over SSE.

An execution's time limit is the run's remaining time unless ``execution_timeout`` says less; a
long cell streams what it prints and updates its card's title and the process timeline while it
runs; stopping the run interrupts the cell, and the kernel, its variables intact, runs the next.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from httpx_sse import aconnect_sse

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.runtime.settings import NetaSettings
from neta_jupyter.tools import executions
from neta_jupyter.tools.values import ToolResult
from tests.helpers import ApiClient, script, types
from tests.tools.test_kernel_tools import call, kernel_of

pytestmark = pytest.mark.timeout(120)

LONG_CELL = """
before_the_wait = 1
print("started", flush=True)
import time
time.sleep(600)
after_the_wait = 1
"""


def kind(envelope: dict[str, Any]) -> str:
    """Event type, with the category of a TOOL_EVENT."""
    if envelope["eventType"] == "TOOL_EVENT":
        return f"TOOL_EVENT:{envelope['data']['category']}"
    return str(envelope["eventType"])


async def start(api: ApiClient, kernel_id: str, prompt: str = "go") -> str:
    started = await api.start(prompt, model="scripted", kernelId=kernel_id, approve="auto")
    return str(started["requestId"])


async def test_stop_during_a_long_cell_interrupts_it_and_the_kernel_runs_the_next_one(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any
) -> None:
    script(runtime, call("python", code=LONG_CELL), ScriptedTurn(text="unreachable"))
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
        rid = await start(api, kernel_id)
        events: list[dict[str, Any]] = []
        async with aconnect_sse(
            api.http, "GET", "neta/api/agent/run/stream", params={"requestId": rid}
        ) as source:
            async for sse in source.aiter_sse():
                if sse.event == "HEARTBEAT":
                    continue
                events.append(json.loads(sse.data))
                if kind(events[-1]) == "TOOL_EVENT:tool_stream_data":
                    # The cell printed, so it sleeps now: stop the run.
                    stopped = await api.post("terminateTask", {"requestId": rid})
                    assert stopped.status_code == 200, stopped.text
                if events[-1]["eventType"] in ("MESSAGE_COMPLETED", "MESSAGE_FAILED"):
                    break
        assert events[-1]["eventType"] == "MESSAGE_FAILED", types(events)
        assert events[-1]["data"]["errorCode"] == "USER_CANCELLED"
        streamed = [e for e in events if kind(e) == "TOOL_EVENT:tool_stream_data"]
        assert streamed[0]["data"]["payload"]["text"] == "started\n"

        # The same kernel process, idle again, with the cell's first variable and not its last.
        pid = kernel.provisioner.pid
        probe = await bridge.execute_quietly(
            "print('before_the_wait' in globals(), 'after_the_wait' in globals())"
        )
        assert probe.output == "True False\n"
        assert kernel.provisioner.pid == pid and await kernel.is_alive()

        script(runtime, call("python", code="print(before_the_wait + 1)"), ScriptedTurn(text="2"))
        rid = await start(api, kernel_id, "again")
        after = await api.segment(rid)
        assert types(after)[-1] == "MESSAGE_COMPLETED", types(after)
        done = next(e for e in after if e["eventType"] == "TOOL_COMPLETED")
        assert done["data"]["output"] == "2\n"


GATED_CELL = """
import os, time
print("epoch 1 loss 0.9", flush=True)
deadline = time.time() + 60
while not os.path.exists({gate!r}) and time.time() < deadline:
    time.sleep(0.05)
print("epoch 2 loss 0.4", flush=True)
"""


async def test_a_long_cell_updates_its_title_and_the_timeline_while_it_runs(
    api: ApiClient,
    runtime: Runtime,
    jp_serverapp: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(executions, "PROGRESS_INTERVAL", 0.2)
    gate = tmp_path / "gate"
    script(runtime, call("python", code=GATED_CELL.format(gate=str(gate))), ScriptedTurn("ok"))
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        rid = await start(api, kernel_id)
        events: list[dict[str, Any]] = []
        async with aconnect_sse(
            api.http, "GET", "neta/api/agent/run/stream", params={"requestId": rid}
        ) as source:
            async for sse in source.aiter_sse():
                if sse.event == "HEARTBEAT":
                    continue
                envelope = json.loads(sse.data)
                events.append(envelope)
                title = envelope["data"].get("title") or ""
                if envelope["eventType"] == "TOOL_RUNNING" and "epoch 1 loss 0.9" in title:
                    gate.touch()  # the cell goes on only once its progress reached the stream
                if envelope["eventType"] in ("MESSAGE_COMPLETED", "MESSAGE_FAILED"):
                    break
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED", types(events)
    done = next(e for e in events if e["eventType"] == "TOOL_COMPLETED")
    titles = [e for e in events if e["eventType"] == "TOOL_RUNNING"]
    progress = [t["data"]["title"] for t in titles if "epoch 1" in t["data"]["title"]]
    assert progress and progress[0].startswith("Running Python in your kernel · ")
    assert "1 line printed" in progress[0]
    assert all(t["seq"] < done["seq"] for t in titles)
    timeline = [e["data"] for e in events if e["eventType"] == "PROCESS_EVENT"]
    assert timeline[0]["status"] == "started" and timeline[0]["stage"] == "executing"
    assert any(p["message"] == "epoch 1 loss 0.9" for p in timeline)
    assert timeline[-1]["status"] == "completed"
    assert {p["toolCallId"] for p in timeline} == {done["data"]["toolCallId"]}
    assert {p["source"] for p in timeline} == {"runtime"}
    # The timeline is the user's: the model reads what the cell printed, and no log of it.
    assert done["data"]["output"] == "epoch 1 loss 0.9\nepoch 2 loss 0.4\n"


async def test_a_quick_cell_publishes_no_progress(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any
) -> None:
    script(runtime, call("python", code="print('quick')"), ScriptedTurn(text="ok"))
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        events = await api.segment(await start(api, kernel_id))
    assert "PROCESS_EVENT" not in types(events)
    done = next(e for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert done["data"]["output"] == "quick\n"


def test_the_time_limit_setting_reaches_the_runtime(tmp_path: Path) -> None:
    settings = NetaSettings(execution_timeout=90.0)
    assert settings.runtime_config(root_dir=tmp_path, data_dir=tmp_path).execution_timeout == 90
    default = NetaSettings().runtime_config(root_dir=tmp_path, data_dir=tmp_path)
    assert default.execution_timeout is None  # the run's remaining time


async def test_a_configured_time_limit_interrupts_the_cell_and_the_run_goes_on(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime.config, "execution_timeout", 1.0)
    model = script(
        runtime,
        call("python", code="import time\nfor i in range(6000): time.sleep(0.1)"),
        call("python", code="print('alive')"),
        ScriptedTurn(text="done"),
    )
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        events = await api.segment(await start(api, kernel_id))
    assert types(events)[-1] == "MESSAGE_COMPLETED", types(events)
    failed = next(e["data"] for e in events if e["eventType"] == "TOOL_FAILED")
    assert "ran longer than 1 s, so the kernel was interrupted" in failed["errorMessage"]
    completed = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert completed["output"] == "alive\n"
    assert len(model.requests) == 3


class _Recording:
    """A kernel seam that records the time limit the tool gives it."""

    def __init__(self) -> None:
        self.timeouts: dict[str, float | None] = {}

    async def execute(
        self, code: str, *, timeout: float | None = None, on_output: Any = None
    ) -> ToolResult:
        self.timeouts[code] = timeout
        await asyncio.sleep(0)
        return ToolResult("ran\n")


async def test_without_a_configured_limit_an_execution_may_take_the_runs_remaining_time(
    api: ApiClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime.config, "execution_timeout", None)
    monkeypatch.setattr(runtime.config, "task_timeout", 7200.0)
    kernel = _Recording()
    monkeypatch.setattr(runtime, "kernels", lambda run: kernel)
    monkeypatch.setattr(runtime, "targets", None)  # its kernel "k" is no kernel of the server
    script(runtime, call("python", code="print(1)"), ScriptedTurn(text="ok"))
    rid = (await api.start("go", model="scripted", kernelId="k", approve="auto"))["requestId"]
    assert types(await api.segment(rid))[-1] == "MESSAGE_COMPLETED"
    limit = kernel.timeouts["print(1)"]  # (the variables of the context are read first)
    assert limit is not None and 7000 < limit <= 7200


async def test_code_stopped_before_the_kernel_started_it_is_interrupted_once_it_starts(
    jp_serverapp: Any,
) -> None:
    async with kernel_of(jp_serverapp) as (_kernel_id, bridge):
        await bridge.execute("pass")  # the bridge's client is open
        running = asyncio.ensure_future(bridge.execute("import time\ntime.sleep(600)\nlate = 1"))
        for _ in range(100_000):  # until it is sent, and not yet answered
            if bridge._waiting:
                break
            await asyncio.sleep(0)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        # Not left to sleep in the kernel: the next code runs, and the stopped code never ended.
        assert (await bridge.execute("print('late' in globals())")).output == "False\n"
