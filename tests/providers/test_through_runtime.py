"""Real providers through the runtime: vendor bytes in, the public event stream out."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from neta_jupyter.providers import ModelRegistry
from neta_jupyter.providers.anthropic import AnthropicModel
from neta_jupyter.runtime import Runtime, RuntimeConfig
from neta_jupyter.runtime.config import COMPACT_SYSTEM_PROMPT, COMPACT_TOOLS, DEFAULT_SYSTEM_PROMPT
from neta_jupyter.store import Store
from tests.provider_server import (
    ProviderServer,
    Received,
    Reply,
    guarded_client,
    openai_stream,
    serve,
)

KEY = "sk-test-e2e-77c1d0a9SECRET"
FILE_NAME = 'café "v2".txt'
FILE_TEXT = "a,b\n1,2\n"

server = pytest.fixture(serve)
client = pytest.fixture(guarded_client)

SHOWN = {
    "AGENT_STATUS",
    "REASONING_START",
    "REASONING_DELTA",
    "REASONING_END",
    "TOOL_CALL_GENERATING",
    "TOOL_START",
    "TOOL_COMPLETED",
    "TOOL_FAILED",
    "TEXT_START",
    "TEXT_DELTA",
    "TEXT_END",
    "MESSAGE_COMPLETED",
    "MESSAGE_FAILED",
}
EXPECTED_TYPES = [
    "REASONING_START",
    "REASONING_DELTA",
    "REASONING_DELTA",
    "REASONING_END",
    *["TOOL_CALL_GENERATING"] * 6,
    "TOOL_START",
    "TOOL_COMPLETED",
    "TEXT_START",
    "TEXT_DELTA",
    "TEXT_DELTA",
    "TEXT_DELTA",
    "TEXT_END",
    "MESSAGE_COMPLETED",
]
ARGUMENTS = '{"path": "caf\\u00e9 \\"v2\\".txt"}'


async def run_through_runtime(
    tmp_path: Path, registry: ModelRegistry, model: str
) -> list[dict[str, Any]]:
    (tmp_path / FILE_NAME).write_text(FILE_TEXT)
    store = Store(tmp_path / "db")
    runtime = Runtime(
        store,
        RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path, retry_base_delay=0.0),
        models=registry,
    )
    try:
        run = await runtime.start("owner", "What is in the café file?", model=model)
        await runtime.wait(run.request_id)
        events = [json.loads(e.payload) for e in await store.events.read_after(run.request_id, -1)]
    finally:
        store.close()
    assert KEY not in json.dumps(events)
    return [e for e in events if e["eventType"] in SHOWN]


def assert_tool_call_and_answer(events: list[dict[str, Any]], call_id: str) -> None:
    generating = [e["data"] for e in events if e["eventType"] == "TOOL_CALL_GENERATING"]
    assert generating[0]["toolCallId"] == call_id and generating[0]["toolName"] == "read_file"
    assert {g["toolCallId"] for g in generating} == {call_id}
    assert "".join(g["arguments"] or "" for g in generating) == ARGUMENTS
    start = next(e["data"] for e in events if e["eventType"] == "TOOL_START")
    assert start["toolCallId"] == call_id and json.loads(start["arguments"]) == {"path": FILE_NAME}
    completed = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert FILE_TEXT.strip() in completed["output"]
    reasoning = "".join(e["data"]["text"] for e in events if e["eventType"] == "REASONING_DELTA")
    assert reasoning == "Read the file first."
    text = "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")
    assert text == "Bonjour, Zoë! The file has 2 rows."


async def test_openai_compatible_endpoint_end_to_end(
    tmp_path: Path, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    registry = ModelRegistry(
        environ={"LOCAL_KEY": KEY},
        http_client=client,
        endpoints={
            "local": {
                "base_url": f"{server.url}/v1",
                "api_key_env": "LOCAL_KEY",
                "models": ["qwen2.5"],
            }
        },
    )
    server.reply(
        Reply.error(
            429, {"error": {"message": "slow down", "type": "requests"}}, {"Retry-After": "0"}
        ),
        Reply.stream("openai_e2e_tool_call", chunk_size=9),
        Reply.stream("openai_text"),
    )
    events = await run_through_runtime(tmp_path, registry, "local:qwen2.5")

    status = events[0]
    assert status["eventType"] == "AGENT_STATUS"
    assert status["data"]["code"] == "LLM_RATE_LIMITED"
    assert status["data"]["attributes"]["backoffMs"] == 0
    assert [e["eventType"] for e in events[1:]] == EXPECTED_TYPES
    assert_tool_call_and_answer(events, "call_e2e1")
    assert events[-1]["data"]["usage"] == {
        "promptTokens": 300 + 412,
        "completionTokens": 40 + 9,
        "cachedTokens": 128,
        "reasoningTokens": 12,
        "totalTokens": 300 + 412 + 40 + 9,
    }

    assert server.pending == 0 and len(server.requests) == 3
    for received in server.requests:
        assert received.headers["authorization"] == f"Bearer {KEY}"
        assert received.raw.count(KEY) == 1
    follow_up = server.requests[2].json["messages"]
    assistant, tool = follow_up[-2:]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_e2e1",
                "type": "function",
                "function": {"name": "read_file", "arguments": ARGUMENTS},
            }
        ],
    }
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_e2e1"
    assert FILE_TEXT.strip() in tool["content"]


async def test_anthropic_endpoint_end_to_end_with_thinking(
    tmp_path: Path, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    AnthropicModel._signed.clear()
    registry = ModelRegistry(
        environ={"CLAUDE_KEY": KEY},
        http_client=client,
        endpoints={
            "claude": {
                "kind": "anthropic",
                "base_url": server.url,
                "api_key_env": "CLAUDE_KEY",
                "thinking_budget": 1024,
            }
        },
    )
    server.reply(
        Reply.stream("anthropic_e2e_tool_use", chunk_size=11), Reply.stream("anthropic_text")
    )
    events = await run_through_runtime(tmp_path, registry, "claude:claude-sonnet-4-5")

    assert [e["eventType"] for e in events] == EXPECTED_TYPES
    assert_tool_call_and_answer(events, "toolu_e2e1")
    assert events[-1]["data"]["usage"] == {
        "promptTokens": (280 + 512) + 472,
        "completionTokens": 40 + 15,
        "cachedTokens": 512,
        "reasoningTokens": 0,
        "totalTokens": (280 + 512) + 472 + 40 + 15,
    }

    for received in server.requests:
        assert received.headers["x-api-key"] == KEY and received.raw.count(KEY) == 1
    second = server.requests[1].json
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assistant, results = second["messages"][-2:]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "Read the file first.",
        "signature": "ErUBCkYIBRgCIkB3c2lnbmF0dXJl",
    }
    assert assistant["content"][1] == {
        "type": "tool_use",
        "id": "toolu_e2e1",
        "name": "read_file",
        "input": {"path": FILE_NAME},
    }
    assert results["role"] == "user"
    assert results["content"][0]["type"] == "tool_result"
    assert results["content"][0]["tool_use_id"] == "toolu_e2e1"
    assert FILE_TEXT.strip() in results["content"][0]["content"]
    AnthropicModel._signed.clear()


async def test_invalid_request_fails_the_run_without_the_key(
    tmp_path: Path, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    registry = ModelRegistry(
        environ={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": f"{server.url}/v1"},
        http_client=client,
    )
    body = {"error": {"message": f"Invalid value for 'model' (key {KEY})", "code": None}}
    server.reply(Reply.error(400, body))
    events = await run_through_runtime(tmp_path, registry, "openai:gpt-nope")
    failed = events[-1]
    assert failed["eventType"] == "MESSAGE_FAILED"
    assert failed["data"]["errorCode"] == "LLM_INVALID_REQUEST"
    assert failed["data"]["recoverable"] is False
    assert "Invalid value for 'model'" in failed["data"]["errorMessage"]


async def test_a_file_read_in_parts_says_so_and_the_model_reads_on(
    tmp_path: Path, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    """A model takes what it sees for the whole file unless the result says it is a part."""
    rows = [f"{n},item {n},{n * 3}.50" for n in range(1, 2001)]
    text = "n,item,price\n" + "\n".join(rows) + "\n"
    registry = ModelRegistry(
        http_client=client, environ={}, endpoints={"local": {"base_url": f"{server.url}/v1"}}
    )

    def follows_the_hint(received: Received) -> Reply:
        results = [m["content"] for m in received.json["messages"] if m["role"] == "tool"]
        if len(results) == 2:
            return Reply(body=openai_stream(text=["The file has 2,001 lines."]))
        offset = re.search(r"offset=(\d+)", results[-1]) if results else None
        args = {"path": "sales.csv"} | ({"offset": int(offset[1])} if offset else {})
        calls = [(f"call_{len(results)}", "read_file", [json.dumps(args)])]
        return Reply(body=openai_stream(calls=calls))

    server.rules.append(follows_the_hint)
    (tmp_path / "sales.csv").write_text(text)
    await run_through_runtime(tmp_path, registry, "local:qwen")
    first, second = [
        m["content"] for m in server.requests[2].json["messages"] if m["role"] == "tool"
    ]
    head, body = first.split("\n", 1)
    shown = len(body.splitlines())
    assert head == (
        f"Only lines 1-{shown} of sales.csv, which has 2,001 lines ({len(text):,} bytes; a table: "
        "a header line and 2,000 rows, for sums or counts use python) in all. "
        f"Lines {shown + 1}-2001 are not shown: read on with read_file offset={shown + 1} "
        "(and limit for fewer lines):"
    )
    head, rest = second.split("\n", 1)
    assert head.startswith(f"Only lines {shown + 1}-")
    assert text.startswith(body + rest), "the second part goes on where the first stopped"
    assert "trimmed" not in first + second, "each part reaches the model whole"


@pytest.mark.parametrize(
    ("settings", "offered", "compact"),
    [
        ({"compact": True}, list(COMPACT_TOOLS), True),
        ({"tools": ["read_file", "python"]}, ["read_file"], False),
        (
            {},
            ["list_files", "read_file", "send_file", "clarify", "todo", "run_skill", "delegate"],
            False,
        ),
    ],
    ids=["compact", "tools", "default"],
)
async def test_an_endpoint_for_small_models_gets_a_short_prompt_and_few_tools(
    tmp_path: Path,
    server: ProviderServer,
    client: httpx.AsyncClient,
    settings: dict[str, Any],
    offered: list[str],
    compact: bool,
) -> None:
    """A small model drowns in eight tools and a long system prompt."""
    endpoints = {"local": {"base_url": f"{server.url}/v1", **settings}}
    registry = ModelRegistry(http_client=client, environ={}, endpoints=endpoints)
    server.reply(Reply(body=openai_stream(text=["Hello."])))
    await run_through_runtime(tmp_path, registry, "local:qwen")
    sent = server.requests[0].json
    # No kernel in this runtime: the kernel tools are never offered without one.
    kernel_free = [
        name for name in offered if name not in ("list_variables", "inspect_variable", "python")
    ]
    assert [t["function"]["name"] for t in sent["tools"]] == kernel_free
    system = sent["messages"][0]["content"]
    assert system.startswith(COMPACT_SYSTEM_PROMPT if compact else DEFAULT_SYSTEM_PROMPT)
