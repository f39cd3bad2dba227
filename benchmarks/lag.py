"""An event-loop lag monitor that runs inside a server process (the neta one and the bare one)."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

INTERVAL = 0.005


class LagMonitor:
    """Sleeps ``INTERVAL`` in a loop and records how late each wake-up was."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.collections: list[tuple[int, float]] = []
        self._task: asyncio.Task[None] | None = None
        self._gc_began = 0.0

    def start(self) -> None:
        self.stop()
        self.samples = []
        self.collections = []
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> list[float]:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        return self.samples

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        """Times each collection, so a lag can be told apart from a collector pause."""
        if phase == "start":
            self._gc_began = time.perf_counter()
        else:
            self.collections.append((info["generation"], time.perf_counter() - self._gc_began))

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(INTERVAL)
            self.samples.append(max(0.0, loop.time() - before - INTERVAL))

    def act(self, action: str) -> dict[str, Any]:
        """``start`` clears and starts sampling; ``stop`` stops and returns the samples;
        ``gc`` reports the collector's counters and how many objects it tracks."""
        if action == "start":
            self.start()
            return {"started": True}
        if action == "gc":
            began = time.perf_counter()
            gc.collect()
            took = time.perf_counter() - began
            return {"stats": gc.get_stats(), "tracked": len(gc.get_objects()), "full": took}
        samples = self.stop()
        return {"samples": samples, "collections": self.collections}


MONITOR = LagMonitor()
