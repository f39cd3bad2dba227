"""Placeholder."""

from __future__ import annotations

from .harness import Row, Settings


async def run(settings: Settings) -> list[Row]:
    return []
