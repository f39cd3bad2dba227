"""The notebook edits and MCP tools of a run in a real JupyterLab with collaboration, in headless
Chromium: the permission prompt shows the edit's diff, the tool card its diff and a Revert button
that restores the cell in the open notebook (and refuses when the user changed the cell since),
the reverted state survives a reload; an MCP tool's card and prompt name its server; a run that
ends while the page is hidden raises a notification and JupyterLab's toast, and its replay does not.

Locally these tests skip when Chromium is missing; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from benchmarks.b6_lab import open_notebook, run_cells
from neta_jupyter.tools.notebook_doc import source_hash
from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

BEFORE_A = "total = sum(values)"
BEFORE_B = "mean = total / len(values)"
MCP_SERVER = str(Path(__file__).parents[1] / "mcp" / "sdk_server.py")


def write_notebook(path: Path, *sources: str) -> list[str]:
    """A notebook of code cells with a Python kernel; the cells' ids."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.write_text(nbformat.writes(nb))
    return [str(c.id) for c in nb.cells]


def set_source(path: Path, index: int, source: str) -> None:
    """Change one cell's source, keeping every cell's id."""
    nb = nbformat.read(path, as_version=4)
    nb.cells[index].source = source
    nbformat.write(nb, path)


def scripted(path: Path, *turns: dict[str, Any]) -> str:
    path.write_text(json.dumps({"turns": list(turns)}))
    return f"scripted:{path}"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"toolCalls": [{"name": name, "arguments": arguments}]}


def source_of(page: Any, index: int) -> str:
    """What the editor of cell ``index`` shows."""
    return str(page.locator(".jp-Cell").nth(index).locator(".cm-content").inner_text())


def wait_source(page: Any, index: int, text: str) -> None:
    page.wait_for_function(
        "([i, text]) => document.querySelectorAll('.jp-Cell')[i]"
        "?.querySelector('.cm-content')?.innerText === text",
        arg=[index, text],
        timeout=60_000,
    )


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServerProcess]:
    notes = {"NOTES_FILE": str(tmp_path / "notes.txt")}
    mcp = {"warehouse": {"command": sys.executable, "args": [MCP_SERVER], "env": notes}}
    server = ServerProcess(
        tmp_path,
        {"mcp_servers": mcp},
        app="jupyterlab",
        args=["--YDocExtension.document_save_delay=0.2"],
    )
    yield server
    server.stop()


def click_until(button: Any, done: Callable[[], None], what: str) -> None:
    """Click ``button`` as a user does until ``done()`` returns (it raises on a timeout).

    The button arms only while in view, so it is scrolled there first; on a busy machine a click
    that came before it armed, or that the page moved away from, is (rightly) ignored: click again.
    At rest the kernel refreshes the cell's output and JupyterLab draws the view anew, so the
    button a click aimed at may be gone: the user clicks the new one.
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(3):
        try:
            button.scroll_into_view_if_needed()
            button.click()
            done()
            return
        except PlaywrightTimeout:
            continue
        except PlaywrightError as exc:
            if "not attached" not in str(exc):
                raise
    raise AssertionError(f"three deliberate clicks on {what} had no effect")


def approve(page: Any) -> None:
    """Approve the prompt: done once the prompt is gone or already shows the run's next ask."""
    page.wait_for_selector("[data-testid=neta-permission]:visible", timeout=60_000)
    asked = page.inner_text("[data-testid=neta-permission]")
    click_until(
        page.locator("[data-testid=neta-approve]"),
        lambda: page.wait_for_function(
            """(asked) => {
                const prompt = document.querySelector('[data-testid=neta-permission]');
                return !prompt || prompt.offsetParent === null || prompt.innerText !== asked;
            }""",
            arg=asked,
            timeout=20_000,
        ),
        "Approve",
    )


def revert(edit: Any, outcome: Any) -> None:
    """Click an edit's Revert until ``outcome`` (a locator) shows."""
    click_until(
        edit.locator("[data-testid=neta-revert]"),
        lambda: outcome.wait_for(state="visible", timeout=20_000),
        "Revert",
    )


def test_revert_restores_the_cell_is_refused_after_a_user_change_and_survives_a_reload(
    lab: ServerProcess, browser: Any, tmp_path: Path
) -> None:
    notebook = lab.root / "work.ipynb"
    ids = write_notebook(notebook, "%load_ext neta_jupyter", "", BEFORE_A, BEFORE_B)
    model = scripted(
        tmp_path / "edits.json",
        call("edit_cell", cell_id=ids[2], source="total = 0", source_hash=source_hash(BEFORE_A)),
        call("edit_cell", cell_id=ids[3], source="mean = 0", source_hash=source_hash(BEFORE_B)),
        {"text": "Both cells reset."},
    )
    set_source(notebook, 1, f"%neta --model {model} reset the totals")
    lab.start()
    page = open_notebook(browser, lab, "work.ipynb")
    run_cells(page, 2)

    # The prompt shows the edit as a diff before it is made.
    page.wait_for_selector("[data-testid=neta-permission]:visible", timeout=90_000)
    preview = page.inner_text("[data-testid=neta-permission-preview]")
    assert f"-{BEFORE_A}" in preview and "+total = 0" in preview, preview
    approve(page)
    approve(page)
    page.wait_for_function(
        "document.querySelector('[data-testid=neta-run]')?.dataset.status === 'completed'",
        timeout=90_000,
    )
    wait_source(page, 2, "total = 0")
    wait_source(page, 3, "mean = 0")
    edits = page.locator("[data-testid=neta-edit]")
    assert edits.count() == 2
    assert "+mean = 0" in edits.nth(1).locator("[data-testid=neta-diff]").inner_text()
    shot(page, "browser-edits-applied")

    # The user changes the second cell: its revert is refused, and says why.
    page.locator(".jp-Cell").nth(3).locator(".cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type("  # mine")
    wait_source(page, 3, "mean = 0  # mine")
    page.keyboard.press("Escape")
    refusal = edits.nth(1).locator("[data-testid=neta-revert-refusal]")
    revert(edits.nth(1), refusal)
    assert "changed after the edit" in refusal.inner_text()
    assert source_of(page, 3) == "mean = 0  # mine"

    # The first cell's revert restores its source, live in the open notebook.
    revert(edits.nth(0), page.locator("[data-testid=neta-edit][data-state=reverted]"))
    wait_source(page, 2, BEFORE_A)
    assert page.locator("[role=dialog]").count() == 0
    shot(page, "browser-edit-reverted")

    page.reload()
    page.wait_for_selector("[data-testid=neta-edit] >> nth=1", timeout=90_000)
    page.wait_for_selector("[data-testid=neta-edit][data-state=reverted]", timeout=30_000)
    states = page.locator("[data-testid=neta-edit]").evaluate_all(
        "(edits) => edits.map((e) => e.dataset.state)"
    )
    assert states == ["reverted", "applied"]
    assert page.locator("[data-testid=neta-revert]:visible").count() == 1


def test_approve_does_not_run_a_cell_changed_after_the_prompt_showed_it(
    lab: ServerProcess, browser: Any, tmp_path: Path
) -> None:
    notebook = lab.root / "bound.ipynb"
    shown, injected = "print('benign ' + 'output')", "print('injected ' + 'code')"
    ids = write_notebook(notebook, "%load_ext neta_jupyter", "", shown)
    model = scripted(tmp_path / "run.json", call("run_cell", cell_id=ids[2]), {"text": "Ran it."})
    set_source(notebook, 1, f"%neta --model {model} run the last cell")
    lab.start()
    page = open_notebook(browser, lab, "bound.ipynb")
    run_cells(page, 2)
    prompt = page.locator("[data-testid=neta-permission]")
    prompt.wait_for(state="visible", timeout=90_000)
    assert shown in prompt.locator("[data-testid=neta-permission-preview]").inner_text()

    # While the prompt is open the cell is rewritten (by another tab, a sibling sub-agent…).
    page.locator(".jp-Cell").nth(2).locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.type(injected)
    wait_source(page, 2, injected)
    page.keyboard.press("Escape")

    approve(page)  # on the prompt that showed the benign code
    again = prompt.locator("[data-testid=neta-permission-preview]")
    again.filter(has_text="injected").wait_for(state="visible", timeout=60_000)
    assert "changed after you approved it" in prompt.inner_text()
    shot(page, "browser-approval-bound")
    status = page.locator("[data-testid=neta-run]").first.get_attribute("data-status")
    assert status == "suspended", status
    outputs = page.locator(".jp-Cell").nth(2).locator(".jp-OutputArea")
    assert "injected code" not in outputs.inner_text(), "the code nobody approved did not run"
    assert page.locator("[data-testid=neta-tool-card][data-status=completed]").count() == 0


def test_an_mcp_tool_names_its_server_on_the_card_and_in_the_prompt(
    lab: ServerProcess, browser: Any, tmp_path: Path
) -> None:
    model = scripted(
        tmp_path / "mcp.json",
        call("warehouse__write_note", text="quarterly numbers"),
        {"text": "Noted."},
    )
    write_notebook(lab.root / "mcp.ipynb", "%load_ext neta_jupyter", f"%neta --model {model} note")
    lab.start()
    page = open_notebook(browser, lab, "mcp.ipynb")
    run_cells(page, 2)
    prompt = page.locator("[data-testid=neta-permission]")
    prompt.wait_for(state="visible", timeout=90_000)
    assert prompt.locator("[data-testid=neta-permission-server]").inner_text() == "warehouse"
    title = prompt.locator(".neta-prompt-title").inner_text()
    assert title == "Allow write_note from the MCP server warehouse to run?"
    assert json.loads(prompt.locator(".neta-permission-args").inner_text()) == {
        "text": "quarterly numbers"
    }
    card = page.locator("[data-testid=neta-tool-card]")
    assert card.locator("[data-testid=neta-tool-server]").inner_text() == "from warehouse"
    assert card.locator(".neta-tool-name").inner_text() == "write_note"
    shot(page, "browser-mcp-prompt")
    approve(page)
    page.wait_for_selector("[data-testid=neta-tool-card][data-status=completed]", timeout=60_000)
    assert card.locator("[data-testid=neta-tool-server]").inner_text() == "from warehouse"
    assert (tmp_path / "notes.txt").read_text() == "quarterly numbers"


# The page is hidden (another tab in front) and the user allowed notifications: a recorder stands
# in for the browser's Notification, which headless Chromium does not show.
HIDDEN_PAGE = """
Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
window.__netaShown = [];
window.Notification = class {
  static permission = "granted";
  static requestPermission() { return Promise.resolve("granted"); }
  constructor(title, options) { window.__netaShown.push([title, options.body]); }
  close() {}
};
"""


def test_a_run_ending_while_the_page_is_hidden_notifies_and_puts_up_jupyterlabs_toast(
    tmp_path: Path, browser: Any
) -> None:
    lab = ServerProcess(tmp_path, app="jupyterlab", args=["--LabApp.expose_app_in_browser=True"])
    words = [f"w{i} " for i in range(30)] + ["done."]
    model = scripted(tmp_path / "slow.json", {"text": words, "delay": 0.1})
    write_notebook(lab.root / "n.ipynb", "%load_ext neta_jupyter", f"%neta --model {model} go")
    try:
        lab.start()
        page = open_notebook(browser, lab, "n.ipynb", init_script=HIDDEN_PAGE)
        run_cells(page, 2)
        page.wait_for_function(
            "document.querySelector('[data-testid=neta-run]')?.dataset.status === 'completed'",
            timeout=90_000,
        )
        page.wait_for_function("window.__netaShown.length > 0", timeout=30_000)
        shown = page.evaluate("window.__netaShown")
        assert shown == [["neta: the run finished", " ".join(words).replace("  ", " ").strip()]]
        toast = page.locator(".jp-toast-message", has_text="neta: the run finished")
        toast.wait_for(timeout=30_000)
        assert page.locator("[data-testid=neta-page-toast]").count() == 0
        shot(page, "browser-run-ended-hidden")

        # A reload replays the run: nothing is told again.
        page.reload()
        page.wait_for_function(
            "document.querySelector('[data-testid=neta-run]')?.dataset.status === 'completed'",
            timeout=90_000,
        )
        # The view tells of an end in the same step that shows it: "completed" means it decided.
        assert page.evaluate("window.__netaShown") == []
        assert page.locator(".jp-toast-message", has_text="neta: the run").count() == 0
    finally:
        lab.stop()
