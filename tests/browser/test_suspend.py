"""Pause and Resume in the widget, in a real JupyterLab driven by headless Chromium.

Locally these tests skip when Chromium is missing; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.b6_lab import open_notebook, run_cells, write_notebook
from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser


STATUS = "document.querySelector('[data-testid=neta-run]')?.dataset.status === {!r}"

# Each run view put on the page whose status line is still blank once the code that put it there
# has run (a MutationObserver's callback comes before the next frame). The kernel updates the
# output at every rest, and JupyterLab then makes the widget's view anew: a new view must come
# with its state, not leave the run's status blank until a frame has rendered it.
RECORD_BLANK_VIEWS = """() => {
  window.__blankViews = 0;
  window.__views = 0;
  new MutationObserver((records) => {
    for (const record of records) for (const node of record.addedNodes) {
      if (!(node instanceof Element)) continue;
      window.__views += node.querySelectorAll('[data-testid=neta-run]').length;
      const found = [...node.querySelectorAll('[data-testid=neta-status]')];
      if (node.matches('[data-testid=neta-status]')) found.push(node);
      window.__blankViews += found.filter((status) => status.textContent === '').length;
    }
  }).observe(document.body, { childList: true, subtree: true });
}"""


GATE_SKILL = """\
import json, os, pathlib, time
gate = pathlib.Path(os.environ["NETA_ROOT_DIR"]) / "gate"
while not gate.exists():
    time.sleep(0.05)
lines = [f"line {i}" for i in range(40)]  # a long output, folded until the user opens it
print(json.dumps({"type": "result", "output": chr(10).join(["the gate opened", *lines])}))
"""


# Every WebSocket and EventSource the page opens, and those to the run API still open.
TRACK_CONNECTIONS = """
window.__netaConnections = [];
for (const name of ['WebSocket', 'EventSource']) {
  const Base = window[name];
  window[name] = class extends Base {
    constructor(...args) { super(...args); window.__netaConnections.push(this); }
  };
}
"""
OPEN_CONNECTIONS = (
    "window.__netaConnections.filter((c) => c.url.includes('/neta/') && c.readyState < 2).length"
)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    rules = [{"tool": "run_skill", "action": "allow"}]
    server = ServerProcess(tmp_path, {"permission_rules": rules}, app="jupyterlab")
    skill = server.root / ".neta" / "skills" / "wait_gate"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: wait_gate\ndescription: waits for a file\nentry: {python} main.py\n---\n"
    )
    (skill / "main.py").write_text(GATE_SKILL)
    yield server
    server.stop()


def test_pause_shows_the_run_paused_and_resume_completes_it(
    lab: ServerProcess, browser: Any, tmp_path: Path
) -> None:
    # The first step runs a skill that waits for the file "gate": the run is paused meanwhile.
    call = {"name": "run_skill", "arguments": {"name": "wait_gate"}}
    script = tmp_path / "gated.json"
    script.write_text(json.dumps({"turns": [{"toolCalls": [call]}, {"text": "All listed."}]}))
    write_notebook(
        lab.root / "pause.ipynb",
        "%load_ext neta_jupyter",
        f"%neta --model scripted:{script} wait for the gate",
    )
    lab.start()
    page = open_notebook(browser, lab, "pause.ipynb", init_script=TRACK_CONNECTIONS)
    page.evaluate(RECORD_BLANK_VIEWS)
    run_cells(page, 2)
    page.locator("[data-testid=neta-run]").first.wait_for(timeout=60_000)
    card = page.locator("[data-testid=neta-tool-card][data-tool-name=run_skill]")
    card.wait_for(timeout=60_000)

    page.wait_for_selector("[data-testid=neta-pause]:visible", timeout=60_000)
    assert page.locator("[data-testid=neta-resume]:visible").count() == 0
    with page.expect_response(lambda r: "suspendTask" in r.url, timeout=30_000) as sent:
        page.click("[data-testid=neta-pause]")
    assert sent.value.status == 200, "the server took the pause while the skill ran"
    (lab.root / "gate").write_text("")
    page.wait_for_function(STATUS.format("suspended"), timeout=90_000)
    assert page.inner_text("[data-testid=neta-status]") == "Paused"
    assert page.locator("[data-testid=neta-pause]:visible").count() == 0
    assert card.get_attribute("data-status") == "completed", "the running tool finished first"
    assert page.locator("[data-testid=neta-answer]:visible").count() == 0
    # The view made anew at the rest connected; the one it replaced follows the run no more.
    page.wait_for_function("window.__netaConnections.length >= 2", timeout=30_000)
    page.wait_for_function(f"{OPEN_CONNECTIONS} === 1", timeout=30_000)
    shot(page, "browser-run-paused")

    # The user opens the tool's long output; the view made anew at the next rest keeps it open.
    page.click(".neta-tool-output-long > summary")
    assert page.locator(".neta-tool-output-long[open]").count() == 1
    views = page.evaluate("window.__views")
    page.click("[data-testid=neta-resume]")
    page.wait_for_function(STATUS.format("completed"), timeout=90_000)
    assert "All listed." in page.inner_text("[data-testid=neta-answer]")
    page.wait_for_function(f"window.__views > {views}", timeout=30_000)
    assert page.locator(".neta-tool-output-long[open]").count() == 1, "still open"
    assert page.evaluate("window.__blankViews") == 0, "a view of the run showed no status"
