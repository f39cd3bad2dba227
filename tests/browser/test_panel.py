"""The neta side panel in a real JupyterLab, driven by headless Chromium: every run of the user
(from a cell, the terminal, the REST API), followed live in the widget's own view, restored after
a reload; a cell's ask approved from the panel.

Locally these tests skip when Chromium is missing; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.browser_lab  # noqa: F401 (skips the module without Chromium)
from benchmarks.b6_lab import run_cells, write_notebook
from tests.browser.panel_lab import FOLLOWED, open_in, open_panel, panel_server, run_row
from tests.browser_lab import shot
from tests.cli_helpers import cli
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

GATE_SKILL = """\
import json, os, pathlib, time
gate = pathlib.Path(os.environ["NETA_ROOT_DIR"]) / "gate"
while not gate.exists():
    time.sleep(0.05)
print(json.dumps({"type": "result", "output": "the gate opened"}))
"""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    rules = [{"tool": "run_skill", "action": "allow"}]
    server = panel_server(tmp_path, {"permission_rules": rules})
    skill = server.root / ".neta" / "skills" / "wait_gate"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: wait_gate\ndescription: waits for a file\nentry: {python} main.py\n---\n"
    )
    (skill / "main.py").write_text(GATE_SKILL)
    yield server
    server.stop()


def gated_script(tmp_path: Path) -> Path:
    call = {"name": "run_skill", "arguments": {"name": "wait_gate"}}
    script = tmp_path / "gated.json"
    script.write_text(json.dumps({"turns": [{"toolCalls": [call]}, {"text": "The gate opened."}]}))
    return script


def followed_status(status: str) -> str:
    return f"document.querySelector({FOLLOWED!r})?.dataset.status === {status!r}"


@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_the_panel_lists_runs_from_a_cell_the_terminal_and_the_api_and_follows_one_live(
    lab: ServerProcess, browser: Any, tmp_path: Path, app: str
) -> None:
    write_notebook(
        lab.root / "panel.ipynb", "%load_ext neta_jupyter", "%neta --model demo hello from a cell"
    )
    lab.start()
    terminal = cli(
        "run",
        "--server",
        lab.url,
        "--token",
        lab.token,
        "--model",
        "demo",
        "hello from the terminal",
    )
    assert terminal.returncode == 0, terminal.stdout + terminal.stderr
    with lab.client() as http:
        started = http.post(
            "neta/api/agent/run/async",
            json={"content": "hello from the api", "model": f"scripted:{gated_script(tmp_path)}"},
        )
    assert started.status_code == 200, started.text
    api_run = started.json()["requestId"]

    page = open_in(browser, lab, app, "panel.ipynb")
    run_cells(page, 2)
    panel = open_panel(page)
    for origin, text in (("cell", "hello from a cell"), ("terminal", "hello from the terminal")):
        run_row(page, origin, text).wait_for(timeout=60_000)
    row = run_row(page, "api", "hello from the api")
    row.wait_for(timeout=60_000)
    assert "panel.ipynb" in run_row(page, "cell", "hello from a cell").inner_text()
    assert row.get_attribute("data-status") == "running"

    # Followed while it waits for its skill, the run goes on live in the panel's view.
    row.click()
    page.wait_for_selector(f"{FOLLOWED}[data-status=running]", timeout=60_000)
    page.wait_for_selector(
        "[data-testid=neta-panel-followed-view] [data-testid=neta-tool-card][data-tool-name=run_skill]",
        timeout=60_000,
    )
    (lab.root / "gate").write_text("")
    page.wait_for_function(followed_status("completed"), timeout=90_000)
    assert (
        "The gate opened."
        in panel.locator(
            "[data-testid=neta-panel-followed-view] [data-testid=neta-answer]"
        ).inner_text()
    )
    page.wait_for_selector(
        f"[data-testid=neta-panel-run][data-request-id={api_run}][data-status=completed]",
        timeout=60_000,
    )
    shot(page, f"browser-panel-followed-{app}")

    # A reload shows the panel again, following the same run.
    page.goto(
        f"{lab.url}{'lab/tree' if app == 'lab' else 'notebooks'}/panel.ipynb?token={lab.token}"
    )
    page.wait_for_selector("[data-testid=neta-panel]", state="visible", timeout=90_000)
    page.wait_for_function(followed_status("completed"), timeout=90_000)
    followed = page.locator("[data-testid=neta-panel-followed]")
    assert followed.get_attribute("data-request-id") == api_run
    assert "The gate opened." in followed.inner_text()
    if app == "lab":
        assert_commands_and_settings(page, lab)


def assert_commands_and_settings(page: Any, lab: ServerProcess) -> None:
    """The palette has the panel's commands; the settings editor has its settings."""
    page.click(".lm-MenuBar-itemLabel:text-is('View')")
    page.click(".lm-Menu-itemLabel:text-is('Activate Command Palette')")
    palette = page.locator(".lm-CommandPalette")
    palette.locator("input").fill("neta")
    for label in ("Open the neta panel", "Ask neta (the panel's prompt)"):
        palette.locator(f".lm-CommandPalette-item:has-text({label!r})").wait_for(timeout=30_000)
    page.keyboard.press("Escape")
    with lab.client() as http:
        settings = http.get("lab/api/settings/neta-jupyter:panel")
    assert settings.status_code == 200, settings.text
    schema = settings.json()["schema"]
    assert schema["title"] == "neta"
    assert set(schema["properties"]) == {"pollSeconds", "notifyAsks", "bindToNotebook", "area"}


@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_an_ask_of_a_cells_run_is_approved_from_the_panel_and_the_cell_goes_on(
    lab: ServerProcess, browser: Any, tmp_path: Path, app: str
) -> None:
    call = {"name": "python", "arguments": {"code": "print(6 * 7)"}}
    script = tmp_path / "asks.json"
    script.write_text(json.dumps({"turns": [{"toolCalls": [call]}, {"text": "Six times seven."}]}))
    write_notebook(
        lab.root / "ask.ipynb",
        "%load_ext neta_jupyter",
        f"%neta --model scripted:{script} multiply for me",
    )
    lab.start()
    page = open_in(browser, lab, app, "ask.ipynb")
    run_cells(page, 2)
    cell_prompt = page.locator(".jp-Cell [data-testid=neta-permission]")
    cell_prompt.wait_for(timeout=90_000)

    panel = open_panel(page)
    if app == "lab":
        tab = page.locator("li.lm-TabBar-tab[data-id=neta-panel]")
        page.wait_for_function(
            "document.querySelector('li.lm-TabBar-tab[data-id=neta-panel]')"
            "?.dataset.netaAsks === '1'",
            timeout=60_000,
        )
        assert "neta (1)" in tab.inner_text()
    assert panel.locator("[data-testid=neta-panel-asks-heading]").inner_text() == (
        "Waiting for you (1)"
    )
    ask = panel.locator("[data-testid=neta-panel-ask]")
    ask.wait_for(timeout=60_000)
    assert "print(6 * 7)" in ask.inner_text()
    approve = ask.locator("[data-testid=neta-approve]")
    approve.scroll_into_view_if_needed()
    # The prompt arms once it has been in view a moment: the click waits until it counts.
    page.wait_for_function(
        "(() => { const b = document.querySelector("
        "'[data-testid=neta-panel-ask] [data-testid=neta-approve]'); "
        "return b && !b.disabled && b.dataset.armed !== 'false'; })()",
        timeout=30_000,
    )
    with page.expect_response(lambda r: "resumeTask" in r.url, timeout=30_000) as sent:
        approve.click()
    assert sent.value.status == 200

    # The cell's prompt resolves and its run goes on to the end.
    cell_prompt.wait_for(state="hidden", timeout=60_000)
    page.wait_for_function(
        "document.querySelector('.jp-Cell [data-testid=neta-run]')?.dataset.status === 'completed'",
        timeout=90_000,
    )
    assert "Six times seven." in page.inner_text(".jp-Cell [data-testid=neta-answer]")
    ask.wait_for(state="detached", timeout=60_000)
    if app == "lab":
        page.wait_for_function(
            "document.querySelector('li.lm-TabBar-tab[data-id=neta-panel]')"
            "?.dataset.netaAsks === '0'",
            timeout=60_000,
        )
    shot(page, f"browser-panel-approved-{app}")


@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_a_run_from_the_panel_reads_the_active_notebooks_kernel_and_answers(
    lab: ServerProcess, browser: Any, app: str
) -> None:
    write_notebook(
        lab.root / "vars.ipynb",
        "import pandas as pd\nsales = pd.DataFrame({'units': [3, 5, 7], 'price': [2.0, 4.0, 6.0]})",
    )
    lab.start()
    page = open_in(browser, lab, app, "vars.ipynb")
    run_cells(page, 1)
    page.wait_for_selector(".jp-InputPrompt:has-text('[1]')", timeout=90_000)

    panel = open_panel(page)
    assert "vars.ipynb" in panel.locator("[data-testid=neta-panel-target]").inner_text()
    panel.locator("[data-testid=neta-panel-model]").select_option("demo")
    page.keyboard.type("which variables do I have?")
    panel.locator("[data-testid=neta-panel-send]").click()

    followed = panel.locator("[data-testid=neta-panel-followed-view]")
    card = followed.locator("[data-testid=neta-tool-card][data-tool-name=list_variables]")
    card.wait_for(timeout=90_000)
    page.wait_for_function(followed_status("completed"), timeout=120_000)
    assert "sales: DataFrame (3, 2)" in card.inner_text()
    answer = followed.locator("[data-testid=neta-answer]").inner_text()
    assert "sales" in answer, answer
    row = run_row(page, "panel", "which variables do I have?")
    row.wait_for(timeout=60_000)
    assert "vars.ipynb" in row.inner_text()
    shot(page, f"browser-panel-{app}-ask")

    # The answer goes into the open notebook as a markdown cell, with the run as its provenance.
    panel.locator("[data-testid=neta-panel-insert-markdown]").click()
    page.wait_for_selector(".jp-Notebook .jp-MarkdownCell", timeout=60_000)
    assert "Inserted at the end of vars.ipynb." in panel.inner_text()
    page.wait_for_function(
        "(document.querySelector('.jp-Notebook .jp-MarkdownCell')?.innerText || '').includes('sales')",
        timeout=30_000,
    )
