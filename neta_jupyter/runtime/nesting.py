"""How deep a request may nest, checked without recursing (Python's own limit is ~1000 frames).

One limit for every way a structure reaches the server: JSON bodies and frames, and YAML crew
definitions (which are parsed into the same kind of objects).
"""

from __future__ import annotations

from typing import Any

MAX_NESTING = 64
"""Deepest nesting of objects and arrays a body may have (tool schemas need far less).

Deeper values would exhaust Python's recursion limit somewhere later (validation, storage)."""


def deeper_than(value: dict[str, Any] | list[Any], limit: int = MAX_NESTING) -> bool:
    """Whether objects and arrays nest more than ``limit`` levels (without recursing)."""
    level: list[Any] = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True
