"""A stdio MCP server's stderr, line by line into the server log with secrets cut out."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TextIO


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
        self._reader.start()

    def _pump(self, lines: TextIO) -> None:
        with lines:
            for line in lines:
                if text := line.rstrip():
                    self._log.info("neta: MCP server %s: %s", self._name, self._redact(text))

    def started(self) -> None:
        """The server has its own copy of the pipe: ours closes, so its exit ends the reader."""
        self.file.close()

    def __enter__(self) -> StderrLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        if not self.file.closed:
            self.file.close()
