"""Bodies of the streamed reply: answer text and reasoning, START / DELTA / END."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from .wire import EventBody


class TextData(EventBody):
    """Answer text: the initial text on START, an increment on DELTA, nothing on END."""

    type: Literal["text"] = "text"
    event_types: ClassVar[Mapping[str, str]] = {
        "TEXT_START": "The answer's text began (with its first characters).",
        "TEXT_DELTA": "More characters of the answer.",
        "TEXT_END": "The answer's text ended.",
    }
    text: str = ""
    """Initial text (START) or increment (DELTA)."""
    synthetic: bool | None = None
    """True when the system wrote the text (START only)."""
    continues: bool | None = None
    """True when the segment goes on with the text segment before it (START only): the same
    reply, picked up again after it was cut off (a dropped stream, a server restart)."""
    replaces: bool | None = None
    """True when the segment takes the place of the text segment before it (START only): a reply
    that was cut off, asked for again, came out differently; clients drop the cut-off text."""


class ReasoningData(EventBody):
    """Reasoning text, shown apart from the answer."""

    type: Literal["reasoning"] = "reasoning"
    event_types: ClassVar[Mapping[str, str]] = {
        "REASONING_START": "The model's reasoning began.",
        "REASONING_DELTA": "More characters of the reasoning.",
        "REASONING_END": "The reasoning ended.",
    }
    text: str = ""
    """Initial text (START) or increment (DELTA)."""
    continues: bool | None = None
    """As ``TextData.continues``, for the reasoning segment before it."""
    replaces: bool | None = None
    """As ``TextData.replaces``, for the reasoning segment before it."""
