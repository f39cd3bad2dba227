"""Between neta and a stdio MCP server: its messages passed on, none larger than a limit.

Run as a script (``python _relay.py MAX_BYTES COMMAND [ARGS…]``), with the standard library only,
so it starts in milliseconds. It starts the server, copies neta's stdin to the server's, and the
server's stdout back line by line: each line is one JSON-RPC message. A line over ``MAX_BYTES`` is
never held: it is skipped as it streams, and a response (the only large messages are results) is
replaced by a JSON-RPC error for the same request id, so the call fails at once, saying why.

Why a process of its own: the SDK's stdio reader runs on neta's event loop and joins a line's
pieces anew at each piece, which takes time quadratic in the line's length; a server's 60 MB
result would stall every other run. Lines that reach neta here are all below the limit.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
from typing import IO

_CHUNK = 1 << 16
_HEAD = 4096
"""Bytes of a refused line kept to find its request id."""
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')
REFUSED = -32050
"""The JSON-RPC error code of a message refused for its size (one the SDK gives no meaning)."""


def refusal(head: bytes, size: int, limit: int) -> bytes | None:
    """The error to send instead of a refused message, or ``None`` when it answers nothing."""
    if b'"method"' in head:
        return None  # a notification or a request of the server's: nothing waits for it
    found = _ID.search(head)
    if found is None:
        return None
    return refused(json.loads(found.group(1)), size, limit)


def refused(request_id: object, size: int, limit: int) -> bytes:
    """The JSON-RPC error answering ``request_id`` for a result of ``size`` bytes (one line)."""
    error = {
        "code": REFUSED,
        "message": (
            f"the result is {size:,} bytes, over the limit of {limit:,} bytes for one "
            "MCP message (mcp_max_result_bytes); ask for less"
        ),
    }
    message = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return json.dumps(message).encode() + b"\n"


class _Line:
    """The line being read: its pieces while under the limit, only its head once over it."""

    def __init__(self, limit: int) -> None:
        self.limit, self.parts, self.size, self.over = limit, list[bytes](), 0, False

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.over:
            return
        self.parts.append(piece)
        if self.size > self.limit + 1:  # + 1: the newline is not part of the message
            self.over, self.parts = True, [b"".join(self.parts)[:_HEAD]]

    def out(self) -> bytes | None:
        """What to pass on for the complete line."""
        if not self.over:
            return b"".join(self.parts)
        return refusal(self.parts[0], self.size - 1, self.limit)  # - 1: the newline


def copy_lines(source: IO[bytes], sink: IO[bytes], limit: int) -> None:
    """Lines of ``source`` to ``sink``; one over ``limit`` bytes replaced by :func:`refusal`."""
    line = _Line(limit)
    while chunk := source.read1(_CHUNK):  # type: ignore[attr-defined]
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            line.add(chunk[start : end + 1])
            if (out := line.out()) is not None:
                sink.write(out)
                sink.flush()
            line, start = _Line(limit), end + 1
        line.add(chunk[start:])


def copy_stdin(source: IO[bytes], sink: IO[bytes]) -> None:
    """Neta's messages to the server, until neta closes its end (the server then exits)."""
    try:
        while chunk := source.read1(_CHUNK):  # type: ignore[attr-defined]
            sink.write(chunk)
            sink.flush()
    except (BrokenPipeError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.close()


def main(argv: list[str]) -> int:
    limit, command = int(argv[0]), argv[1:]
    try:
        server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as exc:
        print(f"could not start {command[0]}: {exc}", file=sys.stderr)
        return 127
    assert server.stdin is not None
    assert server.stdout is not None
    writer = threading.Thread(target=copy_stdin, args=(sys.stdin.buffer, server.stdin), daemon=True)
    writer.start()
    try:
        copy_lines(server.stdout, sys.stdout.buffer, limit)
    except (BrokenPipeError, OSError):
        server.kill()
    return server.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
