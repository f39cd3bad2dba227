"""The picture of the widget in the README and the docs, taken from a real run in JupyterLab.

The test runs the README's headline prompt with the demo model and photographs the widget as it
waits for approval before running Python in the kernel: reasoning, the finished tool cards and
the permission prompt; then the prompt is approved and the run must complete.

The picture is written to ``test-output/``. The committed one, ``docs/_static/widget-mid-run.png``,
must still look like it: when the widget's look changed (another size, or many pixels differ),
the test fails and says to take it again with ``NETA_DOCS_PICTURES=1``, which writes the new
picture there to commit. Small differences (a duration, a token count) do not count.

Locally it skips when Chromium is missing; under ``CI=true`` it fails instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.b6_lab import open_notebook, run_cells, write_notebook
from tests.browser_lab import OUTPUT, shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

PICTURE = Path(__file__).parents[2] / "docs" / "_static" / "widget-mid-run.png"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SIZE_TOLERANCE = 0.1
"""How much wider or taller the new picture may be (a line more or less in a tool card)."""
CHANGED_TOLERANCE = 0.02
"""Share of pixels that may differ: two runs differ by about 0.02 % (a duration, a count), a
line more in a card or another style by far more."""

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
df.loc[rng.choice(200, 8, replace=False), "qty"] = np.nan
del rng"""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path, {"demo_pace": 0.01}, app="jupyterlab")
    yield server
    server.stop()


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    assert data[:8] == PNG_SIGNATURE
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def look_difference(fresh: Path, committed: Path) -> str | None:
    """Why two pictures do not look alike, or None when they do."""
    from PIL import Image, ImageChops

    with Image.open(fresh) as new, Image.open(committed) as old:
        (w1, h1), (w2, h2) = new.size, old.size
        if abs(w1 - w2) > SIZE_TOLERANCE * w2 or abs(h1 - h2) > SIZE_TOLERANCE * h2:
            return f"{w1}x{h1} pixels instead of {w2}x{h2}"
        diff = ImageChops.difference(new.convert("RGB").resize(old.size), old.convert("RGB"))
        changed = diff.convert("L").point(lambda v: 255 if v > 32 else 0).histogram()[255]
    share = changed / (w2 * h2)
    return f"{share:.1%} of its pixels differ" if share > CHANGED_TOLERANCE else None


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
    OUTPUT.mkdir(exist_ok=True)
    fresh = OUTPUT / PICTURE.name
    page.locator(".jp-Cell").nth(2).screenshot(path=str(fresh))
    width, height = png_size(fresh.read_bytes())
    assert width >= 600 and height >= 400, (width, height)
    if os.environ.get("NETA_DOCS_PICTURES") == "1":
        shutil.copyfile(fresh, PICTURE)
    difference = look_difference(fresh, PICTURE)
    assert difference is None, (
        f"the widget no longer looks like {PICTURE.relative_to(PICTURE.parents[2])} "
        f"({difference}): check {fresh}, and take the picture again with NETA_DOCS_PICTURES=1"
    )

    page.click("[data-testid=neta-approve]")
    page.wait_for_function(
        "document.querySelector('[data-testid=neta-run]')?.dataset.status === 'completed'",
        timeout=120_000,
    )
    python_card = page.locator("[data-testid=neta-tool-card][data-tool-name=python]")
    assert python_card.get_attribute("data-status") == "completed"
    assert "discount" in page.inner_text("[data-testid=neta-answer]")
    shot(page, "docs-picture-run-completed")
