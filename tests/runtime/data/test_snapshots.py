"""A run whose stored position cannot be loaded ends with RUN_SNAPSHOT_INVALID, never a 5xx."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import (
    ProviderUnavailable,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
)
from neta_jupyter.runtime import Runtime
from neta_jupyter.store.health import DB_NAME
from neta_jupyter.store.records import UNREADABLE
from neta_jupyter.tools import ToolContext, ToolRegistry, tool
from tests.helpers import ApiClient, types
from tests.server_process import ServerProcess


@tool(name="legacy_export")
async def legacy_export(ctx: ToolContext, path: str) -> str:
    """Export the notebook's data to ``path`` (a tool a later configuration no longer offers)."""
    return f"exported to {path}"


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {
        "permission_rules": [
            {"tool": "read_file", "action": "ask"},
            {"tool": "legacy_export", "action": "ask"},
        ]
    }


def db(tmp_path: Path) -> Path:
    return tmp_path / "neta-data" / DB_NAME


def write_state(tmp_path: Path, rid: str, text: str) -> None:
    """What a damaged disk, a newer release or a hand edit leaves in the run's record."""
    with sqlite3.connect(db(tmp_path)) as conn:
        conn.execute("UPDATE runs SET state = ? WHERE request_id = ?", (text, rid))


def stored_state(tmp_path: Path, rid: str) -> dict[str, Any]:
    with sqlite3.connect(db(tmp_path)) as conn:
        [(text,)] = conn.execute("SELECT state FROM runs WHERE request_id = ?", (rid,))
    state: dict[str, Any] = json.loads(text)
    return state


async def suspended_on_ask(api: ApiClient, runtime: Runtime, name: str = "read_file") -> str:
    call = ScriptedToolCall(name, {"path": "data.txt"})
    runtime.models.register(
        "scripted", ScriptedModel([ScriptedTurn(tool_calls=[call]), ScriptedTurn(text="done")])
    )
    rid = str((await api.start("use the tool", model="scripted"))["requestId"])
    first = await api.segment(rid)
    assert first[-1]["eventType"] == "MESSAGE_SUSPENDED"
    return rid


async def assert_refused(api: ApiClient, rid: str, *, words: list[str], after: int) -> None:
    """resumeTask answers 409 RUN_SNAPSHOT_INVALID; the stream ends with one MESSAGE_FAILED."""
    response = await api.resume(rid, approved=True)
    assert response.status_code == 409, response.text
    body = response.json()
    assert body["errCode"] == "RUN_SNAPSHOT_INVALID"
    rest = await api.segment(rid, after)
    assert types(rest)[-1] == "MESSAGE_FAILED"
    assert sum(t.startswith("MESSAGE_") for t in types(rest)) == 1
    failed = rest[-1]["data"]
    assert failed["errorCode"] == "RUN_SNAPSHOT_INVALID"
    assert failed["recoverable"] is False
    for word in words:
        assert word in failed["errorMessage"], failed["errorMessage"]
        assert word in body["message"]
    assert (await api.status(rid))["status"] == "failed"
    again = await api.resume(rid, approved=True)
    assert again.status_code == 409 and again.json()["errCode"] == "RUN_NOT_SUSPENDED"


@pytest.mark.parametrize(
    ("stored", "words"),
    [
        ('{"version": 2, "step": 1, "next": {"kind": "run_', ["state", "not JSON"]),
        ('{"version": 9, "step": 1}', ["state", "version 9"]),
        ('{"version": 2, "step": "one"}', ["state", "step"]),
        ('{"version": 2, "next": {"kind": "teleport"}}', ["state", "next"]),
        ("[1, 2, 3]", ["state", "not an object"]),
    ],
    ids=["bad-json", "unknown-version", "ill-typed-step", "unknown-step", "not-an-object"],
)
async def test_resuming_a_run_whose_state_cannot_be_loaded(
    api: ApiClient, runtime: Runtime, tmp_path: Path, stored: str, words: list[str]
) -> None:
    rid = await suspended_on_ask(api, runtime)
    last = (await api.status(rid))["lastSeq"]
    write_state(tmp_path, rid, stored)
    status = await api.status(rid)  # the run can still be looked at, and listed
    assert status["status"] == "suspended"
    listed = await api.http.get("neta/api/agent/runs")
    assert listed.status_code == 200 and rid in listed.text
    await assert_refused(api, rid, words=words, after=last)
    with sqlite3.connect(db(tmp_path)) as conn:
        [(kept,)] = conn.execute("SELECT state FROM runs WHERE request_id = ?", (rid,))
    # What was stored is kept (text that was not JSON at all, with why), for whoever looks into it.
    assert kept == stored or UNREADABLE in json.loads(kept)


async def test_resuming_a_run_that_waits_on_a_tool_no_longer_offered(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.tools.register(legacy_export)
    rid = await suspended_on_ask(api, runtime, "legacy_export")
    last = (await api.status(rid))["lastSeq"]
    # The server's tools changed (a new configuration, an extension removed) while it waited.
    runtime.tools = ToolRegistry(
        [t for n in runtime.tools.names() if n != "legacy_export" and (t := runtime.tools.get(n))]
    )
    await assert_refused(api, rid, words=["legacy_export", "no longer offers"], after=last)
    tree = await api.http.get(
        "neta/api/sessions/tree", params={"sessionId": (await api.status(rid))["sessionId"]}
    )
    [result] = [e for e in tree.json()["entries"] if e["role"] == "tool"]
    assert "not executed" in result["message"]["content"].lower() or "not run" in (
        result["message"]["content"].lower()
    ), "the call that cannot run is answered, so the session's next prompt is valid"


async def test_retrying_a_failed_run_whose_state_cannot_be_loaded(
    api: ApiClient, runtime: Runtime, tmp_path: Path
) -> None:
    runtime.config.llm_max_retries = 0
    runtime.models.register(
        "scripted",
        ScriptedModel(
            [ScriptedTurn(error=ProviderUnavailable("upstream reset", network_error=True))]
        ),
    )
    rid = str((await api.start("hello", model="scripted"))["requestId"])
    first = await api.segment(rid)
    assert first[-1]["data"]["recoverable"] is True
    write_state(tmp_path, rid, '{"version": 2, "usage": "lots"}')
    response = await api.post("retryTask", {"requestId": rid})
    assert response.status_code == 409, response.text
    assert response.json()["errCode"] == "RUN_SNAPSHOT_INVALID"
    rest = await api.segment(rid, first[-1]["seq"])
    assert types(rest) == ["PHASE_CHANGED", "STOP_REASON_DECIDED", "MESSAGE_FAILED"]
    assert rest[1]["data"]["reason"] == "failure"
    assert rest[-1]["data"]["errorCode"] == "RUN_SNAPSHOT_INVALID"
    assert "usage" in rest[-1]["data"]["errorMessage"]
    again = await api.post("retryTask", {"requestId": rid})
    assert again.status_code == 409 and again.json()["errCode"] == "RUN_NOT_RETRYABLE"


def test_a_restart_over_runs_whose_state_cannot_be_loaded(tmp_path: Path) -> None:
    from tests.restart.test_runs import after_restart, slow_script, start

    server = ServerProcess(tmp_path, {"permission_rules": [{"tool": "read_file", "action": "ask"}]})
    server.start()
    try:
        (server.root / "data.txt").write_text("forty-two")
        script = tmp_path / "ask.json"
        call = {"name": "read_file", "arguments": {"path": "data.txt"}}
        script.write_text(json.dumps({"turns": [{"toolCalls": [call]}, {"text": "done"}]}))
        asking = start(server, content="read data.txt", model=f"scripted:{script}")
        suspended = server.read(asking)[-1]
        assert suspended["eventType"] == "MESSAGE_SUSPENDED"
        running = start(
            server, content="write", model=slow_script(tmp_path / "slow.json"), sessionName="w"
        )
        server.read(running, limit=20)
        server.kill9()
        write_state(server.workdir, asking, '{"version": 2, "ask": {"kind": "telepathy"}')
        write_state(server.workdir, running, '{"version": 3}')
        after_restart(script, {"text": "done"})
        server.start()  # the server starts, and every run can be looked at
        crashed = server.read(running)
        assert sum(e["eventType"].startswith("MESSAGE_") for e in crashed) == 1
        assert crashed[-1]["data"]["errorCode"] == "RUN_SNAPSHOT_INVALID"
        assert "version 3" in crashed[-1]["data"]["errorMessage"]
        with server.client() as http:
            assert http.get("neta/api/agent/runs").status_code == 200
            status = http.get("neta/api/agent/run/status", params={"requestId": asking})
            assert status.status_code == 200 and status.json()["status"] == "suspended"
            response = http.post(
                "neta/api/agent/run/resumeTask", json={"requestId": asking, "approved": True}
            )
        assert response.status_code == 409, response.text
        assert response.json()["errCode"] == "RUN_SNAPSHOT_INVALID"
        rest = server.read(asking, after=suspended["seq"])
        assert [e["eventType"] for e in rest][-2:] == ["STOP_REASON_DECIDED", "MESSAGE_FAILED"]
        assert sum(e["eventType"].startswith("MESSAGE_") for e in rest) == 1
        assert rest[-1]["data"]["errorCode"] == "RUN_SNAPSHOT_INVALID"
        assert "not JSON" in rest[-1]["data"]["errorMessage"]
    finally:
        server.stop()


LEGACY_TOOL = '''
from neta_jupyter.tools import ToolContext, tool


@tool(name="legacy_export")
async def legacy_export(ctx: ToolContext, path: str) -> str:
    """Export the notebook's data to ``path``."""
    return f"exported to {path}"
'''


def test_a_restart_without_the_tool_a_run_waits_on(tmp_path: Path) -> None:
    from tests.restart.test_runs import start

    # The server runs from its work folder, so a module there is an extra tool it can import.
    (tmp_path / "legacy_tool.py").write_text(LEGACY_TOOL)
    rules = [{"tool": "legacy_export", "action": "ask"}]
    server = ServerProcess(
        tmp_path, {"permission_rules": rules, "extra_tools": ["legacy_tool:legacy_export"]}
    )
    server.start()
    try:
        script = tmp_path / "export.json"
        call = {"name": "legacy_export", "arguments": {"path": "out.csv"}}
        script.write_text(json.dumps({"turns": [{"toolCalls": [call]}, {"text": "done"}]}))
        rid = start(server, content="export it", model=f"scripted:{script}")
        suspended = server.read(rid)[-1]
        assert suspended["data"]["suspendReason"]["type"] == "PERMISSION_ASK"
        server.shutdown()
        config = json.loads(server.config_file.read_text())
        del config["NetaApp"]["extra_tools"]  # the new configuration drops the tool
        server.config_file.write_text(json.dumps(config))
        server.start()
        assert server.read(rid)[-1]["eventType"] == "MESSAGE_SUSPENDED"
        with server.client() as http:
            response = http.post(
                "neta/api/agent/run/resumeTask", json={"requestId": rid, "approved": True}
            )
        assert response.status_code == 409, response.text
        assert response.json()["errCode"] == "RUN_SNAPSHOT_INVALID"
        rest = server.read(rid, after=suspended["seq"])
        assert sum(e["eventType"].startswith("MESSAGE_") for e in rest) == 1
        failed = rest[-1]["data"]
        assert failed["errorCode"] == "RUN_SNAPSHOT_INVALID"
        assert "'legacy_export'" in failed["errorMessage"]
        assert "no longer offers" in failed["errorMessage"]
    finally:
        server.stop()
