"""Request bodies of the REST API and the WebSocket: one JSON parse, then the run API's models.

The models themselves live in :mod:`neta_jupyter.runtime.requests`, shared with the run-API client.
"""

from __future__ import annotations

import json
from typing import Any

from ..runtime.nesting import MAX_NESTING, deeper_than
from ..runtime.requests import (
    CompactRequest,
    ImportRequest,
    InputRequest,
    LeafRequest,
    RequestRef,
    ResumeRequest,
    RevertRequest,
    RunRequest,
    SessionRef,
    SessionSubscription,
    ThinkingLevelRequest,
    VirtualToolSpec,
)
from .errors import ApiError

__all__ = [
    "MAX_JSON_DEPTH",
    "CompactRequest",
    "ImportRequest",
    "InputRequest",
    "LeafRequest",
    "RequestRef",
    "ResumeRequest",
    "RevertRequest",
    "RunRequest",
    "SessionRef",
    "SessionSubscription",
    "ThinkingLevelRequest",
    "VirtualToolSpec",
    "parse_json_object",
]

MAX_JSON_DEPTH = MAX_NESTING
"""Deepest nesting of objects and arrays a body may have (the same limit for YAML crews)."""


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
    if deeper_than(value, MAX_JSON_DEPTH):
        raise _invalid(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _invalid(message: str) -> ApiError:
    return ApiError(400, "INVALID_JSON", message)
