"""A run's stored position that cannot be loaded: what is wrong with it, in words.

A run is continued (resumed, retried, recovered at start-up) from the options and state stored
with its record. When those cannot be read — a damaged document, a version this server does not
know, a field of the wrong type, a tool named in the stored step that is no longer offered — the
run ends with ``MESSAGE_FAILED`` ``RUN_SNAPSHOT_INVALID`` and the reason, instead of the
request failing with a server error or the run never going on.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ...store.records import UNREADABLE


class SnapshotInvalid(Exception):
    """The run's stored options or state cannot be loaded; ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def check_document(what: str, document: Any, version: int) -> None:
    """SnapshotInvalid when ``document`` cannot be the stored ``what`` of a version up to ours."""
    if not isinstance(document, dict):
        raise SnapshotInvalid(f"its stored {what} is not a JSON object")
    if (why := document.get(UNREADABLE)) is not None:
        raise SnapshotInvalid(f"its stored {what} cannot be read: {why}")
    stored = document.get("version")
    if stored is None:
        return  # the first shape had no version
    if not isinstance(stored, int) or isinstance(stored, bool) or stored < 1:
        raise SnapshotInvalid(f"its stored {what} has an invalid version {stored!r}")
    if stored > version:
        raise SnapshotInvalid(
            f"its stored {what} has version {stored}, which this server does not know "
            f"(it reads versions up to {version})"
        )


def describe(what: str, exc: Exception) -> str:
    """Why a stored document did not load, for the run's MESSAGE_FAILED."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return f"its stored {what} is ill-typed: {where}: {first['msg']}{more}"
    return f"its stored {what} cannot be read: {type(exc).__name__}: {exc}"
