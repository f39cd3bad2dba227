"""Provider failures: automatic retries with AGENT_STATUS, no duplicated text, LLM_ERROR at the end."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from neta_jupyter.providers import (
    ProviderUnavailable,
    RateLimited,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
)
from neta_jupyter.providers.openai_compat import OpenAIChatModel
from neta_jupyter.runtime import Runtime
from neta_jupyter.widgets.transcript import RunDigest
from tests.helpers import ApiClient, types
from tests.provider_server import (
    ProviderServer,
    Received,
    Reply,
    guarded_client,
    like_llama_cpp,
    openai_stream,
    serve,
)


def script(runtime: Runtime, *turns: ScriptedTurn) -> ScriptedModel:
    runtime.config.retry_base_delay = 0.01
    model = ScriptedModel(list(turns))
    runtime.models.register("scripted", model)
    return model


def statuses(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["eventType"] == "AGENT_STATUS"]


def digest(events: list[dict[str, Any]]) -> RunDigest:
    folded = RunDigest()
    for event in events:
        folded.apply(event)
    return folded


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
    assert digest(events).segments == ["The answer is 42."], "one answer, in one piece"


@pytest.mark.parametrize(
    "again",
    [["It ", "is ", "42."], ["The ", "reply ", "differs."], ["The answer "], []],
    ids=["different", "different later", "shorter", "no text"],
)
async def test_a_cut_reply_that_comes_out_differently_replaces_the_cut_text(
    api: ApiClient, runtime: Runtime, again: list[str]
) -> None:
    script(
        runtime,
        ScriptedTurn(
            text=["The answer ", "is "], error=ProviderUnavailable("reset", network_error=True)
        ),
        ScriptedTurn(text=again, tool_calls=[] if again else [ScriptedToolCall("todo_nope")]),
        ScriptedTurn(text="Done."),
    )
    rid = (await api.start("q", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
    step_one = [e for e in events if e.get("step") == 1]
    assert [e["data"].get("replaces") for e in step_one if e["eventType"] == "TEXT_START"] == [
        None,
        True,
    ]
    shown = digest(step_one).text
    assert shown == "".join(again), "the cut-off text is gone, the new reply shows once"
    session = (await api.status(rid))["sessionId"]
    tree = (await api.http.get("neta/api/sessions/tree", params={"sessionId": session})).json()
    saved = [e["message"]["content"] for e in tree["entries"] if e["role"] == "assistant"]
    assert saved[0] == shown, "what clients show is what the conversation keeps"


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


# --- against a stand-in server that misbehaves like llama.cpp's ------------------------------

server = pytest.fixture(serve)
client = pytest.fixture(guarded_client)


def llama(runtime: Runtime, server: ProviderServer, client: httpx.AsyncClient) -> None:
    """``llama`` is an OpenAI-compatible model on the stand-in server."""
    runtime.config.retry_base_delay = 0.01
    model = OpenAIChatModel("qwen", base_url=f"{server.url}/v1", api_key="", client=client)
    runtime.models.register("llama", model)


def failures(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["errorMessage"] for e in events if e["eventType"] == "TOOL_FAILED"]


async def test_a_call_cut_off_mid_arguments_fails_and_is_never_sent_back(
    api: ApiClient, runtime: Runtime, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    llama(runtime, server, client)
    server.rules.append(like_llama_cpp)
    cut = [("call_a", "read_file", ['{"path": ', '"notes.tx'])]
    server.reply(
        Reply(body=openai_stream(calls=cut, finish_reason="length")),
        Reply(body=openai_stream(text=["The call was cut off; let me try again later."])),
    )
    events = await api.segment(
        (await api.start("What does notes.txt say?", model="llama"))["requestId"]
    )
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert statuses(events) == []
    assert len(server.requests) == 2
    [message] = failures(events)
    assert "not valid JSON" in message and "cut off" in message
    assistant, result = server.requests[1].json["messages"][-2:]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    assert result["tool_call_id"] == "call_a" and "not valid JSON" in result["content"]


async def test_a_server_error_that_blames_the_request_is_not_retried(
    api: ApiClient, runtime: Runtime, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    llama(runtime, server, client)
    message = "Failed to parse tool call arguments as JSON: parse error at line 1, column 9"
    server.rules.append(lambda _: Reply.error(500, {"error": {"code": 500, "message": message}}))
    events = await api.segment((await api.start("hi", model="llama"))["requestId"])
    assert statuses(events) == []
    assert len(server.requests) == 1
    failed = events[-1]["data"]
    assert failed["errorCode"] == "LLM_INVALID_REQUEST" and failed["recoverable"] is False
    assert message in failed["errorMessage"]


async def test_a_request_that_failed_the_same_way_twice_is_not_sent_a_third_time(
    api: ApiClient, runtime: Runtime, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    llama(runtime, server, client)
    body = {"error": {"code": 500, "message": "got exception: vector::_M_range_check"}}
    server.rules.append(lambda _: Reply.error(500, body))
    events = await api.segment((await api.start("hi", model="llama"))["requestId"])
    assert len(server.requests) == 2
    [status] = statuses(events)
    assert status["code"] == "LLM_NETWORK_RETRYING"
    assert "Could not reach" not in status["message"] and "HTTP 500" in status["message"]
    failed = events[-1]["data"]
    assert failed["errorCode"] == "LLM_ERROR" and failed["recoverable"] is True
    assert "failed the same way twice" in failed["errorMessage"]


async def test_one_reply_runs_at_most_sixteen_tool_calls(
    api: ApiClient, runtime: Runtime, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    llama(runtime, server, client)
    calls = [(f"call_{i}", "run_skill", [json.dumps({"name": f"step_{i}"})]) for i in range(120)]
    server.reply(Reply(body=openai_stream(calls=calls)), Reply(body=openai_stream(text=["Done."])))
    events = await api.segment(
        (await api.start("profile it", model="llama", approve="auto"))["requestId"]
    )
    started = [e["data"]["toolCallId"] for e in events if e["eventType"] == "TOOL_START"]
    assert started == [f"call_{i}" for i in range(16)]
    refused = [m for m in failures(events) if m.startswith("not run")]
    assert len(refused) == 104
    assert "made 120 tool calls, and at most 16 run in one step" in refused[0]
    results = [m for m in server.requests[1].json["messages"] if m["role"] == "tool"]
    assert len(results) == 120 and "at most 16 run" in results[-1]["content"]
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"


async def test_the_same_call_twice_in_one_reply_runs_once(
    api: ApiClient, runtime: Runtime, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    llama(runtime, server, client)
    calls = [(f"call_{i}", "list_files", ['{"path": "."}']) for i in range(5)]
    server.reply(Reply(body=openai_stream(calls=calls)), Reply(body=openai_stream(text=["Ok."])))
    events = await api.segment((await api.start("ls", model="llama"))["requestId"])
    assert [e["data"]["toolCallId"] for e in events if e["eventType"] == "TOOL_START"] == ["call_0"]
    assert len(failures(events)) == 4
    assert all("the same call (same tool, same arguments) as call_0" in m for m in failures(events))


async def test_a_model_repeating_one_call_is_told_and_the_run_ends(
    api: ApiClient, runtime: Runtime, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    llama(runtime, server, client)

    def same_call_again(received: Received) -> Reply:
        number = sum(m["role"] == "assistant" for m in received.json["messages"])
        calls = [(f"call_{number}", "list_files", ['{"path": "."}'])]
        return Reply(body=openai_stream(calls=calls))

    server.rules.append(same_call_again)
    events = await api.segment((await api.start("what files?", model="llama"))["requestId"])
    assert len(server.requests) == 4, "not the run's 20 steps"
    assert types(events).count("TOOL_START") == 3
    [status] = statuses(events)
    assert status["code"] == "TOOL_REPEATED_CALLS"
    assert status["attributes"] == {"repeats": 3, "maxRepeats": 3}
    reminder = server.requests[3].json["messages"][-1]
    assert reminder["role"] == "user" and "exactly the same tool call" in reminder["content"]
    done = events[-1]
    assert done["eventType"] == "MESSAGE_COMPLETED"
    assert done["data"]["finishReason"] == "REPEATED_TOOL_CALLS"
    [notice] = [e["data"] for e in events if e["eventType"] == "TEXT_START"]
    assert notice["synthetic"] is True
    assert "kept making the same tool call (list_files)" in notice["text"]
