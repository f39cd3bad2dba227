"""A model that plays back scripted turns: for tests and benchmarks, never for users."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import (
    ModelRequest,
    ProviderError,
    ProviderInvalidRequest,
    ProviderUnavailable,
    ReasoningPart,
    ScriptExhausted,
    StreamPart,
    TextPart,
    ToolCallPart,
    UsagePart,
)


@dataclass(slots=True)
class ScriptedToolCall:
    """A tool call the scripted model makes."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(slots=True)
class ScriptedTurn:
    """One reply: reasoning, then text, then tool calls, then (optionally) a failure."""

    text: str | list[str] = ""
    """The answer, or its exact deltas."""
    reasoning: str | list[str] = ""
    tool_calls: list[ScriptedToolCall] = field(default_factory=list)
    error: ProviderError | None = None
    """Raised after the parts above were streamed (so an error can follow partial output)."""
    usage: UsagePart | None = None
    delay: float = 0.0
    """Seconds to wait before each part (simulates a slow model)."""


def _chunks(value: str | list[str]) -> list[str]:
    if isinstance(value, list):
        return value
    if not value:
        return []
    words = value.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


class ScriptedModel:
    """Plays ``turns`` in order; one turn per call. Fails loudly when called past the script."""

    token_count_source = "tokenizer"

    def __init__(
        self,
        turns: list[ScriptedTurn],
        *,
        name: str = "scripted",
        count_tokens: Callable[[ModelRequest], int] | None = None,
    ) -> None:
        self._turns = list(turns)
        self._name = name
        self._count = count_tokens
        self.requests: list[ModelRequest] = []
        """Every request received, for assertions."""

    @property
    def name(self) -> str:
        """The model name."""
        return self._name

    def count_tokens(self, request: ModelRequest) -> int | None:
        """A counted (gateable) estimate when the test supplies a counter, else None."""
        return self._count(request) if self._count is not None else None

    @property
    def remaining(self) -> int:
        """Turns not played yet."""
        return len(self._turns) - len(self.requests)

    def assert_complete(self) -> None:
        """Raise unless every scripted turn was used."""
        if self.remaining:
            raise AssertionError(
                f"{self.remaining} of {len(self._turns)} scripted turns were never requested"
            )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Yield the next turn's parts."""
        index = len(self.requests)
        if index >= len(self._turns):
            raise ScriptExhausted(
                f"scripted model called {index + 1} times but only {len(self._turns)} turns "
                "were scripted"
            )
        self.requests.append(request)
        turn = self._turns[index]
        loop = asyncio.get_running_loop()
        began = loop.time()
        for number, part in enumerate(self._parts(turn, index), start=1):
            if turn.delay:
                # Paced on a schedule, not sleep-after-sleep, so the rate holds at small delays.
                await asyncio.sleep(max(0.0, began + number * turn.delay - loop.time()))
            yield part
        if turn.error is not None:
            raise turn.error

    @staticmethod
    def _parts(turn: ScriptedTurn, index: int) -> Iterator[StreamPart]:
        """The turn's parts, made as they are streamed (a long script never exists twice)."""
        # Parts are immutable: a run of the same chunk (a ``repeat`` script) shares one object.
        reasoning: ReasoningPart | None = None
        for chunk in _chunks(turn.reasoning):
            if reasoning is None or chunk is not reasoning.text:
                reasoning = ReasoningPart(chunk)
            yield reasoning
        text: TextPart | None = None
        for chunk in _chunks(turn.text):
            if text is None or chunk is not text.text:
                text = TextPart(chunk)
            yield text
        for i, call in enumerate(turn.tool_calls):
            args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            call_id = call.id or f"call_{index}_{i}"
            yield ToolCallPart(i, id=call_id, name=call.name)
            mid = len(args) // 2
            yield ToolCallPart(i, arguments=args[:mid])
            yield ToolCallPart(i, arguments=args[mid:])
        if turn.usage is not None:
            yield turn.usage

    # --- loading scripts from JSON (used where a test cannot hand over objects, e.g. a subprocess)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ScriptedModel:
        """Build from ``{"turns": [{"text", "reasoning", "toolCalls", "error", "delay", …}]}``."""
        turns = [_turn_from_json(t) for t in obj.get("turns", [])]
        return cls(turns, name=obj.get("name", "scripted"))

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Load a JSON script from a file."""
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


MAX_SCRIPT_BYTES = 32 * 1024 * 1024
"""Largest script file read (``{"repeat": …}`` keeps even huge answers small)."""
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_NOFOLLOW", 0)


def load_script(folder: Path, name: str) -> ScriptedModel:
    """The script ``name`` (relative, or absolute inside ``folder``): a regular file of ``folder``.

    Raises :class:`ValueError` for anything else, without saying whether such a file exists.
    """
    base = folder.resolve()
    try:
        target = (base / name).resolve()
    except (OSError, RuntimeError, ValueError):
        target = base
    if base not in target.parents:
        raise ValueError(f"scripts are read only from {base}")
    try:
        fd = os.open(target, _OPEN_FLAGS)
    except OSError as exc:
        raise ValueError(f"cannot open the script {name}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SCRIPT_BYTES:
            raise ValueError(f"{name} is not a script file of at most {MAX_SCRIPT_BYTES:,} bytes")
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_SCRIPT_BYTES + 1)
    finally:
        os.close(fd)
    try:
        return ScriptedModel.from_json(json.loads(data.decode("utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{name} is not a valid script: {exc}") from None


def _turn_from_json(obj: dict[str, Any]) -> ScriptedTurn:
    text: str | list[str] = obj.get("text", "")
    if "repeat" in obj:  # {"repeat": ["tok ", 200000]} keeps huge scripts small on disk
        token, count = obj["repeat"]
        text = [token] * int(count)
    error: ProviderError | None = None
    if err := obj.get("error"):
        kind, message = err.get("kind", "unavailable"), err.get("message", "scripted failure")
        error = (
            ProviderUnavailable(message, network_error=True)
            if kind == "unavailable"
            else ProviderInvalidRequest(message)
        )
    return ScriptedTurn(
        text=text,
        reasoning=obj.get("reasoning", ""),
        tool_calls=[
            ScriptedToolCall(c["name"], c.get("arguments", {}), c.get("id"))
            for c in obj.get("toolCalls", [])
        ],
        error=error,
        delay=float(obj.get("delay", 0.0)),
    )
