"""Model selection: ``provider:model`` strings, configured endpoints and where keys come from."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from neta_jupyter.providers import ModelProfile, ModelRegistry, UnknownModel
from neta_jupyter.providers.anthropic import AnthropicModel
from neta_jupyter.providers.base import AuthenticationRequired, Message, ModelRequest, TextPart
from neta_jupyter.providers.config import KeylessModel, parse_endpoints
from neta_jupyter.providers.demo import DemoModel
from neta_jupyter.providers.openai_compat import OpenAIChatModel
from tests.provider_server import ProviderServer, Reply, guarded_client, serve

OPENAI_KEY = "sk-proj-test-openai-0000SECRET"
LOCAL_KEY = "local-test-key-1111SECRET"

server = pytest.fixture(serve)
client = pytest.fixture(guarded_client)

LOCAL = {
    "local": {
        "kind": "openai",
        "base_url": "http://127.0.0.1:8000/v1",
        "api_key_env": "LOCAL_KEY",
        "models": ["qwen2.5"],
    }
}


def test_constructor_stays_backward_compatible() -> None:
    registry = ModelRegistry(demo_pace=0.0)
    assert isinstance(registry.resolve("demo"), DemoModel)
    registry.register("mine", DemoModel())
    assert registry.resolve("mine") is not None


def test_names_list_only_what_resolves_now() -> None:
    bare = ModelRegistry(environ={}, endpoints=LOCAL)
    assert bare.names() == ["demo"]
    keyed = ModelRegistry(
        environ={"OPENAI_API_KEY": OPENAI_KEY, "LOCAL_KEY": LOCAL_KEY}, endpoints=LOCAL
    )
    keyed.register("mine", DemoModel())
    assert keyed.names() == ["demo", "mine", "openai:*", "local:qwen2.5"]
    both = ModelRegistry(environ={"ANTHROPIC_API_KEY": "x", "OPENAI_API_KEY": "y"})
    assert both.names() == ["demo", "openai:*", "anthropic:*"]


def test_openai_models_from_the_environment() -> None:
    registry = ModelRegistry(environ={"OPENAI_API_KEY": OPENAI_KEY})
    model = registry.resolve("openai:gpt-4.1-mini")
    assert isinstance(model, OpenAIChatModel)
    assert model.name == "openai:gpt-4.1-mini" and model.model_name == "gpt-4.1-mini"
    assert model.base_url == "https://api.openai.com/v1"
    assert OPENAI_KEY not in repr(model)
    moved = ModelRegistry(
        environ={"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    )
    assert moved.resolve("openai:o4-mini").base_url == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]


def test_anthropic_models_from_the_environment() -> None:
    registry = ModelRegistry(environ={"ANTHROPIC_API_KEY": "sk-ant-x"})
    model = registry.resolve("anthropic:claude-sonnet-4-5")
    assert isinstance(model, AnthropicModel)
    assert model.base_url == "https://api.anthropic.com"
    assert model.name == "anthropic:claude-sonnet-4-5"


@pytest.mark.parametrize(
    ("spec", "variable"),
    [("openai:gpt-4.1-mini", "OPENAI_API_KEY"), ("anthropic:claude-opus-4", "ANTHROPIC_API_KEY")],
)
async def test_a_missing_key_is_a_clear_error_at_the_first_call(spec: str, variable: str) -> None:
    # The run starts, so its stream can tell the user which variable to set.
    model = ModelRegistry(environ={}).resolve(spec)
    with pytest.raises(
        AuthenticationRequired, match=f"set {variable} or configure c.NetaApp.endpoints"
    ) as raised:
        async for _ in model.stream(ModelRequest(system="", messages=[], tools=[])):
            pass
    assert raised.value.variable == variable and variable in raised.value.user_message


def test_configured_endpoint() -> None:
    registry = ModelRegistry(environ={"LOCAL_KEY": LOCAL_KEY}, endpoints=LOCAL)
    model = registry.resolve("local:qwen2.5")
    assert isinstance(model, OpenAIChatModel)
    assert model.base_url == "http://127.0.0.1:8000/v1" and model.name == "local:qwen2.5"
    with pytest.raises(UnknownModel, match=r"offers qwen2\.5, not 'llama3'"):
        registry.resolve("local:llama3")
    with pytest.raises(UnknownModel, match="names no model"):
        registry.resolve("local:")
    keyless = ModelRegistry(environ={}, endpoints=LOCAL).resolve("local:qwen2.5")
    assert isinstance(keyless, KeylessModel) and keyless.variable == "LOCAL_KEY"


def test_model_names_may_contain_colons_and_any_name_passes_without_a_list() -> None:
    registry = ModelRegistry(
        environ={}, endpoints={"ollama": {"base_url": "http://localhost:11434/v1"}}
    )
    model = registry.resolve("ollama:qwen2.5:7b")
    assert isinstance(model, OpenAIChatModel) and model.model_name == "qwen2.5:7b"
    assert registry.names() == ["demo", "ollama:*"]


def test_anthropic_kind_endpoint_and_builtin_override() -> None:
    registry = ModelRegistry(
        environ={"PROXY_KEY": "k"},
        endpoints={
            "claude": {
                "kind": "anthropic",
                "base_url": "http://127.0.0.1:4000",
                "api_key_env": "PROXY_KEY",
                "thinking_budget": 2048,
                "max_tokens": 8192,
            },
            "openai": {"base_url": "http://127.0.0.1:4001/v1", "api_key_env": "PROXY_KEY"},
        },
    )
    claude = registry.resolve("claude:claude-sonnet-4-5")
    assert isinstance(claude, AnthropicModel)
    assert (claude.base_url, claude.thinking_budget, claude.max_tokens) == (
        "http://127.0.0.1:4000",
        2048,
        8192,
    )
    openai = registry.resolve("openai:gpt-4.1")
    assert isinstance(openai, OpenAIChatModel) and openai.base_url == "http://127.0.0.1:4001/v1"


def test_unknown_names_still_list_what_is_configured() -> None:
    registry = ModelRegistry(environ={"LOCAL_KEY": "k"}, endpoints=LOCAL)
    with pytest.raises(UnknownModel) as caught:
        registry.resolve("gpt-4")
    assert str(caught.value) == (
        "unknown model 'gpt-4': a model is named endpoint:model (e.g. openai:gpt-4.1-mini), or "
        "demo; configured: demo, local:qwen2.5. Did you mean openai:gpt-4?"
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"x": {"kind": "openai"}}, "base_url is required"),
        ({"x": {"base_url": "localhost:8000/v1"}}, "http:// or https://"),
        ({"x": {"base_url": "http://h/v1", "api_key": "sk-1"}}, "api_key_env"),
        ({"x": {"base_url": "http://h/v1", "kind": "gemini"}}, "kind must be"),
        ({"demo": {"base_url": "http://h/v1"}}, "not demo/scripted"),
        ({"a b": {"base_url": "http://h/v1"}}, "use letters"),
        ({"x": {"base_url": "http://h/v1", "modles": []}}, "unknown settings modles"),
        ({"x": {"base_url": "http://h/v1", "models": "qwen"}}, "list of model names"),
        ({"x": {"base_url": "http://h/v1", "thinking_budget": 2048}}, "anthropic kind only"),
        ({"x": {"kind": "anthropic", "base_url": "http://h", "thinking_budget": 5}}, "1024"),
        ({"x": "http://h/v1"}, "dict of settings"),
        ({"x": {"base_url": "http://h/v1", "compact": "yes"}}, "compact must be true or false"),
        ({"x": {"base_url": "http://h/v1", "temperature": 3}}, "temperature must be a number"),
        ({"x": {"base_url": "http://h/v1", "tools": "read_file"}}, "list of tool names"),
        ({"x": {"base_url": "http://h/v1", "max_tokens": 0}}, "max_tokens must be positive"),
    ],
)
def test_bad_endpoint_configuration_says_what_is_wrong(
    config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        parse_endpoints(config)
    with pytest.raises(ValueError, match=message):
        ModelRegistry(endpoints=config)


async def test_keys_go_only_to_their_own_endpoint(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    environ = {"OPENAI_API_KEY": OPENAI_KEY, "LOCAL_KEY": LOCAL_KEY}
    registry = ModelRegistry(
        environ=environ,
        http_client=client,
        endpoints={
            "keyed": {"base_url": f"{server.url}/v1", "api_key_env": "LOCAL_KEY"},
            "open": {"base_url": f"{server.url}/v1"},
        },
    )
    request = ModelRequest("", [Message("user", "hi")], [])
    server.reply(Reply.stream("openai_text"), Reply.stream("openai_text"))
    for spec in ("keyed:qwen2.5", "open:llama3"):
        parts = [p async for p in registry.resolve(spec).stream(request)]
        assert parts[0] == TextPart("Bonjour")
    keyed, open_ = server.requests
    assert keyed.headers["authorization"] == f"Bearer {LOCAL_KEY}"
    assert keyed.json["model"] == "qwen2.5" and open_.json["model"] == "llama3"
    assert "authorization" not in open_.headers, "no OPENAI_API_KEY sent to another server"
    for received in server.requests:
        assert OPENAI_KEY not in received.raw


def test_an_endpoint_says_how_runs_talk_to_its_models() -> None:
    registry = ModelRegistry(
        environ={},
        endpoints={
            "small": {"base_url": "http://127.0.0.1:8080/v1", "compact": True},
            "picked": {"base_url": "http://127.0.0.1:8081/v1", "tools": ["read_file", "python"]},
            "vision": {"base_url": "http://127.0.0.1:8082/v1", "images": True},
            "claude": {"kind": "anthropic", "base_url": "http://127.0.0.1:8083"},
        },
    )
    assert registry.profile("small:qwen2.5-coder-1.5b") == ModelProfile(compact=True)
    assert registry.profile("picked:m") == ModelProfile(tools=("read_file", "python"))
    # The demo model is shown pictures: it says what size they reached it at.
    assert registry.profile("demo") == ModelProfile(images=True)
    # Attached pictures go as images to the vendors' APIs and where an endpoint says so.
    assert registry.profile("openai:gpt-4.1") == ModelProfile(images=True)
    assert registry.profile("claude:m") == ModelProfile(images=True)
    assert registry.profile("vision:m") == ModelProfile(images=True)
    with pytest.raises(ValueError, match="images must be true or false"):
        ModelRegistry(environ={}, endpoints={"x": {"base_url": "http://h/v1", "images": "yes"}})


async def test_an_endpoint_temperature_is_sent_with_every_request(
    server: ProviderServer, client: httpx.AsyncClient
) -> None:
    """llama.cpp samples at 0.8 unless told otherwise, too loose for a small model's calls."""
    endpoints = {
        "cool": {"base_url": f"{server.url}/v1", "temperature": 0},
        "plain": {"base_url": f"{server.url}/v1"},
        "claude": {"kind": "anthropic", "base_url": server.url, "temperature": 0.3},
    }
    registry = ModelRegistry(endpoints=endpoints, http_client=client, environ={})
    server.reply(
        Reply.stream("openai_text"), Reply.stream("openai_text"), Reply.stream("anthropic_text")
    )
    request = ModelRequest("", [Message("user", "hi")], [])
    for spec in ("cool:qwen", "plain:qwen", "claude:claude-sonnet-4-5"):
        async for _ in registry.resolve(spec).stream(request):
            pass
    sent = [r.json for r in server.requests]
    assert sent[0]["temperature"] == 0.0
    assert "temperature" not in sent[1]
    assert sent[2]["temperature"] == 0.3
