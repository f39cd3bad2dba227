"""A streamable-HTTP MCP server over its life: connected to on first use, gone, back again.

A real MCP server written with the SDK (``tests/mcp/sdk_server.py http PORT``) in a process the test
starts, kills and starts again on the same port; a real jupyter server connects to it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.mcp import McpServer, parse
from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, types
from tests.mcp.test_lifecycle import servers, starts
from tests.tools.test_kernel_tools import call, script

SERVER = str(Path(__file__).with_name("sdk_server.py"))
SECRET = "hdr-SECRETsecretSECRET-5555544444"


class HttpMcp:
    """The test's MCP server process on a fixed loopback port."""

    def __init__(self, answers: str = "sse") -> None:
        self.answers = answers
        """``sse``: each answer streamed (progress may come first); ``json``: one body."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port: int = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, SERVER, "http", str(self.port)]
            + (["--json"] if self.answers == "json" else []),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "the MCP server never listened"
                time.sleep(0.1)

    def kill(self) -> None:
        """Gone at once, without a word (as a crash or a lost machine)."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)


@pytest.fixture
def web(request: pytest.FixtureRequest) -> Iterator[HttpMcp]:
    server = HttpMcp(getattr(request, "param", "sse"))
    server.start()
    try:
        yield server
    finally:
        if server.process is not None and server.process.poll() is None:
            server.kill()


@pytest.fixture
def neta_config(monkeypatch: pytest.MonkeyPatch, web: HttpMcp) -> dict[str, Any]:
    """The HTTP server, with a secret header, connected to on first use."""
    monkeypatch.setenv("NETA_MCP_WEB_TOKEN", SECRET)
    entry = {"url": web.url, "headers": {"X-Token": "${NETA_MCP_WEB_TOKEN}"}}
    return {"mcp_servers": {"web": entry}}


async def run(api: ApiClient, runtime: Runtime, *turns: ScriptedTurn) -> list[dict[str, Any]]:
    script(runtime, *turns, ScriptedTurn(text="done"))
    rid = (await api.start("use the web server", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    assert SECRET not in json.dumps(events)
    return events


def completed(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["output"] for e in events if e["eventType"] == "TOOL_COMPLETED"]


def failed(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["errorMessage"] for e in events if e["eventType"] == "TOOL_FAILED"]


async def state_becomes(api: ApiClient, state: str) -> dict[str, Any]:
    for _ in range(300):
        web = (await servers(api))["web"]
        if web["state"] == state:
            return web
        await asyncio.sleep(0.1)
    raise AssertionError(f"the MCP server web stayed {web['state']}, never {state}")


async def test_an_http_server_is_connected_to_when_a_run_first_needs_it(
    api: ApiClient, runtime: Runtime
) -> None:
    before = (await servers(api))["web"]
    assert before["state"] == "idle" and before["tools"] == [] and before["transport"] == "http"

    events = await run(api, runtime, call("web__lookup", key="rain"), call("web__header"))
    assert starts(events)["web"][0]["message"] == "starting MCP server web"
    assert starts(events)["web"][-1]["status"] == "completed"
    assert completed(events) == ["the value of rain is 42", "token header is [redacted]"]
    after = (await servers(api))["web"]
    assert after["state"] == "ready" and "web__lookup" in {t["name"] for t in after["tools"]}


@pytest.mark.parametrize("web", ["sse", "json"], indirect=True)
async def test_an_http_server_that_dies_mid_call_fails_the_call_and_is_reconnected_once_back(
    api: ApiClient, runtime: Runtime, web: HttpMcp, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "marker"
    script(runtime, call("web__wait", marker=str(marker)), ScriptedTurn(text="it died"))
    rid = (await api.start("wait", model="scripted"))["requestId"]
    for _ in range(600):
        if marker.exists():
            break
        await asyncio.sleep(0.1)
    assert marker.read_text() == "started"
    web.kill()
    events = await api.segment(rid)  # the call fails; the run does not hang on it
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    assert failed(events) == [
        "MCP server web went away during the call; it is connected to again for the next one"
    ]
    gone = await state_becomes(api, "exited")
    assert gone["error"] == "went away; connected to again when next needed"

    web.start()
    events = await run(api, runtime, call("web__lookup", key="back"))
    assert starts(events)["web"][0]["message"] == "MCP server web went away; connecting again"
    assert completed(events) == ["the value of back is 42"]
    assert (await servers(api))["web"]["state"] == "ready"
    assert "MCP server web went away" in caplog.text and SECRET not in caplog.text


async def test_an_http_server_gone_between_calls_is_noticed_and_reconnected_after_growing_pauses(
    api: ApiClient, runtime: Runtime, web: HttpMcp
) -> None:
    assert completed(await run(api, runtime, call("web__lookup", key="a"))) == [
        "the value of a is 42"
    ]
    web.kill()
    gone = await state_becomes(api, "exited")  # noticed while no call runs
    assert gone["error"] == "went away; connected to again when next needed"

    # Still down: the run's start tries at once, its call after a pause; both fail, nothing hangs.
    events = await run(api, runtime, call("web__lookup", key="b"))
    tries = [p["message"] for p in events_of(events, "web") if p["status"] == "started"]
    assert tries == [
        "MCP server web went away; connecting again",
        "MCP server web went away; connecting again in 1 s",
    ]
    titles = [e["data"]["title"] for e in events if e["eventType"] == "TOOL_RUNNING"]
    assert "MCP server web went away; connecting again in 1 s" in titles  # on the call's card
    [message] = failed(events)
    assert message.startswith("MCP server web is not running (could not start: ")

    web.start()
    events = await run(api, runtime, call("web__lookup", key="c"))
    assert starts(events)["web"][0]["message"] == (
        "MCP server web went away; connecting again in 2 s"
    )
    assert completed(events) == ["the value of c is 42"]


def events_of(events: list[dict[str, Any]], server: str) -> list[dict[str, Any]]:
    """The connection attempts to ``server`` in a run, the run's own and its calls'."""
    return [
        e["data"]
        for e in events
        if e["eventType"] == "PROCESS_EVENT" and e["data"]["stage"] == server
    ]


async def test_an_http_server_behind_the_environments_proxy_is_reached_through_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.append(await reader.readline())
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    listening = await asyncio.start_server(proxy, "127.0.0.1", 0)
    address = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, address)
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    entry = parse({"far": {"url": "http://mcp.example.invalid/mcp"}}).servers[0]
    far = McpServer(
        entry, redact=str, logger=logging.getLogger("test"), start_timeout=30, call_timeout=None
    )
    try:
        await far.start()
        assert asked == [b"POST http://mcp.example.invalid/mcp HTTP/1.1\r\n"]
        assert far.state == "failed" and far.error is not None
        assert far.error.startswith("could not start")

        monkeypatch.setenv("no_proxy", "mcp.example.invalid")  # exempt: asked directly
        await far.start()
        assert len(asked) == 1 and far.state == "failed"
    finally:
        await far.close()
        listening.close()
