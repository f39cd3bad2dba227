"""A stdio server started behind the relay (``_relay.py``), which caps the size of its messages."""

from __future__ import annotations

import errno
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .config import StdioServer

if TYPE_CHECKING:
    from mcp import StdioServerParameters

DEFAULT_MAX_RESULT_BYTES = 4 * 1024 * 1024
"""Largest message an MCP server may send (a tool's result, with its images, base64-encoded)."""
RELAY = str(Path(__file__).with_name("_relay.py"))


def relayed(spec: StdioServer, max_result_bytes: int) -> StdioServerParameters:
    """How the SDK starts ``spec``: the relay, which starts the server itself.

    A command that does not exist is refused here, as the SDK would refuse it (the relay would
    start and only then fail).
    """
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=[RELAY, str(max(1, max_result_bytes)), _command(spec), *spec.args],
        env=dict(spec.env),
        cwd=spec.cwd,
    )


def _command(spec: StdioServer) -> str:
    """The server's executable as the relay will find it (from the server's ``cwd``)."""
    command = spec.command
    if os.sep in command or (os.altsep and os.altsep in command):
        where = Path(spec.cwd or ".") / command
        if where.is_file() and os.access(where, os.X_OK):
            return command
    else:
        from mcp.client.stdio import get_default_environment

        env = get_default_environment() | dict(spec.env)
        found = shutil.which(command, path=env.get("PATH", os.defpath))
        if found is not None:
            return found
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
