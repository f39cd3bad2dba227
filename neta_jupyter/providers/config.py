"""Model selection: ``<endpoint>:<model>`` strings and the endpoints they name.

Besides ``demo``, names registered in code and ``scripted:<path>`` (tests), a model is selected as
``<endpoint>:<model>``, split at the first colon (``local:qwen2.5:7b`` is model ``qwen2.5:7b``).
Two endpoints are built in:

* ``openai``: OpenAI's wire format at ``$OPENAI_BASE_URL`` (default ``https://api.openai.com/v1``),
  key from ``OPENAI_API_KEY``;
* ``anthropic``: the Messages API at ``$ANTHROPIC_BASE_URL`` (default
  ``https://api.anthropic.com``), key from ``ANTHROPIC_API_KEY``.

More come from configuration, ``c.NetaApp.endpoints``, passed to
``ModelRegistry(endpoints=...)``: a dict from endpoint name to its settings::

    c.NetaApp.endpoints = {
        "local": {
            "kind": "openai",                      # wire format: "openai" (default) or "anthropic"
            "base_url": "http://127.0.0.1:8000/v1",  # required for a new endpoint
            "api_key_env": "LOCAL_KEY",            # optional: the variable holding the key
            "models": ["qwen2.5"],                 # optional: offered models; others are refused
            "max_tokens": 4096,                    # optional: output cap of one reply (4096)
            "thinking_budget": 2048,               # optional, anthropic kind
            "temperature": 0.2,                    # optional: sampling temperature
            "compact": True,                       # optional: short prompt, core tools only
            "tools": ["read_file", "python"],      # optional: the tools offered
            "vision": True,                        # optional: the models take images
        },
    }

``vision`` says whether pictures are sent to the models as images: pictures attached to a prompt
and those tool calls produce (figures, MCP images). The default is yes for the anthropic kind and
for OpenAI's own API (``api.openai.com``), whose models take images, and no for every other
OpenAI-compatible server, the built-in ``openai`` endpoint moved there with ``OPENAI_BASE_URL``
included: a text-only model behind llama.cpp, vLLM or Ollama fails the whole request when sent
an image.
With ``vision: false`` the model is told each picture's name and size instead. ``images`` is an
older name of the same setting.

``local:qwen2.5`` then resolves. An entry named ``openai`` or ``anthropic`` replaces the built-in
one (for a proxy, say). Keys are read from the environment when a model is resolved and never
live in the configuration: an endpoint with ``api_key_env`` is unusable until that variable is
set, one without sends no key (Ollama, LM Studio and llama.cpp need none).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from .base import AuthenticationRequired, Model, ModelProfile, ModelRequest, StreamPart

if TYPE_CHECKING:
    import httpx

__all__ = ["Endpoint", "ModelSelector", "UnknownModel", "builtin_endpoints", "parse_endpoints"]

Kind = Literal["openai", "anthropic"]

DEFAULT_MAX_TOKENS = 4096
"""Output cap of one reply unless the endpoint says otherwise: a looping model stops here."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_RESERVED = frozenset({"demo", "scripted"})
_SETTINGS = frozenset(
    {
        "kind",
        "base_url",
        "api_key_env",
        "models",
        "max_tokens",
        "thinking_budget",
        "compact",
        "tools",
        "temperature",
        "images",
        "vision",
    }
)


class UnknownModel(LookupError):
    """No model is configured under that name, or its endpoint cannot be used yet."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where models of one ``<endpoint>:`` prefix are served."""

    name: str
    kind: Kind
    base_url: str | None
    """None: the kind's default (``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` or the vendor's)."""
    api_key_env: str | None
    """The environment variable holding the key; None when the server needs none."""
    models: tuple[str, ...] = ()
    """The models offered; empty means any name is passed through."""
    max_tokens: int | None = None
    """Output cap of one reply; None: :data:`DEFAULT_MAX_TOKENS`."""
    thinking_budget: int | None = None
    temperature: float | None = None
    """Sampling temperature sent with every request; None: the server's default."""
    profile: ModelProfile = field(default_factory=ModelProfile)
    """How runs talk to the endpoint's models (``compact``, ``tools``, ``vision``)."""
    vision_set: bool = False
    """The settings say ``vision``; otherwise an OpenAI-kind endpoint sees pictures only when
    it is OpenAI's own API."""


def builtin_endpoints() -> dict[str, Endpoint]:
    """``openai`` and ``anthropic``, configured from the environment like the official clients."""
    images = ModelProfile(images=True)
    return {
        "openai": Endpoint("openai", "openai", None, "OPENAI_API_KEY", profile=images),
        "anthropic": Endpoint("anthropic", "anthropic", None, "ANTHROPIC_API_KEY", profile=images),
    }


def parse_endpoints(config: Mapping[str, Any]) -> dict[str, Endpoint]:
    """Validate ``c.NetaApp.endpoints``; :class:`ValueError` says what is wrong and where."""
    out: dict[str, Endpoint] = {}
    for name, settings in config.items():
        where = f"endpoint {name!r}"
        if not isinstance(name, str) or not _NAME.match(name) or name in _RESERVED:
            raise ValueError(f"{where}: use letters, digits, '.', '_' or '-' and not demo/scripted")
        if not isinstance(settings, Mapping):
            raise ValueError(f"{where}: expected a dict of settings")
        if "api_key" in settings:
            raise ValueError(
                f"{where}: keys are not read from configuration; put the key in an environment "
                "variable and name it with api_key_env"
            )
        if unknown := sorted(set(settings) - _SETTINGS):
            raise ValueError(f"{where}: unknown settings {', '.join(unknown)}")
        out[name] = _endpoint(name, settings, where)
    return out


def _endpoint(name: str, settings: Mapping[str, Any], where: str) -> Endpoint:
    builtin = builtin_endpoints().get(name)
    kind = settings.get("kind", builtin.kind if builtin else "openai")
    if kind not in ("openai", "anthropic"):
        raise ValueError(f"{where}: kind must be 'openai' or 'anthropic', not {kind!r}")
    base_url = settings.get("base_url")
    if base_url is None and builtin is None:
        raise ValueError(f"{where}: base_url is required")
    if base_url is not None and not (
        isinstance(base_url, str) and base_url.startswith(("http://", "https://"))
    ):
        raise ValueError(f"{where}: base_url must be an http:// or https:// URL")
    key_env = settings.get("api_key_env", builtin.api_key_env if builtin else None)
    if key_env is not None and not (isinstance(key_env, str) and key_env):
        raise ValueError(f"{where}: api_key_env must name an environment variable")
    models = settings.get("models", [])
    if isinstance(models, str) or not all(isinstance(m, str) and m for m in models):
        raise ValueError(f"{where}: models must be a list of model names")
    numbers = {k: settings.get(k) for k in ("max_tokens", "thinking_budget")}
    for key, value in numbers.items():
        if value is None:
            continue
        if kind != "anthropic" and key == "thinking_budget":
            raise ValueError(f"{where}: {key} applies to the anthropic kind only")
        if not isinstance(value, int) or value < (1024 if key == "thinking_budget" else 1):
            raise ValueError(
                f"{where}: {key} must be an integer of at least 1024 tokens"
                if key == "thinking_budget"
                else f"{where}: {key} must be positive"
            )
    return Endpoint(
        name,
        kind,
        base_url,
        key_env,
        tuple(models),
        max_tokens=numbers["max_tokens"],
        thinking_budget=numbers["thinking_budget"],
        temperature=_temperature(settings.get("temperature"), where),
        profile=_profile(settings, where, images=builtin is not None or kind == "anthropic"),
        vision_set="vision" in settings or "images" in settings,
    )


def _temperature(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 2:
        raise ValueError(f"{where}: temperature must be a number from 0 to 2")
    return float(value)


def _profile(settings: Mapping[str, Any], where: str, *, images: bool) -> ModelProfile:
    compact = settings.get("compact", False)
    if not isinstance(compact, bool):
        raise ValueError(f"{where}: compact must be true or false")
    takes_images = settings.get("vision", settings.get("images", images))
    if not isinstance(takes_images, bool):
        key = "vision" if "vision" in settings else "images"
        raise ValueError(f"{where}: {key} must be true or false")
    if "images" in settings and settings["images"] != takes_images:
        raise ValueError(f"{where}: vision and images (its older name) disagree; keep vision")
    tools = settings.get("tools")
    if tools is not None and (
        isinstance(tools, str) or not all(isinstance(t, str) and t for t in tools)
    ):
        raise ValueError(f"{where}: tools must be a list of tool names")
    return ModelProfile(
        compact=compact, tools=None if tools is None else tuple(tools), images=takes_images
    )


class KeylessModel:
    """The model of an endpoint whose key variable is unset: every call says which to set."""

    def __init__(self, name: str, variable: str) -> None:
        self._name = name
        self.variable = variable

    @property
    def name(self) -> str:
        """``endpoint:model`` as selected."""
        return self._name

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Fail with :class:`AuthenticationRequired` before any request is sent."""
        raise AuthenticationRequired(
            f"{self._name} needs an API key: set {self.variable} or configure c.NetaApp.endpoints",
            model=self._name,
            variable=self.variable,
            user_message=(
                f"{self._name} needs an API key: set the environment variable {self.variable} "
                "for the Jupyter server (or for neta-jupyter run) and start it again, or name "
                "another variable with api_key_env in c.NetaApp.endpoints."
            ),
        )
        yield  # pragma: no cover - makes this an async generator, like every model's stream


class ModelSelector:
    """Resolves ``<endpoint>:<model>`` to a provider model; lists what is usable right now."""

    def __init__(
        self,
        endpoints: Mapping[str, Any] | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.endpoints = {**builtin_endpoints(), **parse_endpoints(endpoints or {})}
        self._client = http_client
        self._environ = environ if environ is not None else os.environ

    def names(self) -> list[str]:
        """``endpoint:model`` for each offered model (``endpoint:*`` when any is accepted)."""
        out: list[str] = []
        for endpoint in self.endpoints.values():
            if self._missing_key(endpoint) is None:
                out += [f"{endpoint.name}:{m}" for m in endpoint.models or ("*",)]
        return out

    def meant(self, spec: str) -> str | None:
        """The ``endpoint:model`` a name that resolves to nothing most likely meant.

        A bare model name (``gpt-5``) goes with the endpoint that offers it, or the first that
        accepts any name; a misspelt endpoint (``opnai:gpt-5``) with the closest endpoint.
        """
        prefix, colon, model_name = spec.partition(":")
        if not colon:
            offering = [e for e in self.endpoints.values() if spec in e.models]
            family = "anthropic" if spec.startswith("claude") else "openai"
            open_ = sorted(
                (e for e in self.endpoints.values() if not e.models), key=lambda e: e.kind != family
            )
            candidates = offering or open_
            return f"{candidates[0].name}:{spec}" if candidates else None
        close = difflib.get_close_matches(prefix, list(self.endpoints), n=1, cutoff=0.6)
        return f"{close[0]}:{model_name}" if close and model_name else None

    def secrets(self) -> list[str]:
        """The key of every endpoint that has one set: values that must never be shown."""
        return [key for endpoint in self.endpoints.values() if (key := self._key(endpoint))]

    def resolve(self, spec: str) -> Model | None:
        """The model for ``spec``; None when its prefix names no endpoint."""
        prefix, colon, model_name = spec.partition(":")
        endpoint = self.endpoints.get(prefix)
        if endpoint is None or not colon:
            return None
        if not model_name:
            raise UnknownModel(f"{spec!r} names no model; write {prefix}:<model>")
        if endpoint.models and model_name not in endpoint.models:
            raise UnknownModel(
                f"endpoint {prefix!r} offers {', '.join(endpoint.models)}, not {model_name!r}"
            )
        if (missing := self._missing_key(endpoint)) is not None:
            # The run starts and tells its user, on its stream, which variable to set.
            return KeylessModel(spec, missing)
        return self._build(endpoint, model_name, spec)

    def profile(self, spec: str) -> ModelProfile | None:
        """The settings of the endpoint ``spec`` names; None when it names none."""
        endpoint = self.endpoints.get(spec.partition(":")[0])
        if endpoint is None or ":" not in spec:
            return None
        if endpoint.kind == "openai" and not endpoint.vision_set and not self._at_openai(endpoint):
            # A server standing in for OpenAI (OPENAI_BASE_URL at llama.cpp, say) mostly serves
            # text-only models, which fail a whole request that carries a picture.
            return replace(endpoint.profile, images=False)
        return endpoint.profile

    def _at_openai(self, endpoint: Endpoint) -> bool:
        from .openai_compat import OPENAI_BASE_URL

        url = endpoint.base_url or self._environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
        return urlsplit(url).hostname == "api.openai.com"

    def _missing_key(self, endpoint: Endpoint) -> str | None:
        env = endpoint.api_key_env
        return env if env is not None and not self._environ.get(env) else None

    def _key(self, endpoint: Endpoint) -> str:
        # "" rather than None: the provider must not fall back to its vendor's variable,
        # which would send, say, the OpenAI key to a local server.
        return self._environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""

    def _build(self, endpoint: Endpoint, model_name: str, spec: str) -> Model:
        key_env = endpoint.api_key_env or "the endpoint's configuration"
        if endpoint.kind == "anthropic":
            from .anthropic import ANTHROPIC_BASE_URL, AnthropicModel

            return AnthropicModel(
                model_name,
                base_url=endpoint.base_url
                or self._environ.get("ANTHROPIC_BASE_URL")
                or ANTHROPIC_BASE_URL,
                api_key=self._key(endpoint),
                client=self._client,
                max_tokens=endpoint.max_tokens or DEFAULT_MAX_TOKENS,
                thinking_budget=endpoint.thinking_budget,
                temperature=endpoint.temperature,
                name=spec,
                api_key_env=key_env,
            )
        from .openai_compat import OPENAI_BASE_URL, OpenAIChatModel

        return OpenAIChatModel(
            model_name,
            base_url=endpoint.base_url or self._environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL,
            api_key=self._key(endpoint),
            client=self._client,
            max_tokens=endpoint.max_tokens or DEFAULT_MAX_TOKENS,
            temperature=endpoint.temperature,
            name=spec,
            api_key_env=key_env,
        )
