"""For unit tests of the runtime's helpers on :class:`~neta_jupyter.runtime.fake_host.FakeHost`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neta_jupyter.runtime.config import RuntimeConfig
from neta_jupyter.runtime.data.runs import Run
from neta_jupyter.runtime.fake_host import FakeHost, FakeLeases

TERMINAL = frozenset({"MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED"})


def host_on(tmp_path: Path, **config: Any) -> FakeHost:
    """A host on a fresh in-memory store (``config``: settings of the runtime)."""
    return FakeHost(RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path, **config))


def shared_host(tmp_path: Path, replica: str = "here") -> tuple[FakeHost, FakeLeases]:
    """A host whose store other servers share, and the leases the test lays out."""
    host = host_on(tmp_path)
    leases = FakeLeases(replica)
    host.store.leases = leases
    return host, leases


async def events_of(host: FakeHost, run: Run) -> list[dict[str, Any]]:
    """The run's stored events, in order."""
    rows = await host.store.events.read_after(run.request_id, -1, 10_000)
    return [json.loads(row.payload) for row in rows]


async def terminal_events(host: FakeHost, run: Run) -> list[dict[str, Any]]:
    """The run's stored terminal events."""
    return [e for e in await events_of(host, run) if e["eventType"] in TERMINAL]


async def until(condition: Callable[[], object], why: str, seconds: float = 30.0) -> None:
    """Wait for ``condition`` (a bound only so that a hang fails with ``why``)."""
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(why)
