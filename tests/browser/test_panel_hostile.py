"""Model output is hostile in the side panel too: the widget's payloads, shown in the panel's view
of the run and in its prompt for approval, change nothing outside their box and load nothing.

Locally these tests skip when Chromium is missing; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.browser_lab  # noqa: F401 (skips the module without Chromium)
from benchmarks.b6_lab import run_cells
from tests.browser.panel_lab import FOLLOWED, open_in, open_panel, panel_server
from tests.browser.test_hostile import (
    FOREIGN,
    RecordingServer,
    escaped_positions,
    notebook,
    settle_then_paths,
    topmost_is_itself,
)
from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

PAGE = """() => {
  const bg = (el) => getComputedStyle(el).backgroundColor + ' ' + getComputedStyle(el).backgroundImage;
  const panel = document.querySelector('[data-testid=neta-panel]');
  const box = panel ? panel.getBoundingClientRect() : null;
  return {
    body: bg(document.body),
    notebook: bg(document.querySelector('.jp-Notebook')),
    panel: box && [box.left, box.width],
    pwned: window.pwned === undefined ? null : String(window.pwned),
    url: location.pathname,
  };
}"""


def foreign_elements(page: Any) -> list[str]:
    """What the widget's allowlists never let through, in any run view on the page (an empty
    style attribute, which the page leaves on a textarea once it has been shown, styles nothing)."""
    return list(
        page.evaluate(
            """(selector) => [...document.querySelectorAll('[data-testid=neta-run]')]
                .flatMap((run) => [...run.querySelectorAll(selector)])
                .filter((e) => !(e.matches('textarea') && e.getAttribute('style') === ''))
                .map((e) => e.outerHTML.slice(0, 120))""",
            FOREIGN.replace("[style]:not(", "[style]:not([style='']):not("),
        )
    )


@pytest.fixture
def attacker() -> Iterator[RecordingServer]:
    server = RecordingServer()
    yield server
    server.stop()


@pytest.fixture
def allowed() -> Iterator[RecordingServer]:
    """A host the configuration allows images from (reached as "localhost")."""
    server = RecordingServer()
    yield server
    server.stop()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    server = panel_server(tmp_path, {"image_hosts": ["localhost"]})
    yield server
    server.stop()


@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_hostile_output_in_the_panel_changes_nothing_outside_its_box_and_loads_nothing(
    app: str,
    lab: ServerProcess,
    browser: Any,
    attacker: RecordingServer,
    allowed: RecordingServer,
    tmp_path: Path,
) -> None:
    notebook(lab, "hostile.ipynb", tmp_path, attacker.port, allowed.port, "hostile")
    lab.start()
    page = open_in(browser, lab, app, "hostile.ipynb")
    panel = open_panel(page)
    before = page.evaluate(PAGE)
    run_cells(page, 2)

    # The run waits for approval: the panel shows it with its prompt, and follows it.
    ask = panel.locator("[data-testid=neta-panel-ask]")
    ask.locator("[data-testid=neta-permission]").wait_for(timeout=120_000)
    panel.locator("[data-testid=neta-panel-run][data-status=suspended]").click()
    page.wait_for_selector(f"{FOLLOWED}[data-status=suspended]", timeout=60_000)
    followed = panel.locator("[data-testid=neta-panel-followed-view]")
    shown = followed.text_content() or ""  # folded parts too
    for where in ("reasoning", "answer", "todo", "args", "file"):
        assert f"overlay in {where}" in shown, where
    assert "overlay in args" in ask.inner_text()

    assert page.evaluate(PAGE) == before
    for scope in ("[data-testid=neta-panel-ask]", "[data-testid=neta-panel-followed-view]"):
        assert topmost_is_itself(page, f"{scope} [data-testid=neta-approve]"), scope
        assert topmost_is_itself(page, f"{scope} [data-testid=neta-deny]"), scope
    assert foreign_elements(page) == []
    assert escaped_positions(page) == []
    shot(page, f"browser-panel-hostile-{app}")

    # Approved from the panel, the run ends with more hostile text: still nothing changes.
    approve = ask.locator("[data-testid=neta-approve]")
    approve.scroll_into_view_if_needed()
    page.wait_for_function(
        "document.querySelector('[data-testid=neta-panel-ask] [data-testid=neta-approve]')"
        "?.dataset.armed === 'true'",
        timeout=30_000,
    )
    approve.click()
    page.wait_for_selector(f"{FOLLOWED}[data-status=completed]", timeout=120_000)
    assert "overlay in final" in (followed.text_content() or "")
    assert page.evaluate(PAGE) == before
    assert foreign_elements(page) == []
    assert escaped_positions(page) == []
    assert settle_then_paths(attacker) == []
