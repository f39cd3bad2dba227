"""The picture of the widget in the README and the docs, taken from a real run in JupyterLab.

The test runs the README's headline prompt with the demo model and photographs the widget as it
waits for approval before running Python in the kernel: reasoning, the finished tool cards and
the permission prompt. The PNG is written to ``docs/_static/widget-mid-run.png`` (committed), so
the picture shows the widget as it is; then the prompt is approved and the run must complete.

Locally it skips when Chromium is missing; under ``CI=true`` it fails instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.b6_lab import open_notebook, run_cells, write_notebook
from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

PICTURE = Path(__file__).parent.parent / "docs" / "_static" / "widget-mid-run.png"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

DATAFRAME = """\
import numpy as np
import pandas as pd

rng = np.random.default_rng(7)
df = pd.DataFrame({
    "price": rng.normal(20, 4, 200).round(2),
    "qty": rng.integers(1, 12, 200).astype(float),
    "discount": rng.uniform(0, 0.3, 200).round(3),
})
df.loc[rng.choice(200, 30, replace=False), "discount"] = np.nan
df.loc[rng.choice(200, 8, replace=False), "qty"] = np.nan"""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path, {"demo_pace": 0.01}, app="jupyterlab")
    yield server
    server.stop()


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    assert data[:8] == PNG_SIGNATURE
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_widget_picture_at_the_approval_prompt(lab: ServerProcess, browser: Any) -> None:
    write_notebook(
        lab.root / "analysis.ipynb",
        DATAFRAME,
        "%matplotlib inline\n%load_ext neta_jupyter",
        "%neta which columns of df have missing values, and plot the worst one",
    )
    lab.start()
    page = open_notebook(browser, lab, "analysis.ipynb")
    page.set_viewport_size({"width": 1100, "height": 1400})
    # JupyterLab's own toasts (its offer of news) would cover the widget in the picture.
    page.add_style_tag(content=".Toastify { display: none !important; }")
    page.keyboard.press("Control+b")  # fold the file browser away: the notebook gets the width
    run_cells(page, 3)

    prompt = page.locator("[data-testid=neta-permission]")
    prompt.wait_for(state="visible", timeout=90_000)
    assert "python" in prompt.inner_text()
    cards = page.locator("[data-testid=neta-tool-card]")
    assert cards.count() >= 2  # what it looked at before asking: the variables, then df
    page.wait_for_function(
        "[...document.querySelectorAll('[data-testid=neta-tool-card]')]"
        ".filter(c => c.dataset.toolName !== 'python')"
        ".every(c => c.dataset.status === 'completed')",
        timeout=60_000,
    )
    # The buttons take clicks once the prompt has been in view for a moment: photograph them so.
    page.wait_for_selector("[data-testid=neta-approve]:enabled", timeout=30_000)
    PICTURE.parent.mkdir(parents=True, exist_ok=True)
    page.locator(".jp-Cell").nth(2).screenshot(path=str(PICTURE))
    width, height = png_size(PICTURE.read_bytes())
    assert width >= 600 and height >= 400, (width, height)

    page.click("[data-testid=neta-approve]")
    page.wait_for_function(
        "document.querySelector('[data-testid=neta-run]')?.dataset.status === 'completed'",
        timeout=120_000,
    )
    python_card = page.locator("[data-testid=neta-tool-card][data-tool-name=python]")
    assert python_card.get_attribute("data-status") == "completed"
    assert "discount" in page.inner_text("[data-testid=neta-answer]")
    shot(page, "docs-picture-run-completed")
