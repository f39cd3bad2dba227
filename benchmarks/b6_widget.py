"""B6 widget: needs headless Chromium and the browser harness, which live elsewhere for now.

The row stays in the table so that a run shows what is not covered.
"""

from __future__ import annotations

from .harness import Row, Settings


async def run(settings: Settings) -> list[Row]:
    return [
        Row(
            "B6 widget: highest delta rate without a main-thread task over 50 ms; "
            "arrival to text on screen p99",
            "",
            [],
            note="needs the browser harness",
        )
    ]
