"""When MCP servers start and stop: on first use, slowly, never, with the server, in the terminal.

Real MCP servers written with the SDK (``tests/mcp/sdk_server.py``) over stdio; a real jupyter
server (in this process, or in a subprocess to shut it down); ``neta-jupyter run`` as a process.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.cli_helpers import cli, embedded, script, workdir
from tests.helpers import ApiClient, types
from tests.kernel.test_embedded import REPORT, kernel
from tests.restart.test_runs import start as start_run
from tests.server_process import ServerProcess
from tests.tools.test_kernel_tools import call
from tests.tools.test_kernel_tools import script as script_model

__all__ = ["workdir"]  # a fixture, imported for the tests below

SERVER = str(Path(__file__).with_name("sdk_server.py"))


@pytest.fixture
def neta_config(tmp_path: Path) -> dict[str, Any]:
    """A server started on first use, one slow to start, one that never answers."""
    return {
        "mcp_servers": {
            "cat": {"command": sys.executable, "args": [SERVER]},
            "sleepy": {"command": sys.executable, "args": [SERVER, "--delay", "2.5"]},
            "hang": {
                "command": sys.executable,
                "args": [SERVER, "--delay", "600"],
                "startTimeout": 3,
            },
        }
    }


async def servers(api: ApiClient) -> dict[str, dict[str, Any]]:
    response = await api.http.get("neta/api/mcp")
    assert response.status_code == 200, response.text
    return {s["name"]: s for s in response.json()["servers"]}


def starts(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The run's start-up operations by server (its PROCESS_EVENTs without a tool call)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        if e["eventType"] == "PROCESS_EVENT" and e["data"].get("toolCallId") is None:
            out.setdefault(e["data"]["stage"], []).append(e["data"])
    return out


async def test_servers_start_when_a_run_first_needs_them_and_their_start_is_in_its_timeline(
    api: ApiClient, runtime: Runtime
) -> None:
    before = await servers(api)
    assert {n: s["state"] for n, s in before.items()} == {
        "cat": "idle",
        "sleepy": "idle",
        "hang": "idle",
    }
    assert before["cat"]["tools"] == []  # nothing started yet, so no tool is known
    assert before["cat"]["startup"] is False
    model = script_model(
        runtime,
        call("cat__lookup", key="rain"),
        call("sleepy__lookup", key="sun"),
        ScriptedTurn(text="both"),
    )
    rid = (await api.start("look up rain and sun", model="scripted"))["requestId"]
    events = await api.segment(rid)

    assert types(events)[-1] == "MESSAGE_COMPLETED"
    started = starts(events)
    assert set(started) == {"cat", "sleepy", "hang"}
    # Each start shows at once, then how long it has taken while it takes long, then its end.
    sleepy = started["sleepy"]
    assert sleepy[0]["status"] == "started" and sleepy[0]["message"] == "starting MCP server sleepy"
    assert sleepy[0]["targetType"] == "runtime" and sleepy[0]["source"] == "runtime"
    assert any(p["status"] == "running" for p in sleepy)
    assert sleepy[-1]["status"] == "completed" and "sleepy is ready" in sleepy[-1]["message"]
    assert started["cat"][-1]["status"] == "completed"
    # The model was offered the tools of the servers that came up, from its first request on.
    offered = {t.name for t in model.requests[0].tools}
    assert {"cat__lookup", "sleepy__lookup"} <= offered
    assert not any(name.startswith("hang__") for name in offered)
    first_tool = types(events).index("TOOL_START")
    assert all(events.index(e) < first_tool for e in events if e["eventType"] == "PROCESS_EVENT")
    done = [e["data"]["output"] for e in events if e["eventType"] == "TOOL_COMPLETED"]
    assert done == ["the value of rain is 42", "the value of sun is 42"]
    after = await servers(api)
    assert after["cat"]["state"] == "ready" and after["cat"]["tools"]

    # A second run has them running already: nothing starts again.
    script_model(runtime, call("cat__lookup", key="snow"), ScriptedTurn(text="ok"))
    again = await api.segment((await api.start("snow?", model="scripted"))["requestId"])
    assert set(starts(again)) <= {"hang"}  # only the one that never started may be tried again


async def test_a_server_that_never_starts_is_a_clear_error_and_the_other_tools_still_work(
    api: ApiClient, runtime: Runtime
) -> None:
    script_model(runtime, call("cat__lookup", key="rain"), ScriptedTurn(text="done"))
    rid = (await api.start("rain?", model="scripted"))["requestId"]
    events = await api.segment(rid)

    assert types(events)[-1] == "MESSAGE_COMPLETED"
    hang = starts(events)["hang"]
    assert hang[-1]["status"] == "failed" and hang[-1]["level"] == "error"
    assert hang[-1]["message"] == "MCP server hang: did not start within 3 s"
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert done["output"] == "the value of rain is 42"
    listed = (await servers(api))["hang"]
    assert listed["state"] == "failed" and listed["error"] == "did not start within 3 s"


async def test_a_run_that_names_its_tools_starts_only_their_servers(
    api: ApiClient, runtime: Runtime
) -> None:
    script_model(runtime, call("cat__lookup", key="rain"), ScriptedTurn(text="done"))
    rid = (await api.start("rain?", model="scripted", tools=["cat__lookup"]))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    assert set(starts(events)) == {"cat"}
    states = {n: s["state"] for n, s in (await servers(api)).items()}
    assert states == {"cat": "ready", "sleepy": "idle", "hang": "idle"}


async def test_stopping_a_run_while_a_server_starts_ends_it_cancelled_and_the_start_goes_on(
    api: ApiClient, runtime: Runtime
) -> None:
    script_model(runtime, ScriptedTurn(text="never asked"))
    rid = (await api.start("wait", model="scripted", tools=["sleepy__lookup"]))["requestId"]
    for _ in range(300):
        if (await servers(api))["sleepy"]["state"] == "starting":
            break
        await asyncio.sleep(0.05)
    response = await api.post("terminateTask", {"requestId": rid})
    assert response.status_code == 200, response.text
    events = await api.segment(rid)
    assert events[-1]["data"]["errorCode"] == "USER_CANCELLED"
    assert starts(events)["sleepy"][-1]["status"] == "cancelled"
    for _ in range(300):  # the next run that needs it finds it up
        if (await servers(api))["sleepy"]["state"] == "ready":
            break
        await asyncio.sleep(0.1)
    assert (await servers(api))["sleepy"]["state"] == "ready"


async def test_a_resource_a_tool_returns_is_stored_as_an_attachment(
    api: ApiClient, runtime: Runtime
) -> None:
    model = script_model(runtime, call("cat__export", name="rain.csv"), ScriptedTurn(text="ok"))
    rid = (await api.start("export", model="scripted", tools=["cat__export"]))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert done["output"] == "[resource file:///reports/rain.csv: attached as rain.csv]"
    attached = next(e["data"] for e in events if e["eventType"] == "ATTACHMENT_CHANGED")
    assert attached["fileName"] == "rain.csv" and attached["contentType"] == "text/csv"
    download = await api.http.get(
        "neta/api/agent/attachment/download", params={"virtualPath": attached["virtualPath"]}
    )
    assert download.status_code == 200 and download.content == b"region,rain\nnorth,12\n"
    told = [m.content for m in model.requests[1].messages if m.role == "tool"]
    assert told == ["[resource file:///reports/rain.csv: attached as rain.csv]"]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A child that has exited but is not yet reaped still answers: look at its state (reaped
    # meanwhile, it has no status left).
    try:
        return "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


def _pid(path: Path) -> int:
    deadline = time.monotonic() + 120
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.1)
    return int(path.read_text())


def test_a_server_marked_startup_starts_with_the_jupyter_server_and_stops_with_it(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "cat.pid"
    entry = {
        "command": sys.executable,
        "args": [SERVER],
        "env": {"PID_FILE": str(pid_file)},
        "startup": True,
    }
    process = ServerProcess(tmp_path, {"mcp_servers": {"cat": entry}})
    process.start()
    try:
        pid = _pid(pid_file)  # no run asked for it
        with process.client() as http:
            for _ in range(600):
                listed = http.get("neta/api/mcp").json()["servers"][0]
                if listed["state"] != "starting":
                    break
                time.sleep(0.1)
        assert listed["state"] == "ready" and listed["startup"] is True
        process.shutdown()
    finally:
        process.stop()
    deadline = time.monotonic() + 30
    while not _gone(pid):
        assert time.monotonic() < deadline, "the MCP server outlived the Jupyter server"
        time.sleep(0.1)


def test_the_terminal_client_offers_mcp_tools_under_the_permission_rules(workdir: Path) -> None:
    pid_file = workdir / "cat.pid"
    notes = workdir / "notes.txt"
    env = {"PID_FILE": str(pid_file), "NOTES_FILE": str(notes)}
    config = workdir / "mcp_config.json"
    servers_ = {"cat": {"command": sys.executable, "args": [SERVER], "env": env}}
    config.write_text(json.dumps({"NetaApp": {"mcp_servers": servers_}}))
    turns = {
        "turns": [
            {"toolCalls": [{"name": "cat__lookup", "arguments": {"key": "rain"}}]},
            {"toolCalls": [{"name": "cat__write_note", "arguments": {"text": "hi"}}]},
            {"text": "done"},
        ]
    }
    model = script(workdir, turns)
    done = cli(
        "run",
        *embedded(workdir, "look it up", "--model", model, "--config", str(config)),
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "starting MCP server cat" in out and "MCP server cat is ready" in out
    assert "✓ lookup from cat" in out and "the value of rain is 42" in out
    # Not read-only: it asks, and off a terminal the answer is no.
    assert "? write_note from the MCP server cat needs approval" in out and "denied" in out
    assert not notes.exists()
    assert _gone(_pid(pid_file))  # it stopped when the command ended


async def test_a_server_that_exits_between_calls_is_started_again_for_the_next_one(
    api: ApiClient, runtime: Runtime
) -> None:
    script_model(runtime, call("cat__quit"), ScriptedTurn(text="it quit"))
    first = await api.segment((await api.start("quit", model="scripted"))["requestId"])
    assert next(e for e in first if e["eventType"] == "TOOL_COMPLETED")["data"]["output"] == "bye"
    for _ in range(300):  # noticed while no call runs
        if (await servers(api))["cat"]["state"] == "exited":
            break
        await asyncio.sleep(0.1)
    assert (await servers(api))["cat"]["error"] == "exited; started again when next needed"

    script_model(runtime, call("cat__lookup", key="rain"), ScriptedTurn(text="back"))
    rid = (await api.start("rain?", model="scripted", tools=["cat__lookup"]))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    assert starts(events)["cat"][0]["message"] == "MCP server cat exited; starting it again"
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert done["output"] == "the value of rain is 42"


async def test_a_server_that_keeps_crashing_is_started_again_after_a_growing_pause(
    api: ApiClient, runtime: Runtime
) -> None:
    crash = call("cat__crash")
    script_model(runtime, crash, crash, crash, ScriptedTurn(text="it keeps crashing"))
    rid = (await api.start("crash it", model="scripted", tools=["cat__crash"]))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    failed = [e["data"]["errorMessage"] for e in events if e["eventType"] == "TOOL_FAILED"]
    assert len(failed) == 3 and all("exited during the call" in m for m in failed)
    restarts = [
        e["data"]["message"]
        for e in events
        if e["eventType"] == "PROCESS_EVENT" and e["data"]["status"] == "started"
    ]
    assert restarts == [
        "starting MCP server cat",
        "MCP server cat exited; starting it again",  # the first time at once
        "MCP server cat exited; starting it again in 1 s",
    ]


async def test_a_kernel_running_the_agent_itself_offers_the_servers_of_mcp_json(
    tmp_path: Path,
) -> None:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    entry = {"command": sys.executable, "args": [SERVER]}
    (config_dir / "mcp.json").write_text(json.dumps({"mcpServers": {"cat": entry}}))
    turns = {
        "turns": [
            {"toolCalls": [{"name": "cat__lookup", "arguments": {"key": "rain"}}]},
            {"text": "found it"},
        ]
    }
    (tmp_path / "script.json").write_text(json.dumps(turns))
    env = {
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "NETA_MODEL": f"scripted:{tmp_path / 'script.json'}",
        "NETA_DEMO_PACE": "0",
    }
    async with kernel(tmp_path, env) as k:
        await k.run("%load_ext neta_jupyter\nimport neta_jupyter")
        shown = await k.stdout("%neta mcp")
        assert "cat (stdio): idle (starts when a run first may use it)" in shown
        await k.run("run = neta_jupyter.ask('rain?', approve='auto')")
        await k.run("await run.wait(60)", timeout=70)
        report = await k.json(REPORT)
        assert report["mode"] == "embedded" and report["status"] == "completed"
        assert report["tools"] == ["cat__lookup"]
        assert "cat__lookup  [read-only]" in await k.stdout("%neta mcp")


def test_an_mcp_call_waiting_for_approval_survives_a_restart_and_runs_once_approved(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    entry = {"command": sys.executable, "args": [SERVER], "env": {"NOTES_FILE": str(notes)}}
    process = ServerProcess(tmp_path, {"mcp_servers": {"cat": entry}})
    model = tmp_path / "note.json"
    call_ = {"name": "cat__write_note", "arguments": {"text": "buy milk"}}
    model.write_text(json.dumps({"turns": [{"toolCalls": [call_]}]}))
    process.start()
    try:
        rid = start_run(process, content="note it", model=f"scripted:{model}")
        first = process.read(rid)
        assert first[-1]["data"]["suspendReason"]["type"] == "PERMISSION_ASK"
        ask = next(e["data"] for e in first if e["eventType"] == "PERMISSION_ASK")
        process.shutdown()
        # The restarted server's model goes on from here (a script is read afresh).
        model.write_text(json.dumps({"turns": [{"text": "noted"}]}))
        process.start()
        with process.client() as http:
            assert http.get("neta/api/mcp").json()["servers"][0]["state"] == "idle"
            body = {"requestId": rid, "approved": True, "askId": ask["askId"]}
            response = http.post("neta/api/agent/run/resumeTask", json=body)
            assert response.status_code == 200, response.text
        second = process.read(rid, after=first[-1]["seq"])
    finally:
        process.stop()
    assert second[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert starts(second)["cat"][-1]["status"] == "completed"  # started for the resumed call
    done = next(e["data"] for e in second if e["eventType"] == "TOOL_COMPLETED")
    assert done["toolName"] == "cat__write_note" and done["output"] == "wrote 8 characters"
    assert notes.read_text() == "buy milk"
