"""Provider failures: automatic retries with AGENT_STATUS, no duplicated text, LLM_ERROR at the end."""

from __future__ import annotations

from typing import Any

from neta_jupyter.providers import (
    ProviderUnavailable,
    RateLimited,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
)
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, types


def script(runtime: Runtime, *turns: ScriptedTurn) -> ScriptedModel:
    runtime.config.retry_base_delay = 0.01
    model = ScriptedModel(list(turns))
    runtime.models.register("scripted", model)
    return model


def statuses(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["eventType"] == "AGENT_STATUS"]


def answer(events: list[dict[str, Any]]) -> str:
    return "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")


async def test_rate_limit_honours_retry_after(api: ApiClient, runtime: Runtime) -> None:
    script(
        runtime,
        ScriptedTurn(error=RateLimited("429 Too Many Requests", retry_after=0.2)),
        ScriptedTurn(text="Hello after waiting."),
    )
    events = await api.segment((await api.start("hi", model="scripted"))["requestId"])
    [status] = statuses(events)
    assert status["code"] == "LLM_RATE_LIMITED" and status["level"] == "WARN"
    assert status["attributes"] == {"attempt": 1, "maxRetries": 3, "backoffMs": 200}
    assert answer(events) == "Hello after waiting."
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"


async def test_network_failure_before_output_retries(api: ApiClient, runtime: Runtime) -> None:
    script(
        runtime,
        ScriptedTurn(error=ProviderUnavailable("connect failed", network_error=True)),
        ScriptedTurn(error=ProviderUnavailable("connect failed", network_error=True)),
        ScriptedTurn(text="Reached it."),
    )
    events = await api.segment((await api.start("hi", model="scripted"))["requestId"])
    codes = [s["code"] for s in statuses(events)]
    assert codes == ["LLM_NETWORK_RETRYING", "LLM_NETWORK_RETRYING"]
    assert [s["attributes"]["attempt"] for s in statuses(events)] == [1, 2]
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"


async def test_stream_cut_after_output_continues_without_duplicating(
    api: ApiClient, runtime: Runtime
) -> None:
    script(
        runtime,
        ScriptedTurn(
            reasoning="Let me think.",
            text=["The answer ", "is "],
            error=ProviderUnavailable("stream reset", network_error=True),
        ),
        ScriptedTurn(reasoning="Let me think.", text=["The answer ", "is ", "42."]),
    )
    events = await api.segment((await api.start("q", model="scripted"))["requestId"])
    assert [s["code"] for s in statuses(events)] == ["LLM_AUTO_RECOVERING"]
    assert statuses(events)[0]["attributes"] == {"attempt": 1, "maxAttempts": 3}
    assert answer(events) == "The answer is 42."
    reasoning = "".join(e["data"]["text"] for e in events if e["eventType"] == "REASONING_DELTA")
    assert reasoning == "Let me think."
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"


async def test_cut_tool_call_keeps_its_id(api: ApiClient, runtime: Runtime) -> None:
    call = ScriptedToolCall("list_files", {"path": "."}, id="first-id")
    script(
        runtime,
        ScriptedTurn(tool_calls=[call], error=ProviderUnavailable("reset", network_error=True)),
        ScriptedTurn(tool_calls=[ScriptedToolCall("list_files", {"path": "."}, id="second-id")]),
        ScriptedTurn(text="Listed."),
    )
    events = await api.segment((await api.start("ls", model="scripted"))["requestId"])
    ids = {e["data"]["toolCallId"] for e in events if e["data"].get("type") == "tool"}
    assert ids == {"first-id"}
    generating = "".join(
        e["data"].get("arguments", "") for e in events if e["eventType"] == "TOOL_CALL_GENERATING"
    )
    assert generating == '{"path": "."}'


async def test_empty_reply_is_retried(api: ApiClient, runtime: Runtime) -> None:
    script(runtime, ScriptedTurn(), ScriptedTurn(text="Now with content."))
    events = await api.segment((await api.start("hi", model="scripted"))["requestId"])
    [status] = statuses(events)
    assert status["code"] == "LLM_EMPTY_RESPONSE_RETRYING"
    assert status["attributes"] == {"attempt": 1, "maxRetries": 3}
    assert answer(events) == "Now with content."


async def test_exhausted_retries_fail_recoverably_and_retry_task_works(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.config.llm_max_retries = 2
    down = ScriptedTurn(error=ProviderUnavailable("503 overloaded"))
    model = script(runtime, down, down, down, ScriptedTurn(text="Back again."))
    rid = (await api.start("hi", model="scripted"))["requestId"]
    first = await api.segment(rid)
    assert [s["code"] for s in statuses(first)] == ["LLM_NETWORK_RETRYING"] * 2
    assert first[-1]["eventType"] == "MESSAGE_FAILED"
    assert (
        first[-1]["data"]["errorCode"] == "LLM_ERROR" and first[-1]["data"]["recoverable"] is True
    )
    assert (await api.post("retryTask", {"requestId": rid})).status_code == 200
    second = await api.segment(rid, first[-1]["seq"])
    assert answer(second) == "Back again." and second[-1]["eventType"] == "MESSAGE_COMPLETED"
    model.assert_complete()


async def test_consecutive_failing_tool_steps_inject_a_reminder(
    api: ApiClient, runtime: Runtime
) -> None:
    bad = ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "missing.txt"})])
    model = script(runtime, bad, bad, bad, ScriptedTurn(text="The file does not exist."))
    events = await api.segment((await api.start("read missing.txt", model="scripted"))["requestId"])
    [status] = statuses(events)
    assert status["code"] == "TOOL_CONSECUTIVE_FAILURES"
    assert status["attributes"] == {"failedSteps": 3, "maxFailedSteps": 3}
    assert "Do not repeat the same call" in model.requests[3].messages[-1].content
    assert types(events).count("TOOL_FAILED") == 3
    tree_user_messages = [m.content for m in model.requests[3].messages if m.role == "user"]
    assert tree_user_messages[0] == "read missing.txt"
