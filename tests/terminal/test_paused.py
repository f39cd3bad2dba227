"""The terminal client shows a paused run as paused."""

from __future__ import annotations

import io
import json

from rich.console import Console

from neta_jupyter.cli_render import TerminalRenderer
from neta_jupyter.terminal.live import LiveRenderer

PAUSED = json.dumps(
    {
        "eventType": "MESSAGE_SUSPENDED",
        "seq": 0,
        "requestId": "r_1",
        "data": {
            "type": "message",
            "suspendReason": {"type": "MANUAL_SUSPEND", "message": "paused by the user"},
        },
    }
)


def test_a_paused_run_is_shown_paused_live_and_in_plain_lines() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, height=20, force_terminal=True, color_system=None)
    live = LiveRenderer(out, console=console)
    live.feed(PAUSED)
    live.close()
    assert "⏸ paused: paused by the user" in out.getvalue()

    plain = io.StringIO()
    TerminalRenderer(plain, color=False).feed(PAUSED)
    assert "⏸ paused: paused by the user" in plain.getvalue()
