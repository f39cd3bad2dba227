"""An MCP server written with the SDK, for the tests: ``tests/mcp/sdk_server.py [http PORT [--json]]``.

Its tools: a read-only lookup, a note writer that changes things, one that fails, one that shows
the token it was given (to prove it is redacted), an image, a structured result, a binary
resource, a result or stderr as large as asked, and two whose names are too long for a model. ``--delay SECONDS`` makes it wait that
long before it answers at all (a slow start); ``PID_FILE`` in its environment names a file it
writes its process id to.
"""

from __future__ import annotations

import base64
import os
import sys
import threading
import time
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import BlobResourceContents, EmbeddedResource, ToolAnnotations

# A 1x1 PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("neta-test")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(key: str) -> str:
    """Look a key up in the test catalogue."""
    return f"the value of {key} is 42"


@server.tool()
def write_note(text: str) -> str:
    """Write a note to the file NOTES_FILE names."""
    path = Path(os.environ["NOTES_FILE"])
    path.write_text(text, encoding="utf-8")
    return f"wrote {len(text)} characters"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def broken(reason: str) -> str:
    """Always fails, saying why."""
    raise ToolError(f"the catalogue is closed: {reason}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami() -> str:
    """Say which token this server was given."""
    return f"my token is {os.environ.get('MCP_TEST_TOKEN', 'none')}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pixel() -> Image:
    """A one-pixel picture."""
    return Image(data=PIXEL, format="png")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def stats(column: str) -> dict[str, float]:
    """Summary statistics of a column."""
    return {"mean": 2.5, "count": 4.0}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def count(steps: int, ctx: Context) -> str:
    """Count to ``steps``, reporting progress at each."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"counted {i} of {steps}")
        await anyio.sleep(0.5)
    return f"counted to {steps}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash() -> str:
    """Exit the server process mid-call."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def quit() -> str:
    """Answer, then exit the server process a moment later (between calls)."""
    threading.Timer(0.3, os._exit, (0,)).start()
    return "bye"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def header(ctx: Context) -> str:
    """Say which X-Token header the HTTP request carried."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", {})
    return f"token header is {headers.get('x-token')}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def export(name: str) -> EmbeddedResource:
    """A small CSV report, as a binary resource."""
    blob = base64.b64encode(b"region,rain\nnorth,12\n").decode()
    contents = BlobResourceContents(uri=f"file:///reports/{name}", mime_type="text/csv", blob=blob)
    return EmbeddedResource(type="resource", resource=contents)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def dump(chars: int) -> str:
    """A result of ``chars`` characters, in one line of the protocol."""
    return "x" * chars


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def shout(lines: int, width: int) -> str:
    """Write ``lines`` lines of ``width`` characters to stderr."""
    row = "e" * width + "\n"
    for _ in range(lines):
        sys.stderr.write(row)
    sys.stderr.flush()
    return f"wrote {lines * len(row)} characters to stderr"


LONG = "summarise_the_quarterly_revenue_of_every_region_by_product_line"


@server.tool(name=f"{LONG}_east", annotations=ToolAnnotations(read_only_hint=True))
def east() -> str:
    """A tool whose name is too long for the model vendors (a twin of the next)."""
    return "revenue of the east"


@server.tool(name=f"{LONG}_west", annotations=ToolAnnotations(read_only_hint=True))
def west() -> str:
    """A tool whose long name differs from the one before only past what a model may see."""
    return "revenue of the west"


def _mark(marker: str, text: str) -> None:
    Path(marker).write_text(text)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def wait(marker: str) -> str:
    """Wait for a minute; the file ``marker`` says whether the wait was cancelled."""
    _mark(marker, "started")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        _mark(marker, "cancelled")
        raise
    return "waited"


def _prelude(argv: list[str]) -> list[str]:
    """Write the pid file, wait out ``--delay``; the arguments left."""
    if pid_file := os.environ.get("PID_FILE"):
        Path(pid_file).write_text(str(os.getpid()))
    if argv[:1] == ["--delay"]:
        time.sleep(float(argv[1]))
        return argv[2:]
    return argv


if __name__ == "__main__":
    sys.argv[1:] = _prelude(sys.argv[1:])
    print(f"starting with token {os.environ.get('MCP_TEST_TOKEN', 'none')}", file=sys.stderr)
    if sys.argv[1:2] == ["http"]:
        json_response = sys.argv[3:4] == ["--json"]  # each answer one JSON body, not a stream
        server.run(
            "streamable-http", host="127.0.0.1", port=int(sys.argv[2]), json_response=json_response
        )
    else:
        server.run()
