"""Request bodies of the REST API and the WebSocket, validated with pydantic."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..providers.base import ThinkingLevel
from .errors import ApiError

MAX_JSON_DEPTH = 64
"""Deepest nesting of objects and arrays a body may have (tool schemas need far less).

Deeper values would exhaust Python's recursion limit somewhere later (validation, storage)."""


def parse_json_object(raw: bytes | str, what: str) -> dict[str, Any]:
    """``raw`` (a request body or a WebSocket frame) as a JSON object; a 400 otherwise.

    ``what`` names it in the message (``request body``, ``frame``).
    """
    try:
        value = json.loads(raw)
    except RecursionError as exc:
        raise _invalid(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _invalid(f"{what} is not valid JSON: {exc}") from exc
    except ValueError as exc:  # an integer past Python's digit limit for int(str)
        raise _invalid(f"{what} holds a number that is too long: {exc}") from exc
    if not isinstance(value, dict):
        raise _invalid(f"{what} must be a JSON object")
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise _invalid(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _invalid(message: str) -> ApiError:
    return ApiError(400, "INVALID_JSON", message)


def _deeper_than(value: dict[str, Any], limit: int) -> bool:
    """Whether objects and arrays nest more than ``limit`` levels (without recursing)."""
    level: list[Any] = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class VirtualToolSpec(_Body):
    """A caller-rendered tool (seed 003 §8)."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    mock_response: str | None = None


class RunRequest(_Body):
    """``POST /neta/api/agent/run/async``."""

    content: str = Field(min_length=1)
    session_id: str | None = None
    session_name: str | None = Field(default=None, max_length=500)
    model: str | None = None
    virtual_tools: list[VirtualToolSpec] = Field(default_factory=list)
    tools: list[str] | None = None
    max_steps: int | None = Field(default=None, ge=1, le=200)
    approve: Literal["ask", "auto", "deny"] = "ask"
    kernel_id: str | None = None
    notebook_path: str | None = Field(default=None, max_length=4096)
    thinking_level: ThinkingLevel | None = None
    """Overrides the session's thinking level for this run."""
    kernel_variables: list[Annotated[str, Field(max_length=2000)]] | None = Field(
        default=None, max_length=1000
    )
    """The kernel's variables when the prompt was written, one summary line each (``%neta``
    sends them): the model's context, and ``list_variables`` while a cell keeps the kernel busy."""


class ThinkingLevelRequest(_Body):
    """``set_thinking_level`` over the WebSocket (seed 002)."""

    session_id: str = Field(min_length=1)
    level: ThinkingLevel | None
    """``None`` goes back to the endpoint's default."""


class RequestRef(_Body):
    """Bodies that only name a run."""

    request_id: str = Field(min_length=1)


class ResumeRequest(RequestRef):
    """``POST …/resumeTask``."""

    approved: bool | None = None
    ask_id: str | None = None
    always: bool = False
    answer: str | None = None


class InputRequest(RequestRef):
    """``POST …/addSupplementaryInput``."""

    content: str = Field(min_length=1)


class ImportRequest(_Body):
    """``POST …/run/import``: a history run with messages and no stream."""

    session_name: str = Field(min_length=1)
    content: str = Field(min_length=1)
    answer: str


class LeafRequest(_Body):
    """``POST /neta/api/sessions/leaf``."""

    session_id: str
    leaf_entry_id: str | None


class CompactRequest(_Body):
    """``POST /neta/api/sessions/compact`` and the WebSocket ``compact`` message."""

    session_id: str = Field(min_length=1)
    instructions: str | None = None
    model: str | None = None
