"""Spreads bursts of run starts over turns of the event loop.

Starting a run (its records, first commits, the model request) costs about a millisecond and a
half of the loop's time. Fifty starts arriving together would otherwise all run in one turn of
the loop and stall every stream for tens of milliseconds; admitted a few per window, they still
start within a few milliseconds each while the streams already running keep flowing.
"""

from __future__ import annotations

import asyncio


class StartGate:
    """Admits at most ``per_window`` starts per ``window`` seconds; the rest wait their turn."""

    def __init__(self, per_window: int = 8, window: float = 0.005) -> None:
        self.per_window = per_window
        self.window = window
        self._window_end = 0.0
        self._admitted = 0

    async def __call__(self) -> None:
        """Return once this start may go ahead."""
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            if now >= self._window_end:
                self._window_end = now + self.window
                self._admitted = 0
            if self._admitted < self.per_window:
                self._admitted += 1
                return
            await asyncio.sleep(self._window_end - now)
