"""Code run in the background: the run suspends (ASYNC_TOOL_PENDING) and goes on by itself.

A real kernel of a real server runs the code; nobody follows the run while it waits; a follower
that connects afterwards reads every event in order. Stopping a waiting run interrupts the code,
and a session whose run waits refuses a new prompt rather than cutting it off.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, assert_in_order, script, stored, types
from tests.tools.test_kernel_tools import kernel_of

pytestmark = pytest.mark.timeout(120)

PATIENCE = 90.0
"""A generous bound on waits that only have to end (nothing here measures a speed)."""

GATED = """
import os, time
print("training", flush=True)
while not os.path.exists({gate!r}):
    time.sleep(0.05)
trained = 0.93
print("accuracy", trained)
"""


def in_background(code: str) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedToolCall("python", {"code": code, "background": True})])


async def until_status(api: ApiClient, rid: str, wanted: str) -> dict[str, Any]:
    """The run's status once it is ``wanted`` (polled; the test's timeout bounds it)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + PATIENCE
    while loop.time() < until:
        status = await api.status(rid)
        if status["status"] == wanted:
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {rid} never became {wanted}: {status}")


async def until_exists(path: Path) -> None:
    """Wait until ``path`` exists (a hang fails the test by its timeout)."""
    for _ in range(2400):  # two minutes at most
        if await asyncio.to_thread(path.exists):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


async def start(api: ApiClient, kernel_id: str, **fields: Any) -> str:
    started = await api.start(
        "train it", model="scripted", kernelId=kernel_id, approve="auto", **fields
    )
    return str(started["requestId"])


async def test_a_background_execution_suspends_the_run_which_completes_on_its_own(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    model = script(
        runtime, in_background(GATED.format(gate=str(gate))), ScriptedTurn(text="trained")
    )
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        rid = await start(api, kernel_id)
        first = await api.segment(rid)
        suspended = first[-1]
        assert suspended["eventType"] == "MESSAGE_SUSPENDED", types(first)
        assert suspended["data"]["suspendReason"]["type"] == "ASYNC_TOOL_PENDING"
        assert (await api.status(rid))["status"] == "suspended"
        assert "TOOL_COMPLETED" not in types(first)

        gate.touch()  # the code ends; nobody follows the run
        await until_status(api, rid, "completed")

    rest = await api.segment(rid, suspended["seq"])
    assert [e["seq"] for e in rest] == list(range(suspended["seq"] + 1, rest[-1]["seq"] + 1))
    assert_in_order(types(rest), ["TOOL_COMPLETED", "TEXT_START", "MESSAGE_COMPLETED"])
    done = next(e["data"] for e in rest if e["eventType"] == "TOOL_COMPLETED")
    assert done["output"] == "training\naccuracy 0.93\n"
    assert done["toolCallId"] == next(
        e["data"]["toolCallId"] for e in first if e["eventType"] == "TOOL_START"
    )
    # A follower reading from the start now gets the same events, segment by segment.
    log = first + rest
    assert [e["seq"] for e in log] == list(range(len(log)))
    assert await api.segment(rid) == first
    assert {e["requestId"] for e in log} == {rid}
    assert [e["eventType"] for e in log if e["eventType"].startswith("MESSAGE_")] == [
        "MESSAGE_SUSPENDED",
        "MESSAGE_COMPLETED",
    ]
    # The model read the code's result as the call's answer.
    answered = [m for m in model.requests[-1].messages if m.role == "tool"]
    assert answered and "accuracy 0.93" in str(answered[-1].content)


async def test_a_follower_waiting_meanwhile_gets_the_rest_as_it_happens(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script(runtime, in_background(GATED.format(gate=str(gate))), ScriptedTurn(text="trained"))
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        rid = await start(api, kernel_id)
        first = await api.segment(rid)
        assert first[-1]["data"]["suspendReason"]["type"] == "ASYNC_TOOL_PENDING"
        # Connected after the suspension, before the code ends: the stream stays open.
        following = asyncio.ensure_future(api.segment(rid, first[-1]["seq"]))
        await asyncio.sleep(0.5)
        assert not following.done(), "the stream of a run that will go on stays open"
        gate.touch()
        rest = await asyncio.wait_for(following, PATIENCE)
    assert rest[0]["seq"] == first[-1]["seq"] + 1
    assert_in_order(types(rest), ["TOOL_COMPLETED", "MESSAGE_COMPLETED"])
    assert types(rest)[-1] == "MESSAGE_COMPLETED"


async def test_resuming_a_waiting_run_by_hand_waits_for_the_code_in_the_run(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    model = script(
        runtime, in_background(GATED.format(gate=str(gate))), ScriptedTurn(text="trained")
    )
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        rid = await start(api, kernel_id)
        first = await api.segment(rid)
        assert first[-1]["data"]["suspendReason"]["type"] == "ASYNC_TOOL_PENDING"
        resumed = await api.resume(rid)  # the widget's Resume button
        assert resumed.status_code == 200, resumed.text
        assert (await api.status(rid))["status"] == "running"
        gate.touch()
        rest = await api.segment(rid, first[-1]["seq"])
        await until_status(api, rid, "completed")
    log = first + rest
    assert [e["seq"] for e in log] == list(range(len(log)))
    assert types(log).count("TOOL_COMPLETED") == 1
    assert [t for t in types(log) if t.startswith("MESSAGE_")] == [
        "MESSAGE_SUSPENDED",
        "MESSAGE_COMPLETED",
    ]
    assert len(model.requests) == 2  # the code's end started nothing more
    await asyncio.sleep(0.5)  # a second continuation would write in this while
    assert len(await stored(runtime, rid)) == len(log)


async def test_stopping_a_run_that_waits_interrupts_its_code_and_the_kernel_goes_on(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any, tmp_path: Path
) -> None:
    flag = tmp_path / "started"
    code = (
        f"started = 1\nopen({str(flag)!r}, 'w').close()\nimport time\ntime.sleep(600)\nfinished = 1"
    )
    script(runtime, in_background(code), ScriptedTurn(text="unreachable"))
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        rid = await start(api, kernel_id)
        first = await api.segment(rid)
        assert first[-1]["data"]["suspendReason"]["type"] == "ASYNC_TOOL_PENDING"
        # The code itself says it runs: the kernel's busy state may be another request's.
        await until_exists(flag)
        stopped = await api.post("terminateTask", {"requestId": rid})
        assert stopped.status_code == 200, stopped.text
        rest = await api.segment(rid, first[-1]["seq"])
        assert rest[-1]["eventType"] == "MESSAGE_FAILED"
        assert rest[-1]["data"]["errorCode"] == "USER_CANCELLED"
        assert [e["eventType"] for e in rest].count("MESSAGE_FAILED") == 1
        probe = await bridge.execute("print('started' in globals(), 'finished' in globals())")
        assert probe.output == "True False\n"
    assert (await api.status(rid))["status"] == "failed"


async def test_a_session_whose_run_waits_refuses_a_new_prompt(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script(runtime, in_background(GATED.format(gate=str(gate))), ScriptedTurn(text="trained"))
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        started = await api.start("train", model="scripted", kernelId=kernel_id, approve="auto")
        rid, session = started["requestId"], started["sessionId"]
        assert (await api.segment(rid))[-1]["eventType"] == "MESSAGE_SUSPENDED"
        again = await api.post("async", {"content": "and now?", "sessionId": session})
        assert again.status_code == 409, again.text
        assert again.json()["errCode"] == "SESSION_BUSY"
        gate.touch()
        await until_status(api, rid, "completed")
