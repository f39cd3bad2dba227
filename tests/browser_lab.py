"""What the browser tests share: Chromium found or the module skipped, and their screenshots.

A test module that imports this skips locally when Chromium (or playwright) is missing; under
``CI=true`` a missing Chromium fails it instead. The ``browser`` fixture (``conftest``) launches
the Chromium found here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from benchmarks.b6_lab import chromium_path

CHROMIUM = chromium_path()
OUTPUT = Path(__file__).parent.parent / "test-output"
"""Where the screenshots go."""

if CHROMIUM is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI=true but Chromium is missing: install Debian's chromium package")
    pytest.skip("Chromium is not installed; the browser tests need it", allow_module_level=True)

pytest.importorskip("playwright.sync_api")


def shot(page: Any, name: str) -> None:
    """A full-page screenshot ``name``.png in :data:`OUTPUT`."""
    OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUTPUT / f"{name}.png"), full_page=True)
