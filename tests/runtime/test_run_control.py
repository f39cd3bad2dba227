"""Run control through the public API: deny, terminate, input, max steps, timeout, retry,
virtual tools, attachments, imported runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import (
    ProviderUnavailable,
    ScriptedToolCall,
    ScriptedTurn,
)
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import ToolContext, tool
from neta_jupyter.tools.values import ToolFile, ToolResult
from tests.helpers import ApiClient, script, types


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {
        "permission_rules": [{"tool": "read_file", "args": {"path": "secret*"}, "action": "ask"}]
    }


async def test_denied_call_is_reported_to_the_model_which_carries_on(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "secret.txt").write_text("the password")
    model = script(
        runtime,
        ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "secret.txt"})]),
        ScriptedTurn(text="I could not read it, so here is what I know."),
    )
    rid = (await api.start("read secret.txt", model="scripted"))["requestId"]
    first = await api.segment(rid)
    ask = next(e for e in first if e["eventType"] == "PERMISSION_ASK")["data"]
    assert ask["rulePattern"] == "read_file path=secret*"
    assert (await api.resume(rid, approved=False, askId=ask["askId"])).status_code == 200
    second = await api.segment(rid, first[-1]["seq"])
    names = types(second)
    assert names[0] == "PERMISSION_ASK_RESOLVED" and second[0]["data"]["approved"] is False
    assert "TOOL_START" not in names
    failed = next(e for e in second if e["eventType"] == "TOOL_FAILED")["data"]
    assert "denied" in failed["errorMessage"]
    assert names[-1] == "MESSAGE_COMPLETED"
    tool_message = model.requests[1].messages[-1]
    assert tool_message.role == "tool" and "denied" in tool_message.content
    assert "the password" not in json.dumps(second)
    model.assert_complete()


async def test_always_allow_is_remembered_for_the_session(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "secret.txt").write_text("s3")
    call = ScriptedToolCall("read_file", {"path": "secret.txt"})
    script(
        runtime,
        ScriptedTurn(tool_calls=[call]),
        ScriptedTurn(text="done"),
        ScriptedTurn(tool_calls=[call]),
        ScriptedTurn(text="done again"),
    )
    rid = (await api.start("one", model="scripted", sessionName="nb.ipynb"))["requestId"]
    first = await api.segment(rid)
    ask = next(e for e in first if e["eventType"] == "PERMISSION_ASK")["data"]
    await api.resume(rid, approved=True, always=True, askId=ask["askId"])
    second = await api.segment(rid, first[-1]["seq"])
    assert second[0]["data"]["resolveType"] == "always"
    rid2 = (await api.start("two", model="scripted", sessionName="nb.ipynb"))["requestId"]
    names = types(await api.segment(rid2))
    assert "PERMISSION_ASK" not in names and "TOOL_COMPLETED" in names
    assert names[-1] == "MESSAGE_COMPLETED"


async def test_terminate_mid_stream(api: ApiClient, runtime: Runtime) -> None:
    script(runtime, ScriptedTurn(text=["tok "] * 2000, delay=0.005))
    rid = (await api.start("go", model="scripted"))["requestId"]
    partial = await api.frames(rid, limit=20)
    assert len(partial) == 20
    response = await api.post("terminateTask", {"requestId": rid})
    assert response.status_code == 200 and response.json()["status"] == "failed"
    events = await api.segment(rid)
    assert events[-1]["eventType"] == "MESSAGE_FAILED"
    assert events[-1]["data"]["errorCode"] == "USER_CANCELLED"
    assert events[-1]["data"]["recoverable"] is False
    assert sum(e["eventType"].startswith("MESSAGE_") for e in events) == 1
    assert len([e for e in events if e["eventType"] == "TEXT_DELTA"]) < 2000
    again = await api.post("terminateTask", {"requestId": rid})
    assert again.status_code == 409 and again.json()["errCode"] == "RUN_NOT_ACTIVE"


async def test_supplementary_input_is_injected_at_the_next_step(
    api: ApiClient, runtime: Runtime
) -> None:
    model = script(
        runtime,
        ScriptedTurn(
            reasoning=["thinking "] * 60,
            delay=0.05,  # three seconds to add the input while the first step streams
            tool_calls=[ScriptedToolCall("list_files", {})],
        ),
        ScriptedTurn(text="Noted: use the median."),
    )
    rid = (await api.start("describe the data", model="scripted"))["requestId"]
    await api.frames(rid, limit=5)
    response = await api.post(
        "addSupplementaryInput", {"requestId": rid, "content": "use the median"}
    )
    assert response.status_code == 200
    input_id = response.json()["inputId"]
    events = await api.segment(rid)
    consumed = [e for e in events if e["eventType"] == "SUPPLEMENTARY_INPUT_CONSUMED"]
    assert len(consumed) == 1 and consumed[0]["data"]["inputId"] == input_id
    assert consumed[0]["data"]["content"] == "use the median"
    names = types(events)
    assert names.index("SUPPLEMENTARY_INPUT_CONSUMED") > names.index("TOOL_COMPLETED")
    assert names.index("SUPPLEMENTARY_INPUT_CONSUMED") < names.index("TEXT_START")
    assert [m.content for m in model.requests[1].messages if m.role == "user"][
        -1
    ] == "use the median"


async def test_max_steps_ends_with_synthetic_text(api: ApiClient, runtime: Runtime) -> None:
    call = ScriptedToolCall("list_files", {})
    model = script(runtime, ScriptedTurn(tool_calls=[call]), ScriptedTurn(tool_calls=[call]))
    rid = (await api.start("loop forever", model="scripted", maxSteps=2))["requestId"]
    events = await api.segment(rid)
    starts = [e for e in events if e["eventType"] == "TEXT_START"]
    assert len(starts) == 1 and starts[0]["data"]["synthetic"] is True
    assert "2 steps" in starts[0]["data"]["text"]
    final = events[-1]["data"]
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED" and final["finishReason"] == "MAX_STEPS"
    assert final["finishMessage"] == starts[0]["data"]["text"]
    model.assert_complete()
    tree = (
        await api.http.get(
            "neta/api/sessions/tree", params={"sessionId": events[0]["data"]["sessionId"]}
        )
    ).json()
    assert tree["entries"][-1]["message"]["content"] == starts[0]["data"]["text"]


async def test_task_timeout(api: ApiClient, runtime: Runtime) -> None:
    runtime.config.task_timeout = 0.3
    script(runtime, ScriptedTurn(text=["slow "] * 100, delay=0.05))
    rid = (await api.start("take your time", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert events[-1]["eventType"] == "MESSAGE_FAILED"
    assert events[-1]["data"]["errorCode"] == "TASK_TIMEOUT"
    assert events[-1]["data"]["recoverable"] is False


async def test_retry_after_recoverable_failure_does_not_rerun_finished_tools(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "a.txt").write_text("alpha")
    runtime.config.llm_max_retries = 0  # fail at once, so the client retries
    model = script(
        runtime,
        ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "a.txt"}, id="call_read")]),
        ScriptedTurn(
            text="partial ", error=ProviderUnavailable("upstream reset", network_error=True)
        ),
        ScriptedTurn(text="The file says alpha."),
    )
    rid = (await api.start("read a.txt", model="scripted"))["requestId"]
    first = await api.segment(rid)
    failed = first[-1]["data"]
    assert first[-1]["eventType"] == "MESSAGE_FAILED"
    assert failed["errorCode"] == "LLM_ERROR" and failed["recoverable"] is True
    assert failed["networkError"] is True
    response = await api.post("retryTask", {"requestId": rid})
    assert response.status_code == 200, response.text
    second = await api.segment(rid, first[-1]["seq"])
    assert second[-1]["eventType"] == "MESSAGE_COMPLETED"
    all_events = first + second
    assert [e["seq"] for e in all_events] == list(range(len(all_events)))
    starts = [e for e in all_events if e["eventType"] == "TOOL_START"]
    assert len(starts) == 1, "the finished read_file call must not run again"
    read = [m.content for m in model.requests[1].messages if m.role == "tool"]
    assert len(read) == 1 and read[0].endswith("\nalpha"), read
    retried = model.requests[2].messages
    assert [m.content for m in retried if m.role == "tool"] == read
    model.assert_complete()
    again = await api.post("retryTask", {"requestId": rid})
    assert again.status_code == 409 and again.json()["errCode"] == "RUN_NOT_RETRYABLE"


async def test_invalid_request_failure_is_not_recoverable(api: ApiClient, runtime: Runtime) -> None:
    from neta_jupyter.providers import ProviderInvalidRequest

    script(runtime, ScriptedTurn(error=ProviderInvalidRequest("messages: bad role")))
    rid = (await api.start("hi", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert events[-1]["data"]["errorCode"] == "LLM_INVALID_REQUEST"
    assert events[-1]["data"]["recoverable"] is False


async def test_virtual_tools_follow_seed_003_section_8(api: ApiClient, runtime: Runtime) -> None:
    model = script(
        runtime,
        ScriptedTurn(
            tool_calls=[
                ScriptedToolCall("render_chart", {"kind": "bar"}, id="c1"),
                ScriptedToolCall("show_table", {}, id="c2"),
                ScriptedToolCall("silent", {}, id="c3"),
                ScriptedToolCall("render_chart", {"kind": 3}, id="c4"),
            ]
        ),
        ScriptedTurn(text="Rendered."),
    )
    virtual = [
        {
            "name": "render_chart",
            "description": "draw a chart",
            "mockResponse": "chart shown",
            "parameters": {
                "type": "object",
                "required": ["kind"],
                "properties": {"kind": {"type": "string"}},
            },
        },
        {"name": "show_table", "description": "show a table"},
        {"name": "silent", "mockResponse": ""},
    ]
    rid = (await api.start("chart it", model="scripted", virtualTools=virtual))["requestId"]
    events = await api.segment(rid)
    offered = {t.name for t in model.requests[0].tools}
    assert {"render_chart", "show_table", "silent"} <= offered
    by_call: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        if e["data"].get("type") == "tool":
            by_call.setdefault(e["data"]["toolCallId"], []).append(e)
    start = next(e for e in by_call["c1"] if e["eventType"] == "TOOL_START")
    assert json.loads(start["data"]["arguments"]) == {"kind": "bar"}
    outputs = {
        cid: next(
            (e["data"].get("output") for e in evs if e["eventType"] == "TOOL_COMPLETED"), None
        )
        for cid, evs in by_call.items()
    }
    assert outputs["c1"] == "chart shown"
    assert outputs["c2"] == '{"status":"success"}'
    assert outputs["c3"] == ""
    assert any(e["eventType"] == "TOOL_FAILED" for e in by_call["c4"])
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"


@tool(readonly=True)
async def make_report(ctx: ToolContext, rows: int = 3) -> ToolResult:
    """Write a CSV report."""
    body = "n,square\n" + "".join(f"{i},{i * i}\n" for i in range(rows))
    return ToolResult(
        f"wrote report.csv with {rows} rows",
        files=[ToolFile("report.csv", body.encode(), "text/csv")],
    )


async def test_produced_file_becomes_a_downloadable_attachment(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.tools.register(make_report)
    script(
        runtime,
        ScriptedTurn(tool_calls=[ScriptedToolCall("make_report", {"rows": 4})]),
        ScriptedTurn(text="Report ready."),
    )
    rid = (await api.start("make a report", model="scripted"))["requestId"]
    events = await api.segment(rid)
    names = types(events)
    assert names.index("ATTACHMENT_CHANGED") > names.index("TOOL_COMPLETED")
    att = next(e for e in events if e["eventType"] == "ATTACHMENT_CHANGED")["data"]
    assert att["fileName"] == "report.csv" and att["fileExtension"] == "csv"
    assert att["source"] == "AGENT_GENERATED" and att["changeType"] == "CREATED"
    response = await api.http.get(
        "neta/api/agent/attachment/download", params={"virtualPath": att["virtualPath"]}
    )
    assert response.status_code == 200
    assert response.content == b"n,square\n0,0\n1,1\n2,4\n3,9\n"
    assert att["fileSize"] == len(response.content)
    assert response.headers["content-type"].startswith("text/csv")
    missing = await api.http.get(
        "neta/api/agent/attachment/download", params={"virtualPath": "../../etc/passwd"}
    )
    assert missing.status_code == 404 and missing.json()["errCode"] == "ATTACHMENT_NOT_FOUND"


async def test_imported_run_stream_answers_409(api: ApiClient) -> None:
    response = await api.post("import", {"sessionName": "old", "content": "q?", "answer": "a."})
    assert response.status_code == 200
    rid = response.json()["requestId"]
    stream = await api.http.get("neta/api/agent/run/stream", params={"requestId": rid})
    assert stream.status_code == 409
    body = stream.json()
    assert body["errCode"] == "IMPORTED_RUN" and body["success"] is False
    assert body["httpStatusCode"] == 409 and body["requestId"] == rid
    tree = (
        await api.http.get(
            "neta/api/sessions/tree", params={"sessionId": response.json()["sessionId"]}
        )
    ).json()
    assert [e["message"]["content"] for e in tree["entries"]] == ["q?", "a."]


async def test_session_follow_up_sees_the_conversation_and_leaf_switch(
    api: ApiClient, runtime: Runtime
) -> None:
    model = script(
        runtime,
        ScriptedTurn(text="first answer"),
        ScriptedTurn(text="second answer"),
        ScriptedTurn(text="branch answer"),
    )
    one = await api.start("first question", model="scripted", sessionName="nb")
    await api.segment(one["requestId"])
    two = await api.start("second question", model="scripted", sessionName="nb")
    await api.segment(two["requestId"])
    assert two["sessionId"] == one["sessionId"]
    assert [m.content for m in model.requests[1].messages] == [
        "first question",
        "first answer",
        "second question",
    ]
    tree = (
        await api.http.get("neta/api/sessions/tree", params={"sessionId": one["sessionId"]})
    ).json()
    first_answer = tree["entries"][1]["entryId"]
    switched = await api.http.post(
        "neta/api/sessions/leaf", json={"sessionId": one["sessionId"], "leafEntryId": first_answer}
    )
    assert switched.status_code == 200 and switched.json()["activePath"][-1] == first_answer
    three = await api.start("branch question", model="scripted", sessionId=one["sessionId"])
    await api.segment(three["requestId"])
    assert [m.content for m in model.requests[2].messages] == [
        "first question",
        "first answer",
        "branch question",
    ]


async def test_busy_session_is_refused(api: ApiClient, runtime: Runtime) -> None:
    script(runtime, ScriptedTurn(text=["x "] * 500, delay=0.01))
    await api.start("long", model="scripted", sessionName="busy")
    response = await api.post("async", {"content": "again", "sessionName": "busy"})
    assert response.status_code == 409 and response.json()["errCode"] == "SESSION_BUSY"
    await asyncio.sleep(0)
