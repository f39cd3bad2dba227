"""Anthropic Messages streaming over real HTTP against a loopback server replaying vendor bytes."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import pytest

from neta_jupyter.providers.anthropic import AnthropicModel
from neta_jupyter.providers.base import (
    AuthenticationRequired,
    ContextTooLong,
    Image,
    Message,
    ModelRequest,
    ProviderError,
    ProviderInvalidRequest,
    ProviderUnavailable,
    RateLimited,
    ReasoningPart,
    StreamPart,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolDefinition,
    UsagePart,
)
from tests.provider_server import ProviderServer, Reply, fixture_bytes, guarded_client, serve

KEY = "sk-ant-api03-test-Zk1m2n3b4v5c6x7SECRET"
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"

server = pytest.fixture(serve)
client = pytest.fixture(guarded_client)


@pytest.fixture(autouse=True)
def forget_signatures() -> Iterator[None]:
    AnthropicModel._signed.clear()
    yield
    AnthropicModel._signed.clear()


READ_FILE = ToolDefinition(
    "read_file",
    "Read a text file under the notebook root.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
CONVERSATION = ModelRequest(
    system="You are neta.",
    messages=[
        Message("user", "What is in notes?"),
        Message(
            "assistant",
            "Let me look.",
            tool_calls=[
                ToolCall("toolu_1", "read_file", '{"path": "notes/a.csv"}'),
                ToolCall("toolu_2", "list_files", ""),
            ],
        ),
        Message("tool", "x,y\n1,2\n", tool_call_id="toolu_1", name="read_file"),
        Message("tool", "", tool_call_id="toolu_2", name="list_files"),
        Message("user", "Also: keep it short."),
    ],
    tools=[READ_FILE],
)
ARGS = {"path": 'notes/café "v2".txt', "max_bytes": 2000}
THINKING_REPLY: list[StreamPart] = [
    ReasoningPart("The user wants "),
    ReasoningPart("the notes file; "),
    ReasoningPart("read it first."),
    TextPart("Reading it now."),
    ToolCallPart(0, id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="read_file", arguments=""),
    ToolCallPart(0, arguments='{"pa'),
    ToolCallPart(0, arguments='th": "not'),
    ToolCallPart(0, arguments="es/caf\\u0"),
    ToolCallPart(0, arguments="0e9 \\"),
    ToolCallPart(0, arguments='"v2\\'),
    ToolCallPart(0, arguments='".txt", "max_'),
    ToolCallPart(0, arguments='bytes": 20'),
    ToolCallPart(0, arguments="00}"),
    ToolCallPart(1, id="toolu_01Pq7ZrVjD2o9h3tJ8Ww5sKc", name="list_files", arguments=""),
    ToolCallPart(1, arguments="{}"),
    UsagePart(input_tokens=210 + 2048 + 96, output_tokens=187, cached_tokens=2048),
]


def model(server: ProviderServer, client: httpx.AsyncClient, **options: object) -> AnthropicModel:
    return AnthropicModel(
        "claude-sonnet-4-5",
        base_url=server.url,
        api_key=KEY,
        client=client,
        **options,  # type: ignore[arg-type]
    )


async def collect(
    claude: AnthropicModel, request: ModelRequest = CONVERSATION
) -> tuple[list[StreamPart], ProviderError | None]:
    parts: list[StreamPart] = []
    error: ProviderError | None = None
    try:
        async for part in claude.stream(request):
            parts.append(part)
    except ProviderError as exc:
        error = exc
    assert KEY not in str(error) and KEY not in repr(error)
    return parts, error


async def test_text_stream_with_ping_and_the_request_it_sent(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    server.reply(Reply.stream("anthropic_text"))
    parts, error = await collect(model(server, client))
    assert error is None
    assert parts == [
        TextPart("Bonjour"),
        TextPart(", Zoë"),
        TextPart("! The file has 2 rows."),
        UsagePart(input_tokens=472, output_tokens=15),
    ]
    [received] = server.requests
    assert received.path == "/v1/messages"
    assert received.headers["x-api-key"] == KEY
    assert received.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in received.headers
    assert received.raw.count(KEY) == 1
    assert received.json == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "stream": True,
        "system": "You are neta.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is in notes?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "read_file",
                        "input": {"path": "notes/a.csv"},
                    },
                    {"type": "tool_use", "id": "toolu_2", "name": "list_files", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x,y\n1,2\n"},
                    {"type": "tool_result", "tool_use_id": "toolu_2"},
                    {"type": "text", "text": "Also: keep it short."},
                ],
            },
        ],
        "tools": [
            {
                "name": "read_file",
                "description": "Read a text file under the notebook root.",
                "input_schema": READ_FILE.parameters,
            }
        ],
    }


@pytest.mark.parametrize("chunk_size", [None, 1, 7], ids=["per-event", "1-byte", "7-byte"])
async def test_thinking_and_tool_use_with_fragments_split_inside_escapes(
    server: ProviderServer, client: httpx.AsyncClient, chunk_size: int | None
) -> None:
    server.reply(Reply.stream("anthropic_thinking_tool_use", chunk_size=chunk_size))
    parts, error = await collect(model(server, client))
    assert error is None
    assert parts == THINKING_REPLY
    first = "".join(p.arguments for p in parts if isinstance(p, ToolCallPart) and p.index == 0)
    second = "".join(p.arguments for p in parts if isinstance(p, ToolCallPart) and p.index == 1)
    assert json.loads(first) == ARGS and json.loads(second) == {}


async def test_signed_thinking_is_sent_back_while_the_tool_loop_is_open(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    claude = model(server, client, thinking_budget=2048)
    server.reply(Reply.stream("anthropic_thinking_tool_use"), Reply.stream("anthropic_text"))
    first, _ = await collect(claude, ModelRequest("", [Message("user", "notes?")], [READ_FILE]))
    assert first == THINKING_REPLY
    assert server.requests[0].json["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert server.requests[0].json["max_tokens"] == 4096
    calls = [
        ToolCall("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "read_file", json.dumps(ARGS)),
        ToolCall("toolu_01Pq7ZrVjD2o9h3tJ8Ww5sKc", "list_files", "{}"),
    ]
    follow_up = ModelRequest(
        system="",
        messages=[
            Message("user", "What is in notes?"),
            Message(
                "assistant",
                "Reading it now.",
                tool_calls=calls,
                reasoning="The user wants the notes file; read it first.",
            ),
            Message("tool", "a,b", tool_call_id=calls[0].id),
            Message("tool", "a.csv", tool_call_id=calls[1].id),
        ],
        tools=[],
    )
    await collect(claude, follow_up)
    body = server.requests[1].json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "system" not in body and "tools" not in body
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {
        "type": "thinking",
        "thinking": "The user wants the notes file; read it first.",
        "signature": SIGNATURE,
    }
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use", "tool_use"]

    # After a restart the signature is gone: that request goes without thinking, not to a 400.
    AnthropicModel._signed.clear()
    server.reply(Reply.stream("anthropic_text"))
    await collect(claude, follow_up)
    assert "thinking" not in server.requests[2].json


async def test_overloaded_error_event_after_partial_output(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    server.reply(Reply.stream("anthropic_overloaded"))
    parts, error = await collect(model(server, client))
    assert parts == [TextPart("Partial")]
    assert type(error) is ProviderUnavailable
    assert error.recoverable and not error.network_error
    assert "Overloaded" in str(error)


async def test_invalid_request_error_event(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    server.reply(Reply.stream("anthropic_invalid_midstream"))
    parts, error = await collect(model(server, client))
    assert parts == []
    assert type(error) is ProviderInvalidRequest
    assert "Expected `thinking` or `redacted_thinking`" in str(error)


async def test_429_is_rate_limited_with_retry_after(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    body = {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded"},
    }
    server.reply(Reply.error(429, body, {"retry-after": "12"}))
    _, error = await collect(model(server, client))
    assert isinstance(error, RateLimited) and error.retry_after == 12.0


@pytest.mark.parametrize("status", [500, 529])
async def test_overloaded_and_api_errors_are_unavailable(
    server: ProviderServer, client: httpx.AsyncClient, status: int
) -> None:
    kind = "overloaded_error" if status == 529 else "api_error"
    server.reply(Reply.error(status, {"type": "error", "error": {"type": kind, "message": "x"}}))
    _, error = await collect(model(server, client))
    assert type(error) is ProviderUnavailable and not error.network_error
    # Overload passes; an internal error may hit the same request every time, so an identical
    # repeat of it is not retried.
    assert error.transient is (status == 529)


async def test_prompt_too_long_is_context_too_long(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208326 tokens > 200000 maximum",
        },
    }
    server.reply(Reply.error(400, body))
    _, error = await collect(model(server, client))
    assert isinstance(error, ContextTooLong)
    assert "208326 tokens > 200000 maximum" in str(error)


async def test_invalid_request_carries_the_provider_message(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
    }
    server.reply(Reply.error(400, body))
    _, error = await collect(model(server, client))
    assert type(error) is ProviderInvalidRequest
    assert "max_tokens: Field required" in str(error)


async def test_authentication_failure_names_the_variable_never_the_key(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    server.reply(Reply.error(401, body))
    _, error = await collect(model(server, client))
    # A refused key is also told to the user, naming the variable that holds it.
    assert type(error) is AuthenticationRequired and error.variable == "ANTHROPIC_API_KEY"
    assert "authentication failed" in str(error) and "ANTHROPIC_API_KEY" in str(error)


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "close-delimited"])
async def test_connection_dropped_mid_stream(
    server: ProviderServer, client: httpx.AsyncClient, chunked: bool
) -> None:
    body = fixture_bytes("anthropic_thinking_tool_use")
    cut = body.index(b"Reading it now.")
    server.reply(Reply.stream("anthropic_thinking_tool_use", cut_after=cut, chunked=chunked))
    parts, error = await collect(model(server, client))
    assert parts == THINKING_REPLY[:3]
    assert type(error) is ProviderUnavailable and error.network_error


async def test_stream_ending_before_message_stop(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    body = fixture_bytes("anthropic_text")
    server.reply(Reply(body=body[: body.index(b"event: message_stop")]))
    parts, error = await collect(model(server, client))
    assert parts == [TextPart("Bonjour"), TextPart(", Zoë"), TextPart("! The file has 2 rows.")]
    assert type(error) is ProviderUnavailable and error.network_error


async def test_env_variables_and_no_key_in_repr(
    server: ProviderServer, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    claude = AnthropicModel("claude-haiku-4-5", client=client, thinking_budget=1024)
    assert KEY not in repr(claude) and "sk-" not in repr(claude)
    assert repr(claude) == (
        f"AnthropicModel('claude-haiku-4-5', base_url='{server.url}', "
        "name='anthropic:claude-haiku-4-5', thinking_budget=1024)"
    )
    server.reply(Reply.stream("anthropic_text"))
    _, error = await collect(claude)
    assert error is None
    assert server.requests[0].headers["x-api-key"] == KEY
    assert server.requests[0].json["max_tokens"] == 4096


def test_thinking_budget_below_the_minimum_is_refused() -> None:
    with pytest.raises(ValueError, match="1024"):
        AnthropicModel("claude-sonnet-4-5", api_key="", thinking_budget=100)


@pytest.mark.parametrize(
    ("level", "budget"), [(None, 2048), ("low", 1024), ("high", 16384), ("off", None)]
)
async def test_thinking_level_overrides_the_endpoint_budget(
    server: ProviderServer, client: httpx.AsyncClient, level: str | None, budget: int | None
) -> None:
    claude = model(server, client, thinking_budget=2048)
    server.reply(Reply.stream("anthropic_text"))
    request = ModelRequest("", [Message("user", "hi")], [], thinking=level)  # type: ignore[arg-type]
    await collect(claude, request)
    sent = server.requests[0].json
    if budget is None:
        assert "thinking" not in sent and sent["max_tokens"] == 4096
    else:
        assert sent["thinking"] == {"type": "enabled", "budget_tokens": budget}
        assert sent["max_tokens"] == max(4096, budget + 1024)


async def test_an_attached_picture_is_sent_as_an_image_block(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    picture = Image("image/png", b"\x89PNG\r\n\x1a\nfake")
    request = ModelRequest(
        system="",
        messages=[Message("user", "What is in the plot?", images=[picture])],
        tools=[],
    )
    server.reply(Reply.stream("anthropic_text"))
    _, error = await collect(model(server, client), request)
    assert error is None
    [received] = server.requests
    assert received.json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in the plot?"},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/png",
                        "data": base64.b64encode(picture.data).decode(),
                    },
                },
            ],
        }
    ]
