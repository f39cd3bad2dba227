"""Models: the provider seam, the scripted model for tests and the offline demo model."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import (
    ContextTooLong,
    Message,
    Model,
    ModelProfile,
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
from .config import ModelSelector, UnknownModel
from .scripted import ScriptedModel, ScriptedToolCall, ScriptedTurn, load_script

if TYPE_CHECKING:
    import httpx


class ModelRegistry:
    """Resolves ``provider:model`` strings to models.

    ``endpoints`` is ``c.NetaApp.endpoints`` (see :mod:`.config` for its shape); ``http_client``,
    when given, is the client every provider model uses; ``environ`` replaces ``os.environ`` as
    the source of API keys and base URLs. ``scripts``, for tests only, is the one folder whose
    JSON scripts ``scripted:<file>`` names; without it no ``scripted:`` model resolves, so
    neither a run request nor a model's ``delegate`` reaches a file through a model name.
    """

    def __init__(
        self,
        *,
        demo_pace: float = 0.015,
        endpoints: Mapping[str, Any] | None = None,
        http_client: httpx.AsyncClient | None = None,
        environ: Mapping[str, str] | None = None,
        scripts: Path | None = None,
    ) -> None:
        self.demo_pace = demo_pace
        self.scripts = scripts
        self._models: dict[str, Model | Callable[[], Model]] = {}
        self.selector = ModelSelector(endpoints, http_client=http_client, environ=environ)

    def register(self, name: str, model: Model | Callable[[], Model]) -> None:
        """Make ``name`` resolve to ``model`` (an instance, or a factory called per run)."""
        self._models[name] = model

    def names(self) -> list[str]:
        """Every name that resolves without further configuration."""
        return ["demo", *self._models, *self.selector.names()]

    def secrets(self) -> list[str]:
        """Secrets this configuration names (endpoint keys), by value, to redact everywhere."""
        return self.selector.secrets()

    def profile(self, spec: str) -> ModelProfile:
        """How runs talk to the model ``spec`` (its endpoint's ``compact`` and ``tools``)."""
        if spec in self._models or spec.startswith("scripted:"):
            return ModelProfile()
        if spec == "demo":
            return ModelProfile(images=True)  # it reads the size of the pictures it is shown
        return self.selector.profile(spec) or ModelProfile()

    def resolve(self, spec: str) -> Model:
        """The model for ``spec``; :class:`UnknownModel` when nothing matches."""
        if spec in self._models:
            found = self._models[spec]
            return found if isinstance(found, Model) else found()
        if spec == "demo":
            from .demo import DemoModel

            return DemoModel(pace=self.demo_pace)
        if spec.startswith("scripted:") and self.scripts is not None:
            # Loaded once per process: a script is consumed across the runs (and resumes) it drives.
            try:
                model = load_script(self.scripts, spec.removeprefix("scripted:"))
            except ValueError as exc:
                raise UnknownModel(f"cannot load the scripted model: {exc}") from exc
            self._models[spec] = model
            return model
        if (configured := self.selector.resolve(spec)) is not None:
            return configured
        raise UnknownModel(self._unknown(spec))

    def _unknown(self, spec: str) -> str:
        """Why ``spec`` names no model, for its user.

        What is configured, the ``endpoint:model`` form, and the closest name it may have meant.
        """
        message = (
            f"unknown model {spec!r}: a model is named endpoint:model (e.g. openai:gpt-4.1-mini)"
            f", or demo; configured: {', '.join(self.names())}"
        )
        close = difflib.get_close_matches(spec, self.names(), n=1, cutoff=0.75)
        meant = close[0] if close else self.selector.meant(spec)
        return f"{message}. Did you mean {meant}?" if meant else message


__all__ = [
    "ContextTooLong",
    "Message",
    "Model",
    "ModelProfile",
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
    "load_script",
]
