"""The model seam: what the runtime sends a model and the stream parts a model yields back.

Exceptions (who raises → who catches)::

    ProviderError                 raised by providers, caught by the runtime loop
    ├── ProviderInvalidRequest    the provider rejected the request; retrying cannot help
    ├── ContextTooLong            the request exceeds the model's context window
    └── ProviderUnavailable       network, overload, a cut stream, a server error (recoverable)
        └── RateLimited           HTTP 429; ``retry_after`` seconds when the provider said
    ScriptExhausted               a scripted model called more often than scripted (tests)
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

ThinkingLevel = Literal["off", "low", "medium", "high"]
"""How hard a reasoning model thinks: no thinking, or a small, medium or large budget."""
THINKING_LEVELS: tuple[ThinkingLevel, ...] = ("off", "low", "medium", "high")


def as_thinking_level(value: object) -> ThinkingLevel | None:
    """``value`` if it names a thinking level, else ``None`` (the endpoint's default)."""
    for level in THINKING_LEVELS:
        if value == level:
            return level
    return None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call as the model made it."""

    id: str
    name: str
    arguments: str
    """JSON text, exactly as the model produced it."""


@dataclass(frozen=True, slots=True)
class Image:
    """An image the model is shown: an attached picture, or one a tool call produced."""

    media_type: str
    """``image/png``, ``image/jpeg``, …"""
    data: bytes
    """The encoded image."""
    label: str = ""
    """What it is, for text naming it (a file name); may be empty."""

    def base64(self) -> str:
        """The data as base64 text, as the vendors' wire formats carry it."""
        return base64.b64encode(self.data).decode("ascii")


@dataclass(slots=True)
class Message:
    """One message of the conversation, provider-neutral."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    """For ``tool`` messages: the call answered."""
    name: str | None = None
    """For ``tool`` messages: the tool's name."""
    reasoning: str | None = None
    """For ``assistant`` messages: the reasoning that preceded the answer."""
    images: list[Image] = field(default_factory=list)
    """For ``user`` messages: pictures shown with the text; for ``tool`` messages: pictures the
    call produced (read-time only, never stored: the history keeps their attachments' paths)."""

    def to_json(self) -> dict[str, Any]:
        """A compact dict for storage."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.reasoning:
            out["reasoning"] = self.reasoning
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Message:
        """Inverse of :meth:`to_json`."""
        return cls(
            role=obj["role"],
            content=obj.get("content", ""),
            tool_calls=[ToolCall(**c) for c in obj.get("tool_calls", [])],
            tool_call_id=obj.get("tool_call_id"),
            name=obj.get("name"),
            reasoning=obj.get("reasoning"),
        )


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as offered to the model."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments object."""


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """How runs talk to a model, from its endpoint's settings."""

    compact: bool = False
    """A short system prompt and only the core tools, for small models and context windows."""
    tools: tuple[str, ...] | None = None
    """The tools offered to the model; None: the runtime's choice."""
    images: bool = False
    """The model takes images (the endpoint's ``vision``): attached pictures and those tool calls
    produced are sent as images; otherwise the model is told their names and sizes."""


@dataclass(slots=True)
class ModelRequest:
    """Everything a provider needs for one attempt."""

    system: str
    messages: list[Message]
    tools: list[ToolDefinition]
    max_output_tokens: int | None = None
    thinking: ThinkingLevel | None = None
    """How hard a reasoning model should think; ``None`` leaves it to the endpoint's setting."""


# --- stream parts ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextPart:
    """An increment of answer text."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningPart:
    """An increment of reasoning text."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A fragment of a tool call; ``index`` ties fragments of one call together."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class UsagePart:
    """Token usage the provider reported for the attempt."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0


StreamPart = TextPart | ReasoningPart | ToolCallPart | UsagePart


@runtime_checkable
class Model(Protocol):
    """A model the runtime can stream from."""

    @property
    def name(self) -> str:
        """``provider:model`` as the user selected it."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Yield the parts of one reply; raise :class:`ProviderError` on failure."""
        ...


# --- errors ---------------------------------------------------------------------------------


class ProviderError(Exception):
    """A model call failed."""

    recoverable: bool = False
    network_error: bool = False


class ProviderInvalidRequest(ProviderError):
    """The provider rejected the request; the same request will fail again."""


class AuthenticationRequired(ProviderInvalidRequest):
    """The endpoint has no usable key: none is set, or it was refused (HTTP 401/403).

    ``user_message`` says what to do; ``variable`` names the environment variable to set.
    """

    def __init__(
        self, message: str, *, model: str, variable: str | None, user_message: str
    ) -> None:
        super().__init__(message)
        self.model = model
        self.variable = variable
        self.user_message = user_message


class ContextTooLong(ProviderInvalidRequest):
    """The request does not fit the model's context window."""


class ProviderUnavailable(ProviderError):
    """A failure that retrying later may get past."""

    recoverable = True

    def __init__(
        self, message: str, *, network_error: bool = False, transient: bool = True
    ) -> None:
        super().__init__(message)
        self.network_error = network_error
        self.transient = transient
        """False when the server failed on this request without saying why (HTTP 500): the
        same request may fail the same way every time, so an identical repeat is not retried."""


class RateLimited(ProviderUnavailable):
    """The provider asked us to slow down."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ScriptExhausted(ProviderError):
    """A scripted model was called more often than it was scripted."""
