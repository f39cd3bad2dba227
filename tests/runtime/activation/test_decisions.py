"""The loop's decisions over SSE: PHASE_CHANGED, PROGRESS_EVALUATED, STOP_REASON_DECIDED."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from neta_jupyter.providers import (
    ProviderInvalidRequest,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
)
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import PermissionRule
from tests.helpers import ApiClient, script, types

DECISIONS = {"PHASE_CHANGED", "PROGRESS_EVALUATED", "STOP_REASON_DECIDED"}


def phases(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["phase"] for e in events if e["eventType"] == "PHASE_CHANGED"]


def progress(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["eventType"] == "PROGRESS_EVALUATED"]


def stop_reason(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The one STOP_REASON_DECIDED, which comes right before the one terminal event."""
    names = types(events)
    assert names.count("STOP_REASON_DECIDED") == 1, names
    assert sum(n.startswith("MESSAGE_") for n in names) == 1
    assert names[-1].startswith("MESSAGE_")
    assert names[-2] == "STOP_REASON_DECIDED", names[-4:]
    data: dict[str, Any] = events[-2]["data"]
    return data


async def test_a_run_with_a_tool_call_says_what_it_does_and_why_it_stopped(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "data.txt").write_text("forty-two")
    script(
        runtime,
        ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "data.txt"})]),
        ScriptedTurn(text="The file says forty-two."),
    )
    rid = (await api.start("read data.txt", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert phases(events) == [
        "building_context",
        "budgeting",
        "calling_model",
        "running_tools",
        "building_context",
        "budgeting",
        "calling_model",
        "finishing",
    ]
    changes = [e["data"] for e in events if e["eventType"] == "PHASE_CHANGED"]
    assert changes[0].get("previousPhase") is None
    assert all(b["previousPhase"] == a["phase"] for a, b in itertools.pairwise(changes))
    assert changes[3]["toolNames"] == ["read_file"]
    names = types(events)
    # Each phase is announced before its own events: the budget check, the reply, the tool.
    assert names.index("BUDGET_CHECKED") > names.index("PHASE_CHANGED")
    tools_phase = next(i for i, e in enumerate(events) if e["data"].get("phase") == "running_tools")
    assert tools_phase < names.index("TOOL_START")
    assert progress(events) == [
        {
            "type": "progress",
            "progressed": True,
            "textChars": 0,
            "toolResults": 1,
            "failedToolResults": 0,
            "noProgressCount": 0,
        },
        {
            "type": "progress",
            "progressed": True,
            "textChars": len("The file says forty-two."),
            "toolResults": 0,
            "failedToolResults": 0,
            "noProgressCount": 0,
        },
    ]
    assert [e["step"] for e in events if e["eventType"] == "PROGRESS_EVALUATED"] == [1, 2]
    stop = stop_reason(events)
    assert stop["reason"] == "stop" and stop["finishReason"] == "STOP"
    # A few events per step, not per token.
    assert sum(n in DECISIONS for n in names) == 11


async def test_steps_without_progress_are_counted_until_max_steps(
    api: ApiClient, runtime: Runtime
) -> None:
    missing = ScriptedToolCall("read_file", {"path": "nowhere.txt"})
    script(runtime, *[ScriptedTurn(tool_calls=[missing]) for _ in range(3)])
    rid = (await api.start("read it", model="scripted", maxSteps=3))["requestId"]
    events = await api.segment(rid)
    evaluated = progress(events)
    assert [p["noProgressCount"] for p in evaluated] == [1, 2, 3]
    assert all(not p["progressed"] and p["failedToolResults"] == 1 for p in evaluated)
    stop = stop_reason(events)
    assert stop["reason"] == "max_steps" and stop["finishReason"] == "MAX_STEPS"
    assert events[-1]["data"]["finishReason"] == "MAX_STEPS"


async def test_a_terminated_run_stops_with_cancel(api: ApiClient, runtime: Runtime) -> None:
    script(runtime, ScriptedTurn(text=["tok "] * 2000, delay=0.005))
    rid = (await api.start("go", model="scripted"))["requestId"]
    await api.frames(rid, limit=20)
    assert (await api.post("terminateTask", {"requestId": rid})).status_code == 200
    events = await api.segment(rid)
    assert phases(events)[-2:] == ["calling_model", "finishing"]
    stop = stop_reason(events)
    assert stop["reason"] == "cancel" and stop["errorCode"] == "USER_CANCELLED"


async def test_a_failed_run_stops_with_failure(api: ApiClient, runtime: Runtime) -> None:
    script(runtime, ScriptedTurn(text="partial ", error=ProviderInvalidRequest("bad request")))
    rid = (await api.start("go", model="scripted"))["requestId"]
    events = await api.segment(rid)
    stop = stop_reason(events)
    assert stop["reason"] == "failure" and stop["errorCode"] == "LLM_INVALID_REQUEST"
    assert "bad request" in stop["message"]
    assert events[-1]["data"]["errorCode"] == "LLM_INVALID_REQUEST"


async def test_a_run_over_its_budget_stops_with_budget_stop(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.config.prompt_budget = 1000
    model = ScriptedModel([ScriptedTurn(text="summary")], count_tokens=lambda request: 5000)
    runtime.models.register("counted", model)
    events = await api.segment((await api.start("more", model="counted"))["requestId"])
    assert "compacting" in phases(events)
    stop = stop_reason(events)
    assert stop["reason"] == "budget_stop" and "budget" in stop["message"]
    assert events[-1]["eventType"] == "MESSAGE_FAILED"


async def test_a_suspended_run_says_so_and_its_resumed_segment_decides_again(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "data.txt").write_text("forty-two")
    runtime.config.permission_rules = [
        PermissionRule.model_validate({"tool": "read_file", "action": "ask"})
    ]
    script(
        runtime,
        ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "data.txt"})]),
        ScriptedTurn(text="forty-two"),
    )
    rid = (await api.start("read data.txt", model="scripted"))["requestId"]
    first = await api.segment(rid)
    stop = stop_reason(first)
    assert stop["reason"] == "suspend" and stop["suspendType"] == "PERMISSION_ASK"
    assert progress(first) == [], "the step has not ended while its call waits"
    assert (await api.resume(rid, approved=True)).status_code == 200
    rest = await api.segment(rid, first[-1]["seq"])
    assert phases(rest)[0] == "running_tools"
    assert [p["toolResults"] for p in progress(rest)] == [1, 0]
    assert stop_reason(rest)["reason"] == "stop"
