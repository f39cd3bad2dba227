"""Names of stored files, from whoever gave them (a user's upload, a URL, an MCP server, a tool).

The name becomes the last part of a path on disk, so it is never a folder (``.``, ``..``), never
holds a separator or a control character, and is short enough for every file system.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

MAX_NAME_CHARS = 120
"""Longest stored name (file systems allow 255 bytes; a UTF-8 character takes up to 4)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAX_SUFFIX = 16


def safe_name(name: str, fallback: str = "file") -> str:
    """``name`` without folders, control characters or excess length (else ``fallback``)."""
    last = PurePosixPath(_CONTROL.sub("", name).replace("\\", "/")).name.strip()
    if last.strip(".") == "":
        return fallback
    if len(last) <= MAX_NAME_CHARS:
        return last
    suffix = PurePosixPath(last).suffix
    if len(suffix) > _MAX_SUFFIX:
        suffix = ""
    return last[: MAX_NAME_CHARS - len(suffix)] + suffix
