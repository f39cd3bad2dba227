"""Long executions in the kernel: what the user sees while one runs.

An execution (``python``, a notebook cell) may run for as long as its run may: its time limit is
the tool context's ``execution_timeout``. While it runs, :class:`ExecutionProgress` forwards what
it prints to the tool card's stream and, once it has run a while, updates the card's title and
the process timeline every :data:`PROGRESS_INTERVAL` seconds with the time it has taken, the
lines it printed and its last line. Short executions publish neither, so a quick cell costs no
extra events.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from types import TracebackType

from .registry import ToolContext
from .values import ToolError, ToolResult

PROGRESS_INTERVAL = 5.0
"""Seconds between progress updates of a running execution (its card's title, its timeline)."""
MAX_LAST_LINE = 120
"""Characters of the last printed line shown in the title."""


async def in_background(
    ctx: ToolContext, message: str, work: Callable[[float | None], Awaitable[ToolResult]]
) -> ToolResult:
    """``work``'s result, the run suspended while it runs (``RunScope.in_background``)."""
    if ctx.scope is None:
        raise ToolError("code runs in the background only inside a run; run it without that")
    return await ctx.scope.in_background(work, message)


def elapsed_text(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 03 min``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


class ExecutionProgress:
    """One execution's output stream and periodic progress (use as ``async with``).

    ``output`` is the bridge's ``on_output``: it hands the text on to the card's stream and
    keeps count of the lines and the last one.
    """

    def __init__(self, ctx: ToolContext, title: str, *, interval: float | None = None) -> None:
        self._ctx = ctx
        self._title = title
        self._interval = interval or PROGRESS_INTERVAL
        self._stream: Callable[[str], None] | None = ctx.scope.stream if ctx.scope else None
        self._began = time.monotonic()
        self._lines = 0
        self._last = ""
        self._partial = ""
        self._ticker: asyncio.Task[None] | None = None

    def output(self, text: str) -> None:
        """What the execution printed, as it comes."""
        if self._stream is not None:
            self._stream(text)
        self._lines += text.count("\n")
        *done, self._partial = (self._partial + text).split("\n")
        shown = [line.rsplit("\r", 1)[-1].strip() for line in [*done, self._partial]]
        self._last = next((line for line in reversed(shown) if line), self._last)
        self._partial = self._partial[-4 * MAX_LAST_LINE :]

    async def __aenter__(self) -> ExecutionProgress:
        self._began = time.monotonic()
        self._ticker = asyncio.ensure_future(self._tick())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker

    def title(self) -> str:
        """The card's title now: how long it has run, what it printed last."""
        parts = [elapsed_text(time.monotonic() - self._began)]
        if self._lines:
            parts.append(f"{self._lines} line{'s' if self._lines != 1 else ''} printed")
        title = f"{self._title} · {', '.join(parts)}"
        if self._last:
            last = self._last if len(self._last) <= MAX_LAST_LINE else self._last[:119] + "…"
            title += f" · {last}"
        return title

    async def _tick(self) -> None:
        first = True
        while True:
            await asyncio.sleep(self._interval)
            elapsed = time.monotonic() - self._began
            self._ctx.report(self.title())
            self._ctx.process.report(
                status="started" if first else "running",
                stage="executing",
                message=self._last or self._title,
                payload={"elapsedSeconds": round(elapsed, 1), "lines": self._lines},
                source="runtime",  # the user's timeline; the model reads the result
            )
            first = False
