"""Tools from MCP servers against a real jupyter server, real MCP servers and the SSE stream.

The MCP servers are written with the SDK (``tests/mcp/sdk_server.py``): one over stdio started by the
extension, one over streamable HTTP started by the test. The scripted model calls their tools.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.kernel.magics import mcp_listing
from neta_jupyter.mcp import parse
from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import ToolContext, tool
from tests.helpers import ApiClient, types
from tests.kernel.test_magics import server_kernel
from tests.mcp.sdk_server import LONG
from tests.tools.test_kernel_tools import call, script

SERVER = str(Path(__file__).with_name("sdk_server.py"))
SECRET = "mcp-SECRETsecretSECRET-0123456789"
HEADER_SECRET = "hdr-SECRETsecretSECRET-9876543210"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_mcp() -> Iterator[str]:
    """A streamable-HTTP MCP server on a free loopback port; its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def neta_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, jp_config_dir: Path, http_mcp: str
) -> dict[str, Any]:
    """A stdio server with a secret in its env, an HTTP one with a secret header, bad entries."""
    monkeypatch.setenv("NETA_MCP_TEST_TOKEN", SECRET)
    monkeypatch.setenv("NETA_MCP_HTTP_TOKEN", HEADER_SECRET)
    (jp_config_dir / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "web": {
                        "url": http_mcp,
                        "headers": {"X-Token": "${NETA_MCP_HTTP_TOKEN}"},
                        "startup": True,
                    },
                    "nameless": {"args": ["x"]},
                    "off": {"command": sys.executable, "args": [SERVER], "disabled": True},
                }
            }
        )
    )
    return {
        "mcp_servers": {
            "cat": {
                "command": sys.executable,
                "args": [SERVER],
                "env": {
                    "NOTES_FILE": str(tmp_path / "notes.txt"),
                    "MCP_TEST_TOKEN": "${NETA_MCP_TEST_TOKEN}",
                },
                "startup": True,
            },
            "slow": {"command": sys.executable, "args": [SERVER], "timeout": 1, "startup": True},
            "typo": {"command": ["python"], "args": []},
            "unset": {"command": "x", "env": {"K": "${NETA_MCP_NEVER_SET}"}},
            "gone": {"command": str(tmp_path / "no-such-server"), "startup": True},
        },
        "permission_rules": [
            {"tool": "web__header", "action": "allow"},
            {"tool": "web__*", "action": "deny", "description": "no web"},
        ],
    }


async def listing(api: ApiClient) -> dict[str, Any]:
    """``GET /neta/api/mcp`` once no server is still starting."""
    for _ in range(600):
        response = await api.http.get("neta/api/mcp")
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        if all(s["state"] != "starting" for s in answer["servers"]):
            return answer
        await asyncio.sleep(0.1)
    raise AssertionError(f"MCP servers still starting: {answer}")


async def test_servers_are_listed_with_state_and_tools_and_bad_entries_name_their_field(
    api: ApiClient,
) -> None:
    answer = await listing(api)
    by_name = {s["name"]: s for s in answer["servers"]}
    assert set(by_name) == {"web", "nameless", "off", "cat", "slow", "typo", "unset", "gone"}
    assert by_name["off"]["state"] == "disabled" and by_name["off"]["tools"] == []
    assert by_name["cat"]["state"] == "ready" and by_name["cat"]["transport"] == "stdio"
    assert by_name["web"]["state"] == "ready" and by_name["web"]["transport"] == "http"
    tools = {t["name"]: t for t in by_name["cat"]["tools"]}
    assert {"cat__lookup", "cat__write_note", "cat__broken"} <= set(tools)
    assert tools["cat__lookup"]["readOnly"] and not tools["cat__write_note"]["readOnly"]
    assert tools["cat__lookup"]["inputSchema"]["required"] == ["key"]
    assert "web__lookup" in {t["name"] for t in by_name["web"]["tools"]}
    assert by_name["typo"]["state"] == "invalid"
    assert "'typo'" in by_name["typo"]["error"] and "'command'" in by_name["typo"]["error"]
    assert "'nameless'" in by_name["nameless"]["error"]
    assert "'command'" in by_name["nameless"]["error"] and "'url'" in by_name["nameless"]["error"]
    assert "'env.K'" in by_name["unset"]["error"]
    assert "NETA_MCP_NEVER_SET" in by_name["unset"]["error"]
    assert by_name["gone"]["state"] == "failed" and "could not start" in by_name["gone"]["error"]
    text = json.dumps(answer)
    assert SECRET not in text and HEADER_SECRET not in text
    shown = mcp_listing(answer)
    assert "cat (stdio): ready" in shown and "cat__lookup  [read-only]" in shown
    assert "typo (not configured): invalid — MCP server 'typo'" in shown


async def test_the_model_sees_server_tools_and_a_read_only_one_runs_without_asking(
    api: ApiClient, runtime: Runtime
) -> None:
    await listing(api)
    model = script(runtime, call("cat__lookup", key="rainfall"), ScriptedTurn(text="42 it is"))
    rid = (await api.start("look it up", model="scripted"))["requestId"]
    events = await api.segment(rid)

    assert "PERMISSION_ASK" not in types(events) and types(events)[-1] == "MESSAGE_COMPLETED"
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert done["toolName"] == "cat__lookup" and done["output"] == "the value of rainfall is 42"
    offered = {t.name: t for t in model.requests[0].tools}
    assert offered["cat__lookup"].parameters["properties"]["key"]["type"] == "string"
    assert offered["cat__lookup"].description == "Look a key up in the test catalogue."
    assert "web__lookup" in offered
    answered = [m for m in model.requests[1].messages if m.role == "tool"]
    assert answered[-1].content == "the value of rainfall is 42"


async def test_a_tool_that_changes_things_asks_first_and_runs_once_approved(
    api: ApiClient, runtime: Runtime, tmp_path: Path
) -> None:
    await listing(api)
    model = script(runtime, call("cat__write_note", text="buy milk"), ScriptedTurn(text="noted"))
    rid = (await api.start("note it", model="scripted"))["requestId"]
    first = await api.segment(rid)
    ask = next(e["data"] for e in first if e["eventType"] == "PERMISSION_ASK")
    assert ask["toolName"] == "cat__write_note" and "buy milk" in ask["arguments"]
    assert ask["mcpServer"] == "cat" and ask["mcpTool"] == "write_note"
    # The arguments were streamed to the card while the model wrote them, before the ask.
    generating = [e for e in first if e["eventType"] == "TOOL_CALL_GENERATING"]
    assert generating and generating[0]["data"]["toolName"] == "cat__write_note"
    assert first.index(generating[-1]) < types(first).index("PERMISSION_ASK")
    assert not (tmp_path / "notes.txt").exists()

    response = await api.resume(rid, approved=True, askId=ask["askId"])
    assert response.status_code == 200, response.text
    second = await api.segment(rid, last_event_id=first[-1]["seq"])
    start = next(e["data"] for e in second if e["eventType"] == "TOOL_START")
    assert start["mcpServer"] == "cat" and start["mcpTool"] == "write_note"
    done = next(e["data"] for e in second if e["eventType"] == "TOOL_COMPLETED")
    assert done["output"] == "wrote 8 characters"
    assert (tmp_path / "notes.txt").read_text() == "buy milk"
    answered = [m.content for m in model.requests[1].messages if m.role == "tool"]
    assert answered == ["wrote 8 characters"]  # the result went back to the model


async def test_errors_rules_images_structure_and_secrets(api: ApiClient, runtime: Runtime) -> None:
    await listing(api)
    calls = [
        call("cat__broken", reason="it is Sunday"),
        call("web__lookup", key="x"),
        call("cat__pixel"),
        call("cat__stats", column="rain"),
        call("cat__whoami"),
    ]
    model = script(runtime, *calls, ScriptedTurn(text="done"))
    rid = (await api.start("try them", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    failed = [e["data"] for e in events if e["eventType"] == "TOOL_FAILED"]
    assert failed[0]["toolName"] == "cat__broken"
    assert "the catalogue is closed: it is Sunday" in failed[0]["errorMessage"]
    assert failed[1]["toolName"] == "web__lookup" and "no web" in failed[1]["errorMessage"]
    done = {e["data"]["toolName"]: e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED"}
    assert done["cat__pixel"]["images"] and done["cat__pixel"]["images"][0].endswith(".png")
    assert json.loads(done["cat__stats"]["output"]) == {"mean": 2.5, "count": 4.0}
    # The server was given the secret and said it; nobody downstream sees it.
    assert done["cat__whoami"]["output"] == "my token is [redacted]"
    assert SECRET not in json.dumps(events)
    assert all(SECRET not in m.content for r in model.requests for m in r.messages)


async def test_only_mcp_tools_name_their_server_and_long_names_stay_apart(
    api: ApiClient, runtime: Runtime
) -> None:
    answer = await listing(api)
    cat = next(s for s in answer["servers"] if s["name"] == "cat")
    names = {t["tool"]: t["name"] for t in cat["tools"]}
    # Cut to what a model accepts, each ends in a hash of its own name: apart, and the same
    # at every start of the server (rules and past calls keep naming it).
    east, west = names[f"{LONG}_east"], names[f"{LONG}_west"]
    assert east == "cat__summarise_the_quarterly_revenue_of_every_region_by_68c974ac"
    assert west == "cat__summarise_the_quarterly_revenue_of_every_region_by_76469f24"
    assert len(east) == len(west) == 64
    assert f"  {west}  ({LONG}_west)  [read-only]" in mcp_listing(answer)
    assert "x" * 41 in parse({"x" * 41: {"command": "x"}}).servers[0].error  # type: ignore[operator]

    runtime.tools.register(
        tool(name="my__helper", readonly=True)(_helper)
    )  # neta's own, "__" and all
    model = script(runtime, call(west), call("my__helper"), ScriptedTurn(text="done"))
    started = await api.start("west, then help", model="scripted")
    rid = started["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    starts = {e["data"]["toolName"]: e["data"] for e in events if e["eventType"] == "TOOL_START"}
    assert starts[west]["mcpServer"] == "cat" and starts[west]["mcpTool"] == f"{LONG}_west"
    assert "mcpServer" not in starts["my__helper"] and "mcpTool" not in starts["my__helper"]
    answered = [m.content for m in model.requests[1].messages if m.role == "tool"]
    assert answered[0] == "revenue of the west"
    # A session's history keeps which calls were an MCP server's, for the view drawn from it.
    params = {"sessionId": started["sessionId"]}
    tree = (await api.http.get("neta/api/sessions/tree", params=params)).json()
    calls = {c["toolName"]: c for e in tree["entries"] for c in e.get("toolCalls") or []}
    assert calls[west]["mcpServer"] == "cat" and calls[west]["mcpTool"] == f"{LONG}_west"
    assert "mcpServer" not in calls["my__helper"]


async def _helper(ctx: ToolContext) -> str:
    """A tool of neta's own whose name holds the MCP separator."""
    return "helped"


async def test_progress_becomes_process_events_and_stop_cancels_the_call_on_the_server(
    api: ApiClient, runtime: Runtime, tmp_path: Path
) -> None:
    await listing(api)
    marker = tmp_path / "wait-marker"
    script(runtime, call("cat__count", steps=3), call("cat__wait", marker=str(marker)))
    rid = (await api.start("count, then wait", model="scripted"))["requestId"]
    for _ in range(600):
        if marker.exists():
            break
        await asyncio.sleep(0.1)
    assert marker.read_text() == "started"
    response = await api.post("terminateTask", {"requestId": rid})
    assert response.status_code == 200, response.text
    events = await api.segment(rid)

    assert events[-1]["eventType"] == "MESSAGE_FAILED"
    assert events[-1]["data"]["errorCode"] == "USER_CANCELLED"
    counted = [e for e in events if e["data"].get("toolName") == "cat__count"]
    # The count call's own progress: a server that failed to start may be retried in the run and
    # report its start first when a busy machine let its back-off lapse.
    process = [
        e["data"]
        for e in events
        if e["eventType"] == "PROCESS_EVENT" and e["data"].get("targetType") == "tool"
    ]
    running = [p["current"] for p in process if p["status"] == "running"]
    # In order; one in between may be coalesced by the throttle on a busy machine.
    assert running[0] == 1 and running[-1] == 3 and running == sorted(running)
    assert process[0]["total"] == 3 and process[0]["message"] == "counted 1 of 3"
    titles = [e["data"]["title"] for e in counted if e["eventType"] == "TOOL_RUNNING"]
    assert titles[-1] == "counted 3 of 3"
    for _ in range(300):  # the server hears of the cancellation
        if marker.read_text() == "cancelled":
            break
        await asyncio.sleep(0.1)
    assert marker.read_text() == "cancelled"


async def test_a_servers_stderr_reaches_the_log_without_its_secrets(
    api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    await listing(api)

    def logged() -> str:  # the server may have started while the test was being set up
        records = caplog.get_records("setup") + caplog.records
        return "\n".join(r.getMessage() for r in records)

    for _ in range(300):
        if "starting with token" in logged():
            break
        await asyncio.sleep(0.1)
    assert "MCP server cat: starting with token [redacted]" in logged()
    assert SECRET not in logged()


async def test_neta_mcp_in_a_kernel_lists_the_servers(jp_serverapp: Any, api: ApiClient) -> None:
    await listing(api)
    async with server_kernel(jp_serverapp) as (_kernel_id, k):
        shown = await k.stdout("%load_ext neta_jupyter\n%neta mcp")
    assert "cat (stdio): ready" in shown and "cat__write_note  [asks first]" in shown
    assert "gone (stdio): failed — could not start" in shown
    assert SECRET not in shown


async def test_a_server_that_exits_mid_call_fails_the_call_and_is_started_for_the_next(
    api: ApiClient, runtime: Runtime
) -> None:
    await listing(api)
    script(
        runtime,
        call("cat__crash"),
        call("cat__lookup", key="after"),
        ScriptedTurn(text="recovered"),
    )
    rid = (await api.start("crash it", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    failed = next(e["data"] for e in events if e["eventType"] == "TOOL_FAILED")
    assert failed["toolName"] == "cat__crash" and "exited during the call" in failed["errorMessage"]
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    # The restart is part of the next call, in its timeline (and so its process log is named).
    assert done["output"].splitlines()[0] == "the value of after is 42"
    restart = [
        e["data"]
        for e in events
        if e["eventType"] == "PROCESS_EVENT" and e["data"].get("toolCallId") == done["toolCallId"]
    ]
    assert restart[0]["message"] == "MCP server cat exited; starting it again"
    titles = [
        e["data"]["title"]
        for e in events
        if e["eventType"] == "TOOL_RUNNING" and e["data"]["toolCallId"] == done["toolCallId"]
    ]
    assert "MCP server cat exited; starting it again" in titles  # on the card meanwhile
    assert restart[-1]["status"] == "completed" and "cat is ready" in restart[-1]["message"]
    assert {s["name"]: s["state"] for s in (await listing(api))["servers"]}["cat"] == "ready"


async def test_a_call_past_its_servers_timeout_fails_and_is_cancelled_on_the_server(
    api: ApiClient, runtime: Runtime, tmp_path: Path
) -> None:
    await listing(api)
    marker = tmp_path / "slow-marker"
    script(runtime, call("slow__wait", marker=str(marker)), ScriptedTurn(text="too slow"))
    rid = (await api.start("wait", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    failed = next(e["data"] for e in events if e["eventType"] == "TOOL_FAILED")
    assert "wait gave no answer within 1 s, so the call was cancelled" in failed["errorMessage"]
    for _ in range(300):
        if marker.read_text() == "cancelled":
            break
        await asyncio.sleep(0.1)
    assert marker.read_text() == "cancelled"


async def test_an_http_server_gets_its_secret_header_and_nobody_downstream_sees_it(
    api: ApiClient, runtime: Runtime
) -> None:
    await listing(api)
    script(runtime, call("web__header"), ScriptedTurn(text="ok"))
    rid = (await api.start("which header?", model="scripted"))["requestId"]
    events = await api.segment(rid)
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    # Resolved from the environment and sent (neither the reference nor nothing), then redacted.
    assert done["output"] == "token header is [redacted]"
    assert HEADER_SECRET not in json.dumps(events)
