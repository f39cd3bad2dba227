"""A stdio MCP server's stderr, line by line into the server log with secrets cut out.

The server is not ours: what it writes is capped. A line is cut at :data:`MAX_LINE_CHARS`, and
at most :data:`BUDGET_CHARS` characters a minute are logged; past that, one line says so, and
when the minute is over, another says how much was left out.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TextIO

MAX_LINE_CHARS = 2000
BUDGET_CHARS = 64 * 1024
"""Characters of one server's stderr logged per :data:`WINDOW` seconds."""
WINDOW = 60.0


class StderrLog:
    """A stdio server's stderr, line by line into the server log with secrets cut out."""

    def __init__(self, name: str, logger: logging.Logger, redact: Callable[[str], str]) -> None:
        read_end, write_end = os.pipe()
        self.file: TextIO = os.fdopen(write_end, "w")
        self._reader = threading.Thread(
            target=self._pump,
            args=(os.fdopen(read_end, encoding="utf-8", errors="replace"),),
            name=f"mcp-{name}-stderr",
            daemon=True,
        )
        self._name, self._log, self._redact = name, logger, redact
        self._window_start, self._spent, self._left_out = time.monotonic(), 0, [0, 0]
        self._reader.start()

    def _pump(self, lines: TextIO) -> None:
        with lines:
            while line := lines.readline(MAX_LINE_CHARS):
                cut = len(line) >= MAX_LINE_CHARS and not line.endswith("\n") and _skip_rest(lines)
                if text := line.rstrip():
                    self._emit(
                        f"{text} … [line cut at {MAX_LINE_CHARS} characters]" if cut else text
                    )
        self._report_left_out()

    def _emit(self, text: str) -> None:
        now = time.monotonic()
        if now - self._window_start >= WINDOW:
            self._report_left_out()
            self._window_start, self._spent = now, 0
        if self._spent >= BUDGET_CHARS:
            self._left_out[0] += 1
            self._left_out[1] += len(text)
            return
        self._spent += len(text)
        self._log.info("neta: MCP server %s: %s", self._name, self._redact(text))
        if self._spent >= BUDGET_CHARS:
            self._log.warning(
                "neta: MCP server %s writes more than %d characters a minute to stderr; the "
                "rest of this minute is not logged",
                self._name,
                BUDGET_CHARS,
            )

    def _report_left_out(self) -> None:
        count, chars = self._left_out
        if count:
            self._log.warning(
                "neta: MCP server %s: %d lines (%d characters) of stderr were not logged",
                self._name,
                count,
                chars,
            )
        self._left_out = [0, 0]

    def started(self) -> None:
        """The server has its own copy of the pipe: ours closes, so its exit ends the reader."""
        self.file.close()

    def __enter__(self) -> StderrLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        if not self.file.closed:
            self.file.close()


def _skip_rest(lines: TextIO) -> bool:
    """Read past the rest of a line that was cut (never holding more than a piece of it)."""
    while piece := lines.readline(MAX_LINE_CHARS):
        if piece.endswith("\n"):
            break
    return True
