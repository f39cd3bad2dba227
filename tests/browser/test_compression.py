"""The widget in Chromium over compressed streams: WebSocket with permessage-deflate, and SSE
(``EventSource``, the widget's fallback) gzipped; every delta reaches the screen, in order, once.

Locally these tests skip when Chromium is missing; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.b6_lab import open_notebook, run_cells, write_notebook
from tests.browser_lab import shot
from tests.server_process import ServerProcess

pytestmark = pytest.mark.browser

DELTAS = [f"w{i} " for i in range(3000)]
# The widget's WebSocket is sent to a path that does not exist, so it falls back to SSE.
NO_RUN_SOCKET = """
(() => {
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(url, protocols) {
      super(String(url).replace("/neta/ws", "/neta/no-such-socket"), protocols);
    }
  };
})();
"""


@pytest.fixture(scope="module")
def one_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One JupyterLab for both tests: each opens a notebook of its own, with its kernel."""
    # Compressed as for a remote browser (by default a page on the server's machine is not).
    server = ServerProcess(
        tmp_path_factory.mktemp("lab"),
        {"demo_pace": 0.0, "stream_compression": "always"},
        app="jupyterlab",
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture
def lab(one_lab: ServerProcess) -> Iterator[ServerProcess]:
    """The shared JupyterLab, its notebooks' kernels ended after each test."""
    yield one_lab
    one_lab.shutdown_kernels()


def zipped(lab: ServerProcess, tmp_path: Path, name: str) -> str:
    """A notebook ``name`` of its own whose run streams :data:`DELTAS`."""
    script = tmp_path / "answer.json"
    script.write_text(json.dumps({"turns": [{"text": DELTAS, "delay": 0.001}]}))
    write_notebook(lab.root / name, "%load_ext neta_jupyter", f"%neta --model scripted:{script} go")
    return name


def _header(headers: dict[str, Any], name: str) -> str:
    return next((str(v) for k, v in headers.items() if k.lower() == name), "")


def _watch_network(page: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """Extensions of each run WebSocket's handshake, and (URL, Content-Encoding) of streams."""
    sockets: list[str] = []
    streams: list[tuple[str, str]] = []
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")

    def on_socket(event: dict[str, Any]) -> None:
        sockets.append(_header(event["response"]["headers"], "sec-websocket-extensions"))

    def on_response(event: dict[str, Any]) -> None:
        url = event["response"]["url"]
        if "/neta/api/agent/run/stream" in url:
            streams.append((url, _header(event["response"]["headers"], "content-encoding")))

    cdp.on("Network.webSocketHandshakeResponseReceived", on_socket)
    cdp.on("Network.responseReceived", on_response)
    return sockets, streams


def _answer_shown(page: Any) -> list[str]:
    page.wait_for_selector("[data-testid=neta-run]", timeout=60_000)
    page.wait_for_function(
        "document.querySelector('[data-testid=neta-run]').dataset.status === 'completed'",
        timeout=120_000,
    )
    last = DELTAS[-1].strip()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = str(page.locator("[data-testid=neta-answer]").first.inner_text())
        if text.strip().endswith(last):
            return text.split()
        time.sleep(0.2)
    return str(page.locator("[data-testid=neta-answer]").first.inner_text()).split()


def test_widget_streams_over_a_deflated_websocket(
    lab: ServerProcess, browser: Any, tmp_path: Path
) -> None:
    page = open_notebook(browser, lab, zipped(lab, tmp_path, "deflated.ipynb"))
    sockets, streams = _watch_network(page)
    run_cells(page, 2)
    words = _answer_shown(page)
    shot(page, "browser-deflated-websocket")
    assert words == [d.strip() for d in DELTAS]
    run_sockets = [ext for ext in sockets if "permessage-deflate" in ext]
    assert run_sockets, f"no WebSocket negotiated permessage-deflate: {sockets}"
    assert streams == []  # the widget followed the run over its WebSocket, not SSE


def test_widget_falls_back_to_a_gzipped_event_source(
    lab: ServerProcess, browser: Any, tmp_path: Path
) -> None:
    page = open_notebook(browser, lab, zipped(lab, tmp_path, "gzipped.ipynb"), NO_RUN_SOCKET)
    _, streams = _watch_network(page)
    run_cells(page, 2)
    words = _answer_shown(page)
    shot(page, "browser-gzipped-event-source")
    assert words == [d.strip() for d in DELTAS]
    assert streams, "the widget never opened the run's event stream"
    assert all(encoding == "gzip" for _, encoding in streams), streams
