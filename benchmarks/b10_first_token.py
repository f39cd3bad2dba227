"""B10 first-token overhead: how much later the first token reaches a client than the model sent it.

A stand-in for an OpenAI-compatible provider (an asyncio HTTP server in the benchmark process)
answers each chat request with its headers at once, waits ``WAIT`` seconds, then writes its
first token and notes the moment (``time.perf_counter``, the clock the clients read too), then
the rest of the answer. The server under test reaches it as its ``openai`` endpoint.

* first token over SSE: from the stand-in writing the first token to an httpx-sse client
  parsing the run's first ``TEXT_DELTA``; baseline: the same, for a client that asks the
  stand-in directly and parses its first chunk (the provider's own stream, no server between);
* the same through a bare relay (``bare_server.py``'s ``/relay``: a process that passes the
  stand-in's bytes on as they come, nothing else): what one process between the provider and the
  client costs on this machine, the floor under the server's figure (informational);
* session created: from sending ``POST run/async`` to the client parsing the run's
  ``SESSION_CREATED`` (it opens the stream as soon as the POST answers); baseline: the round
  trip of a plain ``GET /api/status`` of the same server.

* first token to the widget, in JupyterLab in headless Chromium (as B6) with the same stand-in
  behind it: a ``%neta`` cell runs, and the B6 probe notes (``performance.timeOrigin`` + its
  time: the wall clock) when the widget's transport has parsed the first ``TEXT_DELTA`` (its
  socket's message handler has the event), and when the frame that paints the first word ends
  (on the widget's screen); baseline for both: the direct client.

p99 over ``RUNS`` runs per repetition (``WIDGET_RUNS`` for the widget). Without Chromium the
widget's row is skipped with a message, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from .b6_lab import JupyterProcess, chromium, chromium_path, open_notebook, write_notebook
from .b6_page import PROBE
from .b6_widget import ARM_WIDGET, SETUP_CELL, WIDGET_INDEX, _missing
from .harness import (
    NetaServer,
    Row,
    Settings,
    bare_server,
    http_client,
    neta_server,
    percentile,
)

WAIT = 0.1
RUNS = 60
WIDGET_RUNS = 20
WIDGET_WAIT = 1.0
"""The stand-in's pause before the first token for the widget: long enough for the new view to
have connected and subscribed, so the figure is the path of a token, not the view's start."""
WIDGET_TARGET_MS = 20.0
WIDGET_CELL = 'get_ipython().run_line_magic("neta", "--model openai:standin go");'
FIRST_SHOWN = "(last) => window.__b6.screens.length > 0 && window.__b6.shown >= last"
FIRST_TIMES = """() => {
  const b6 = window.__b6;
  return [b6.arrivals[0][2], b6.screens[0][1]].map((t) => performance.timeOrigin + t);
}"""
"""On the wall clock: the widget's transport parsing the first delta, the first word on screen."""
TOKENS = 20
TARGET_MS = 5.0


def _chunk(content: str | None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    body = {
        "id": "b10",
        "object": "chat.completion.chunk",
        "model": "standin",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


class StandIn:
    """The provider stand-in: ``first`` holds when each answer's first token was written."""

    def __init__(self) -> None:
        self.wait = WAIT
        self.first: list[float] = []
        self.first_wall: list[float] = []
        """The same moments on the wall clock (``time.time``), which the page can read too."""
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(h.split(b":")[1])
                for h in head.split(b"\r\n")
                if h.lower().startswith(b"content-length")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            + _chunk(None)
        )
        await writer.drain()
        await asyncio.sleep(self.wait)
        writer.write(_chunk("w0 "))
        self.first.append(time.perf_counter())
        self.first_wall.append(time.time())
        await writer.drain()
        for i in range(1, TOKENS):
            writer.write(_chunk(f"w{i} "))
        writer.write(_chunk(None, "stop") + b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()


async def _direct(
    client: httpx.AsyncClient, stand_in: StandIn, port: int, relay: str | None = None
) -> float:
    """ms from the stand-in's first token to a direct client parsing it (or through ``relay``)."""
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    method, params = "POST", {}
    if relay is not None:
        url, method, params = relay, "GET", {"port": str(port)}
    async with aconnect_sse(client, method, url, json={"stream": True}, params=params) as source:
        async for sse in source.aiter_sse():
            if sse.data != "[DONE]" and json.loads(sse.data)["choices"][0]["delta"].get("content"):
                return (time.perf_counter() - stand_in.first[-1]) * 1000
    raise RuntimeError("the stand-in sent no token")


async def _through(
    client: httpx.AsyncClient, server: NetaServer, stand_in: StandIn
) -> tuple[float, float]:
    """ms to SESSION_CREATED from the POST, and from the first token to its TEXT_DELTA."""
    sent = time.perf_counter()
    rid = await server.start_run(client, "openai:standin")
    created = token = 0.0
    params = {"requestId": rid}
    async with aconnect_sse(
        client, "GET", server.stream_url(), params=params, headers=server.headers
    ) as source:
        async for sse in source.aiter_sse():
            if sse.event == "SESSION_CREATED" and not created:
                created = (time.perf_counter() - sent) * 1000
            if sse.event == "TEXT_DELTA" and not token:
                token = (time.perf_counter() - stand_in.first[-1]) * 1000
            if sse.event.startswith("MESSAGE_"):
                break
    return created, token


async def _status_ms(client: httpx.AsyncClient, server: NetaServer) -> float:
    began = time.perf_counter()
    (await client.get(server.base + "api/status", headers=server.headers)).raise_for_status()
    return (time.perf_counter() - began) * 1000


def _widget(settings: Settings, stand_in: StandIn, runs: int) -> list[list[tuple[float, float]]]:
    """Per run, ms from the stand-in's first token to the widget's transport parsing it, and to
    the end of the frame that shows it in the widget."""
    path = chromium_path()
    assert path is not None
    lab = JupyterProcess(settings.workdir / f"b10-{uuid.uuid4().hex[:8]}", app="jupyterlab")
    lab.start()
    found: list[list[tuple[float, float]]] = []
    try:
        with chromium(path) as browser:
            for n in range(settings.repeats):
                name = f"b10-{n}.ipynb"
                write_notebook(lab.root / name, SETUP_CELL, 'print("-")', WIDGET_CELL)
                page = open_notebook(browser, lab, name, PROBE)
                try:
                    page.click(".jp-Cell >> nth=0")
                    page.keyboard.press("Escape")
                    page.keyboard.press("Shift+Enter")
                    _widget_run(page, stand_in)  # warm up: the widget's module, connections
                    found.append([_widget_run(page, stand_in) for _ in range(runs)])
                finally:
                    page.close()
                    lab.shutdown_kernels()
    finally:
        lab.stop()
    return found


def _widget_run(page: Any, stand_in: StandIn) -> tuple[float, float]:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(WIDGET_INDEX)
    view = cell.locator("[data-testid=neta-run]")
    old = view.last.get_attribute("data-request-id") if view.count() else None
    cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("Control+Enter")
    page.evaluate(ARM_WIDGET, [WIDGET_INDEX, old])
    page.wait_for_function(FIRST_SHOWN, arg=TOKENS - 1, timeout=120_000, polling=50)
    arrived, shown = page.evaluate(FIRST_TIMES)
    page.wait_for_function(
        "(i) => window.__b6.lastView(window.__b6.cell(i)).dataset.status === 'completed'",
        arg=WIDGET_INDEX,
        timeout=60_000,
    )
    sent = stand_in.first_wall[-1] * 1000
    return float(arrived) - sent, float(shown) - sent


async def run(settings: Settings) -> list[Row]:
    runs = settings.size(RUNS, 10)
    stand_in = StandIn()
    port = await stand_in.start()
    os.environ["OPENAI_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
    os.environ.setdefault("OPENAI_API_KEY", "b10-stand-in")
    token: list[list[float]] = []
    direct: list[list[float]] = []
    created: list[list[float]] = []
    status: list[list[float]] = []
    relayed: list[list[float]] = []
    try:
        with bare_server(settings) as bare:
            async with http_client() as client:
                await _direct(client, stand_in, port, bare.base + "relay")  # warm up
                for _ in range(settings.repeats):
                    relayed.append(
                        [
                            await _direct(client, stand_in, port, bare.base + "relay")
                            for _ in range(runs)
                        ]
                    )
        with neta_server(settings) as server:
            async with http_client() as client:
                await _through(client, server, stand_in)  # warm up
                for _ in range(settings.repeats):
                    found = [await _through(client, server, stand_in) for _ in range(runs)]
                    created.append([c for c, _ in found])
                    token.append([t for _, t in found])
                    direct.append([await _direct(client, stand_in, port) for _ in range(runs)])
                    status.append([await _status_ms(client, server) for _ in range(runs)])
        missing = _missing()
        if missing and os.environ.get("CI") == "true":
            raise RuntimeError(f"CI=true but B10's widget row cannot run: {missing}")
        if missing:
            print(f"B10 widget row skipped: {missing}", file=sys.stderr, flush=True)
            widget: list[list[tuple[float, float]]] = []
        else:
            stand_in.wait = WIDGET_WAIT
            widget = await asyncio.to_thread(
                _widget, settings, stand_in, settings.size(WIDGET_RUNS, 5)
            )
    finally:
        await stand_in.stop()
    p50 = [percentile(s, 0.5) for s in token]
    print(
        f"  B10 p50: first token {p50} ms, direct {[percentile(s, 0.5) for s in direct]} ms, "
        f"SESSION_CREATED {[percentile(s, 0.5) for s in created]} ms, "
        f"widget's transport {[percentile([a for a, _ in s], 0.5) for s in widget]} ms, "
        f"widget's screen {[percentile([b for _, b in s], 0.5) for s in widget]} ms",
        file=sys.stderr,
        flush=True,
    )
    overhead = Row(
        "B10 first token to an SSE client p99 (baseline: read from the provider directly)",
        "ms",
        [percentile(s, 0.99) for s in token],
        [percentile(s, 0.99) for s in direct],
        target=f"overhead <= {TARGET_MS:g} ms",
    )
    overhead.met = (overhead.median or 0) - (overhead.baseline_median or 0) <= TARGET_MS
    direct_p99 = [percentile(s, 0.99) for s in direct] if widget else []
    to_transport = Row(
        "B10 first token parsed by the widget's transport in Chromium p99 (baseline: read from "
        "the provider directly)",
        "ms",
        [percentile([a for a, _ in s], 0.99) for s in widget],
        direct_p99,
        target=f"overhead <= {WIDGET_TARGET_MS:g} ms",
        note=missing,
    )
    to_screen = Row(
        "B10 first token to the widget's screen in Chromium p99 (baseline: read from the "
        "provider directly)",
        "ms",
        [percentile([b for _, b in s], 0.99) for s in widget],
        direct_p99,
        target=f"overhead <= {WIDGET_TARGET_MS:g} ms",
        note=missing,
    )
    for row in (to_transport, to_screen) if widget else ():
        row.met = (row.median or 0) - (row.baseline_median or 0) <= WIDGET_TARGET_MS
    hop = Row(
        "B10 first token through a bare relay process p99 (a process passing the stand-in's "
        "bytes on, nothing else; baseline: read from the provider directly)",
        "ms",
        [percentile(s, 0.99) for s in relayed],
        [percentile(s, 0.99) for s in direct],
    )
    return [
        overhead,
        hop,
        to_transport,
        to_screen,
        Row(
            "B10 POST run/async to SESSION_CREATED at the client p99 (baseline: GET /api/status)",
            "ms",
            [percentile(s, 0.99) for s in created],
            [percentile(s, 0.99) for s in status],
        ),
    ]
