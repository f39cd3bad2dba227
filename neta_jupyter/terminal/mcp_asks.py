"""``neta-jupyter mcp asks``: answer, at the terminal, what outside agents' MCP calls ask.

An MCP session's run is not suspended while its call waits: its ask is its ``pendingAsk`` and a
``PERMISSION_ASK`` on its stream. This finds the user's MCP runs that wait, reads each ask from the
run's stream (with its tool, arguments and rule), asks the person (or approves with ``--yes``) and
answers through the run API's resume, as any client of the run API does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from ..client import RunClient
from ..events import EventType, PermissionAskData
from .prompts import PromptSurface, TerminalAsker

POLL = 1.0
"""Seconds between looks at the user's runs."""


async def answer_asks(
    client: RunClient, asker: TerminalAsker, surface: PromptSurface, *, once: bool
) -> int:
    """Answer MCP sessions' asks as they come (``once``: those waiting now); the exit status."""
    answered: set[str] = set()
    while True:
        for run in _waiting(client.runs(), answered):
            answered.add(run["pendingAsk"]["askId"])
            ask = await _ask_of(client, run["requestId"], run["pendingAsk"]["askId"])
            if ask is None:
                continue
            decision = await asker.permission(ask)
            await client.resume(
                run["requestId"],
                approved=decision.approved,
                ask_id=ask.ask_id,
                always=decision.always,
                digest=ask.digest,
            )
            verdict = "approved" if decision.approved else "denied"
            surface.notice(f"{verdict}: {ask.tool_name} of {run['origin'].get('client')}")
        if once:
            return 0
        await asyncio.sleep(POLL)


def _waiting(runs: list[dict[str, Any]], answered: set[str]) -> list[dict[str, Any]]:
    """The MCP runs whose ask has not been answered here."""
    return [
        run
        for run in runs
        if run.get("origin", {}).get("kind") == "mcp"
        and run.get("status") == "running"
        and run.get("pendingAsk")
        and run["pendingAsk"]["askId"] not in answered
    ]


async def _ask_of(client: RunClient, request_id: str, ask_id: str) -> PermissionAskData | None:
    """The ask, as the run's stream told it (``None``: no longer there)."""
    # The run goes on while it waits, so its stream has no end to wait for: read up to the ask.
    events = client.follow(request_id)
    async with contextlib.aclosing(events):
        async for item in events:
            if item.event_type != EventType.PERMISSION_ASK:
                continue
            data = json.loads(item.payload).get("data", {})
            if data.get("askId") == ask_id:
                return PermissionAskData.model_validate(data)
            if item.terminal:
                break
    return None
