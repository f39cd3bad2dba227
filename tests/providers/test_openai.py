"""OpenAI-compatible streaming over real HTTP against a loopback server replaying vendor bytes."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from neta_jupyter.providers import ModelRegistry
from neta_jupyter.providers.base import (
    AuthenticationRequired,
    ContextTooLong,
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
from neta_jupyter.providers.openai_compat import OpenAIChatModel
from tests.provider_server import (
    LoopbackOnlyTransport,
    NonLoopbackRequest,
    ProviderServer,
    Reply,
    fixture_bytes,
    guarded_client,
    like_a_looping_model,
    like_llama_cpp,
    serve,
)

KEY = "sk-test-4f9a1c77e2b84d0b9a5eSECRET"

server = pytest.fixture(serve)
client = pytest.fixture(guarded_client)

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
            "",
            tool_calls=[ToolCall("call_1", "read_file", '{"path": "notes/a.csv"}')],
            reasoning="I should look.",
        ),
        Message("tool", "x,y\n1,2\n", tool_call_id="call_1", name="read_file"),
        Message("assistant", "It has one row."),
        Message("user", "Thanks — and the other file?"),
    ],
    tools=[READ_FILE],
)
ARGS = {"path": 'notes/café "v2".txt', "max_bytes": 2000}


def model(server: ProviderServer, client: httpx.AsyncClient, **options: object) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-4.1-mini",
        base_url=f"{server.url}/v1",
        api_key=KEY,
        client=client,
        **options,  # type: ignore[arg-type]
    )


async def collect(
    chat: OpenAIChatModel, request: ModelRequest = CONVERSATION
) -> tuple[list[StreamPart], ProviderError | None]:
    parts: list[StreamPart] = []
    error: ProviderError | None = None
    try:
        async for part in chat.stream(request):
            parts.append(part)
    except ProviderError as exc:
        error = exc
    assert KEY not in str(error) and KEY not in repr(error)
    return parts, error


def assert_key_only_in_auth_header(server: ProviderServer) -> None:
    assert server.requests
    for received in server.requests:
        assert received.headers["authorization"] == f"Bearer {KEY}"
        assert received.raw.count(KEY) == 1


async def test_text_stream_and_the_request_it_sent(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    server.reply(Reply.stream("openai_text"))
    parts, error = await collect(model(server, client))
    assert error is None
    assert parts == [
        TextPart("Bonjour"),
        TextPart(", Zoë"),
        TextPart("! The file has 2 rows."),
        UsagePart(input_tokens=412, output_tokens=9, cached_tokens=0, reasoning_tokens=0),
    ]
    [received] = server.requests
    assert received.method == "POST" and received.path == "/v1/chat/completions"
    assert received.headers["accept"] == "text/event-stream"
    assert received.headers["content-type"] == "application/json"
    assert_key_only_in_auth_header(server)
    assert received.json == {
        "model": "gpt-4.1-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 4096,
        "messages": [
            {"role": "system", "content": "You are neta."},
            {"role": "user", "content": "What is in notes?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "notes/a.csv"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "x,y\n1,2\n"},
            {"role": "assistant", "content": "It has one row."},
            {"role": "user", "content": "Thanks — and the other file?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "description": "Read a text file under the notebook root.",
                    "parameters": READ_FILE.parameters,
                },
            }
        ],
    }


@pytest.mark.parametrize("chunk_size", [None, 1, 5], ids=["per-event", "1-byte", "5-byte"])
async def test_reasoning_and_tool_calls_with_fragments_split_inside_escapes(
    server: ProviderServer, client: httpx.AsyncClient, chunk_size: int | None
) -> None:
    server.reply(Reply.stream("openai_reasoning_tool_calls", chunk_size=chunk_size))
    parts, error = await collect(model(server, client))
    assert error is None
    assert parts == [
        ReasoningPart("The user wants "),
        ReasoningPart("the notes file; "),
        ReasoningPart("read it first."),
        ToolCallPart(0, id="call_6XkQ2", name="read_file", arguments=""),
        ToolCallPart(0, arguments='{"pa'),
        ToolCallPart(0, arguments='th": "not'),
        ToolCallPart(0, arguments="es/caf\\u0"),
        ToolCallPart(0, arguments="0e9 \\"),
        ToolCallPart(0, arguments='"v2\\'),
        ToolCallPart(0, arguments='".txt", "max_'),
        ToolCallPart(0, arguments='bytes": 20'),
        ToolCallPart(0, arguments="00}"),
        ToolCallPart(1, id="call_9Lm3", name="list_files", arguments="{}"),
        UsagePart(input_tokens=1830, output_tokens=96, cached_tokens=1024, reasoning_tokens=41),
    ]
    arguments = "".join(p.arguments for p in parts if isinstance(p, ToolCallPart) and p.index == 0)
    assert json.loads(arguments) == ARGS


async def test_reasoning_under_its_other_name(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    server.reply(Reply.stream("openai_reasoning_field"))
    parts, error = await collect(model(server, client))
    assert error is None
    assert parts == [
        ReasoningPart("Short "),
        ReasoningPart("thought."),
        TextPart("Done."),
        UsagePart(input_tokens=20, output_tokens=5),
    ]


async def test_empty_reply_gives_usage_only(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    server.reply(Reply.stream("openai_empty"))
    parts, error = await collect(model(server, client))
    assert error is None
    assert parts == [UsagePart(input_tokens=57, output_tokens=0)]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after-ms": "1500", "Retry-After": "2"}, 1.5),
        ({}, None),
    ],
)
async def test_429_is_rate_limited_with_retry_after(
    server: ProviderServer,
    client: httpx.AsyncClient,
    headers: dict[str, str],
    expected: float | None,
) -> None:
    body = {
        "error": {
            "message": "Rate limit reached for gpt-4.1-mini on tokens per min (TPM).",
            "type": "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    server.reply(Reply.error(429, body, headers))
    parts, error = await collect(model(server, client))
    assert parts == []
    assert isinstance(error, RateLimited)
    assert error.retry_after == expected
    assert error.recoverable and not error.network_error
    assert "Rate limit reached" in str(error)


async def test_exhausted_quota_is_not_retried(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    body = {"error": {"message": "You exceeded your current quota.", "code": "insufficient_quota"}}
    server.reply(Reply.error(429, body))
    _, error = await collect(model(server, client))
    assert type(error) is ProviderInvalidRequest
    assert "quota" in str(error)


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "close-delimited"])
async def test_connection_dropped_mid_stream(
    server: ProviderServer, client: httpx.AsyncClient, chunked: bool
) -> None:
    body = fixture_bytes("openai_reasoning_tool_calls")
    cut = body.index(b"es/caf")  # inside the seventh event
    server.reply(Reply.stream("openai_reasoning_tool_calls", cut_after=cut, chunked=chunked))
    parts, error = await collect(model(server, client))
    assert parts == [
        ReasoningPart("The user wants "),
        ReasoningPart("the notes file; "),
        ReasoningPart("read it first."),
        ToolCallPart(0, id="call_6XkQ2", name="read_file", arguments=""),
        ToolCallPart(0, arguments='{"pa'),
        ToolCallPart(0, arguments='th": "not'),
    ]
    assert isinstance(error, ProviderUnavailable) and not isinstance(error, RateLimited)
    assert error.network_error and error.recoverable


async def test_reply_without_a_body(server: ProviderServer, client: httpx.AsyncClient) -> None:
    server.reply(Reply(body=b"", chunked=False, cut_after=0))
    parts, error = await collect(model(server, client))
    assert parts == []
    assert isinstance(error, ProviderUnavailable) and error.network_error


async def test_error_reported_inside_the_stream(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    server.reply(Reply.stream("openai_stream_error"))
    parts, error = await collect(model(server, client))
    assert parts == [TextPart("Partial")]
    assert isinstance(error, ProviderUnavailable) and not error.network_error
    assert "overloaded" in str(error)


async def test_error_chunk_with_choices_after_text_that_mentions_error(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    server.reply(Reply.stream("openai_stream_error_with_choices"))
    parts, error = await collect(model(server, client))
    assert parts == [TextPart("Half an "), TextPart('"error" later')]
    assert type(error) is ProviderUnavailable and not error.network_error
    assert "Provider returned error" in str(error)


async def test_invalid_request_carries_the_provider_message(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    body = {
        "error": {
            "message": f"Invalid 'messages[2].tool_call_id': unknown id (sent with key {KEY}).",
            "type": "invalid_request_error",
            "param": "messages[2].tool_call_id",
            "code": None,
        }
    }
    server.reply(Reply.error(400, body))
    _, error = await collect(model(server, client))
    assert type(error) is ProviderInvalidRequest
    assert "Invalid 'messages[2].tool_call_id': unknown id" in str(error)
    assert not error.recoverable


@pytest.mark.parametrize("status", [404, 422])
async def test_other_client_errors_are_invalid_requests(
    server: ProviderServer, client: httpx.AsyncClient, status: int
) -> None:
    server.reply(Reply.error(status, {"detail": "The model `gpt-9` does not exist"}))
    _, error = await collect(model(server, client))
    assert type(error) is ProviderInvalidRequest
    assert "The model `gpt-9` does not exist" in str(error)


@pytest.mark.parametrize(
    "body",
    [
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 130412 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        {  # vLLM
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5120 tokens in the messages. Please reduce the length of the messages.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        {  # llama.cpp server
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        },
    ],
    ids=["openai", "vllm", "llama.cpp"],
)
async def test_context_overflow_is_context_too_long(
    server: ProviderServer, client: httpx.AsyncClient, body: dict[str, object]
) -> None:
    server.reply(Reply.error(400, body))
    _, error = await collect(model(server, client))
    assert isinstance(error, ContextTooLong)


@pytest.mark.parametrize("status", [401, 403])
async def test_authentication_failure_names_the_variable_never_the_key(
    server: ProviderServer, client: httpx.AsyncClient, status: int
) -> None:
    masked = f"{KEY[:8]}{'*' * 20}{KEY[-4:]}"
    body = {
        "error": {
            "message": f"Incorrect API key provided: {masked}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    server.reply(Reply.error(status, body))
    _, error = await collect(model(server, client))
    # A refused key is also told to the user, naming the variable that holds it.
    assert type(error) is AuthenticationRequired and error.variable == "OPENAI_API_KEY"
    assert "authentication failed" in str(error) and "OPENAI_API_KEY" in str(error)
    assert masked not in str(error) and KEY[-4:] + "." not in str(error)


@pytest.mark.parametrize("status", [500, 502, 503, 529])
async def test_server_errors_are_unavailable(
    server: ProviderServer, client: httpx.AsyncClient, status: int
) -> None:
    server.reply(Reply.error(status, "upstream connect error"))
    parts, error = await collect(model(server, client))
    assert parts == []
    assert type(error) is ProviderUnavailable
    assert error.recoverable and not error.network_error
    assert f"HTTP {status}" in str(error)


async def test_connect_error_is_a_network_error(client: httpx.AsyncClient) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chat = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, client=client)
    parts, error = await collect(chat)
    assert parts == []
    assert type(error) is ProviderUnavailable and error.network_error
    assert isinstance(error.__cause__, httpx.ConnectError)


async def test_read_timeout_is_a_network_error(server: ProviderServer) -> None:
    server.reply(Reply.stream("openai_text", delay=1.0))
    async with httpx.AsyncClient(
        transport=LoopbackOnlyTransport(), trust_env=False, timeout=httpx.Timeout(5.0, read=0.2)
    ) as quick:
        _, error = await collect(model(server, quick))
    assert type(error) is ProviderUnavailable and error.network_error
    assert "timed out" in str(error)


async def test_env_variables_like_the_official_client(
    server: ProviderServer, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1/")
    server.reply(Reply.stream("openai_text"))
    chat = OpenAIChatModel("gpt-4.1-mini", client=client)
    assert chat.base_url == f"{server.url}/v1"
    parts, error = await collect(chat)
    assert error is None and parts
    assert_key_only_in_auth_header(server)


async def test_no_key_sends_no_authorization(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    server.reply(Reply.stream("openai_text"))
    chat = OpenAIChatModel("llama3", base_url=f"{server.url}/v1", api_key="", client=client)
    _, error = await collect(chat)
    assert error is None
    assert "authorization" not in server.requests[0].headers


def test_output_limit_field_depends_on_the_server() -> None:
    request = ModelRequest("", [Message("user", "hi")], [], max_output_tokens=256)
    openai = OpenAIChatModel("o4-mini", base_url="https://api.openai.com/v1", api_key=KEY)
    local = OpenAIChatModel("qwen", base_url="http://127.0.0.1:8000/v1", api_key="")
    assert openai.request_body(request)["max_completion_tokens"] == 256
    assert local.request_body(request)["max_tokens"] == 256
    assert "tools" not in local.request_body(request), "no empty tool list"
    assert local.request_body(request)["messages"] == [{"role": "user", "content": "hi"}]


def test_repr_never_shows_the_key() -> None:
    chat = OpenAIChatModel("gpt-4.1-mini", base_url="http://127.0.0.1:1/v1", api_key=KEY)
    assert KEY not in repr(chat) and "sk-" not in repr(chat)
    assert repr(chat) == (
        "OpenAIChatModel('gpt-4.1-mini', base_url='http://127.0.0.1:1/v1', "
        "name='openai:gpt-4.1-mini')"
    )


async def test_the_test_client_cannot_leave_loopback(client: httpx.AsyncClient) -> None:
    chat = OpenAIChatModel(
        "gpt-4.1-mini", base_url="https://api.openai.com/v1", api_key=KEY, client=client
    )
    with pytest.raises(NonLoopbackRequest):
        await collect(chat)


@pytest.mark.parametrize(("level", "effort"), [("low", "low"), ("high", "high"), ("off", None)])
async def test_thinking_level_is_sent_as_reasoning_effort(
    server: ProviderServer, client: httpx.AsyncClient, level: str, effort: str | None
) -> None:
    server.reply(Reply.stream("openai_text"))
    request = ModelRequest("", [Message("user", "hi")], [], thinking=level)  # type: ignore[arg-type]
    await collect(model(server, client), request)
    assert server.requests[0].json.get("reasoning_effort") == effort


# --- as llama.cpp's server behaves --------------------------------------------------------------


async def test_a_server_error_that_blames_the_request_is_not_retryable(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    """llama.cpp answers HTTP 500 for a request it cannot parse; sending it again cannot help."""
    server.rules.append(like_llama_cpp)
    broken = ModelRequest(
        "",
        [
            Message("user", "What does notes.txt say?"),
            Message("assistant", "", tool_calls=[ToolCall("c1", "read_file", '{"path": "no')]),
            Message("tool", "Error: …", tool_call_id="c1", name="read_file"),
        ],
        [READ_FILE],
    )
    parts, error = await collect(model(server, client), broken)
    assert parts == []
    assert type(error) is ProviderInvalidRequest and not error.recoverable
    assert "HTTP 500" in str(error)
    assert "Failed to parse tool call arguments as JSON" in str(error)


@pytest.mark.parametrize(
    ("status", "transient"), [(500, False), (502, True), (503, True), (504, True), (529, True)]
)
async def test_only_server_errors_known_to_pass_count_as_transient(
    server: ProviderServer, client: httpx.AsyncClient, status: int, transient: bool
) -> None:
    body = {"error": {"code": status, "message": "got exception: vector", "type": "server_error"}}
    server.reply(Reply.error(status, body))
    _, error = await collect(model(server, client))
    assert type(error) is ProviderUnavailable and error.recoverable
    assert error.transient is transient


@pytest.mark.parametrize(
    ("settings", "cap"), [({}, 4096), ({"max_tokens": 64}, 64)], ids=["default", "configured"]
)
async def test_every_request_carries_an_output_cap(
    server: ProviderServer, client: httpx.AsyncClient, settings: dict[str, int], cap: int
) -> None:
    """A looping small model writes until something stops it: the request's cap, not its context."""
    server.rules.append(like_a_looping_model)
    endpoints = {"local": {"base_url": f"{server.url}/v1", **settings}}
    chat = ModelRegistry(endpoints=endpoints, http_client=client, environ={}).resolve("local:qwen")
    request = ModelRequest("", [Message("user", "Count the rows of data.csv")], [READ_FILE])
    parts = [part async for part in chat.stream(request)]
    assert server.requests[0].json["max_tokens"] == cap
    assert sum(isinstance(p, TextPart) for p in parts) == cap
    assert parts[-1] == UsagePart(input_tokens=100, output_tokens=cap)
