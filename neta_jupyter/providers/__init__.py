"""Models: the provider seam, the scripted model for tests and the offline demo model."""

from __future__ import annotations

from collections.abc import Callable

from .base import (
    ContextTooLong,
    Message,
    Model,
    ModelRequest,
    ProviderError,
    ProviderInvalidRequest,
    ProviderUnavailable,
    RateLimited,
    ReasoningPart,
    ScriptExhausted,
    StreamPart,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolDefinition,
    UsagePart,
)
from .scripted import ScriptedModel, ScriptedToolCall, ScriptedTurn


class UnknownModel(LookupError):
    """No model is configured under that name."""


class ModelRegistry:
    """Resolves ``provider:model`` strings to models."""

    def __init__(self, *, demo_pace: float = 0.015) -> None:
        self.demo_pace = demo_pace
        self._models: dict[str, Model | Callable[[], Model]] = {}

    def register(self, name: str, model: Model | Callable[[], Model]) -> None:
        """Make ``name`` resolve to ``model`` (an instance, or a factory called per run)."""
        self._models[name] = model

    def names(self) -> list[str]:
        """Every name that resolves without further configuration."""
        return ["demo", *self._models]

    def resolve(self, spec: str) -> Model:
        """The model for ``spec``; :class:`UnknownModel` when nothing matches."""
        if spec in self._models:
            found = self._models[spec]
            return found if isinstance(found, Model) else found()
        if spec == "demo":
            from .demo import DemoModel

            return DemoModel(pace=self.demo_pace)
        if spec.startswith("scripted:"):
            path = spec.removeprefix("scripted:")
            try:
                return ScriptedModel.from_file(path)
            except (OSError, ValueError) as exc:
                raise UnknownModel(f"cannot load the scripted model {path!r}: {exc}") from exc
        raise UnknownModel(f"unknown model {spec!r}; configured: {', '.join(self.names())}")


__all__ = [
    "ContextTooLong",
    "Message",
    "Model",
    "ModelRegistry",
    "ModelRequest",
    "ProviderError",
    "ProviderInvalidRequest",
    "ProviderUnavailable",
    "RateLimited",
    "ReasoningPart",
    "ScriptExhausted",
    "ScriptedModel",
    "ScriptedToolCall",
    "ScriptedTurn",
    "StreamPart",
    "TextPart",
    "ToolCall",
    "ToolCallPart",
    "ToolDefinition",
    "UnknownModel",
    "UsagePart",
]
