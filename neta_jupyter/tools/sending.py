"""``send_file``: the agent hands a file under the notebook root to the user.

The file becomes an attachment of the run (ATTACHMENT_SENT) that the user downloads from the
run's view; sending a file of the same name again in the run replaces it (``changeType``
UPDATED). The path is confined to the root like the read-only file tools'.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Annotated

from pydantic import Field

from .files import _off_loop, _read_regular
from .registry import ToolContext, tool
from .values import ToolError, ToolFile, ToolResult

MAX_SEND_BYTES = 50 * 1024 * 1024
"""Largest file the agent may send."""


@tool(readonly=True, paths=("path",))
async def send_file(
    ctx: ToolContext,
    path: Annotated[str, Field(description="file path relative to the notebook root")],
) -> ToolResult:
    """Send a file under the notebook root to the user, who gets it with a download link.

    Use it when the user asks for a file (a result table, a report, a plot you saved), e.g.
    send_file(path="results/summary.csv"). Sending the same file again replaces what was sent.
    """
    ctx.report(f"Sending {path}")
    data = await _off_loop(lambda: _read_regular(ctx.root_dir, path, MAX_SEND_BYTES + 1), path)
    if len(data) > MAX_SEND_BYTES:
        raise ToolError(f"{path} is over {MAX_SEND_BYTES:,} bytes, too large to send")
    name = Path(path).name
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    sent = ToolFile(name, data, kind, sent=True)
    return ToolResult(f"Sent {name} ({len(data):,} bytes) to the user.", files=[sent])
