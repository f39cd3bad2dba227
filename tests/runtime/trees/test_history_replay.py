"""What a run's history keeps of it (seed 002's session tree projection, seed 000's replay).

A tool call's entry in the session tree carries what its events said — its arguments, duration,
failure, images and a sample of its process timeline with the full log's place — and a
sub-agent's entry carries its child's result; both reach followers of the session's stream
(SSE here) as SESSION_ENTRY_UPDATED and the tree snapshot, from which a view rebuilds the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from httpx_sse import aconnect_sse

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient
from tests.tools.test_skills import make_skill

pytestmark = pytest.mark.timeout(120)

STAGED_SKILL = """
import json
for stage, percent in [("load", 10), ("load", 40), ("profile", 70), ("profile", 90)]:
    print(json.dumps({"type": "progress", "stage": stage, "percent": percent,
                      "payload": {"apiKey": "sk-NEVERshownNEVERshown0123"}}), flush=True)
print(json.dumps({"type": "result", "output": "profiled"}), flush=True)
"""


async def session_events(api: ApiClient, runtime: Runtime, sid: str) -> list[dict[str, Any]]:
    """The session's stream over SSE from its start, as far as it is stored now."""
    count = len(await runtime.store.events.read_after(sid, -1))
    out: list[dict[str, Any]] = []
    params = {"sessionId": sid}
    async with aconnect_sse(api.http, "GET", "neta/api/agent/session/stream", params=params) as src:
        async for sse in src.aiter_sse():
            if sse.event != "HEARTBEAT":
                out.append(json.loads(sse.data))
            if len(out) == count:
                break
    return out


def updated(events: list[dict[str, Any]], role: str) -> list[dict[str, Any]]:
    return [
        e["data"]
        for e in events
        if e["eventType"] == "SESSION_ENTRY_UPDATED" and e["data"]["role"] == role
    ]


async def test_tool_calls_keep_what_their_events_said_in_the_session_tree(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    make_skill(jp_root_dir, "staged", STAGED_SKILL)
    calls = [
        ScriptedToolCall("run_skill", {"name": "staged"}, id="call_skill"),
        ScriptedToolCall("read_file", {"path": "missing.txt"}, id="call_read"),
    ]
    runtime.models.register(
        "scripted", ScriptedModel([ScriptedTurn(tool_calls=calls), ScriptedTurn(text="done")])
    )
    started = await api.start("profile it", model="scripted", approve="auto")
    run_events = await api.segment(started["requestId"])
    assert run_events[-1]["eventType"] == "MESSAGE_COMPLETED"
    events = await session_events(api, runtime, started["sessionId"])

    final = updated(events, "assistant")[-1]
    assert final["status"] == "complete"
    skill, read = final["toolCalls"]
    assert (skill["toolCallId"], skill["status"]) == ("call_skill", "completed")
    assert json.loads(skill["arguments"]) == {"name": "staged"}
    assert isinstance(skill["durationMs"], int)
    # The timeline as the run's stream showed it, one row per stage, its last state.
    stages = [(p["stage"], p["status"]) for p in skill["process"]]
    assert ("load", "running") in stages and ("profile", "running") in stages
    assert stages.index(("load", "running")) < stages.index(("profile", "running"))
    last = {p["stage"]: p.get("percent") for p in skill["process"]}
    assert last["load"] == 40 and last["profile"] == 90
    streamed = [
        e["data"]
        for e in run_events
        if e["eventType"] == "PROCESS_EVENT" and e["data"]["toolCallId"] == "call_skill"
    ]
    assert all(p in streamed for p in skill["process"])
    [log] = [ref for ref in skill["processLogs"] if ref.endswith("op_call_skill.jsonl")]
    assert (runtime.config.data_dir / log).is_file()
    assert "NEVERshown" not in json.dumps(events)
    assert (read["toolCallId"], read["status"]) == ("call_read", "failed")
    assert "missing.txt" in read["errorMessage"] and "process" not in read

    reply = await api.http.get("neta/api/sessions/tree", params={"sessionId": started["sessionId"]})
    snapshot = {e["entryId"]: e for e in reply.json()["entries"]}
    assert snapshot[final["entryId"]]["toolCalls"] == final["toolCalls"]
    assert "call_meta" not in snapshot[final["entryId"]]["message"]


async def test_a_sub_agents_result_reaches_its_entry_in_the_session_tree(
    api: ApiClient, runtime: Runtime
) -> None:
    answer = "The worker found 3 rows. " * 100  # longer than a preview
    runtime.models.register("worker", ScriptedModel([ScriptedTurn(text=answer)]))
    call = ScriptedToolCall(
        "delegate", {"tasks": [{"task": "count rows", "model": "worker"}]}, id="call_delegate"
    )
    runtime.models.register(
        "boss", ScriptedModel([ScriptedTurn(tool_calls=[call]), ScriptedTurn(text="ok")])
    )
    started = await api.start("count", model="boss")
    assert (await api.segment(started["requestId"]))[-1]["eventType"] == "MESSAGE_COMPLETED"
    events = await session_events(api, runtime, started["sessionId"])

    added = next(
        e["data"]
        for e in events
        if e["eventType"] == "SESSION_ENTRY_ADDED" and e["data"]["role"] == "subagent"
    )
    assert added["subagent"] == {"status": "queued", "agentId": "sub-agent 1", "task": "count rows"}
    done = updated(events, "subagent")[-1]
    assert done["status"] == "complete"
    assert done["subagent"]["status"] == "completed"
    assert done["subagent"]["answerPreview"] == answer[:2000]
    assert done["subagent"]["answerTruncated"] is True
    [delegate] = updated(events, "assistant")[-1]["toolCalls"]
    assert delegate["toolName"] == "delegate" and isinstance(delegate["durationMs"], int)


HISTORY = {
    "sessionName": "from the platform",
    "content": "profile sales.csv",
    "answer": "Sales has 40 rows; units misses 6 values.",
    "toolCalls": [
        {
            "name": "run_skill",
            "arguments": {"name": "profile_data", "args": {"path": "sales.csv"}},
            "output": "40 rows, 4 columns",
            "durationMs": 1830,
            "process": [
                {"operationId": "op_1", "stage": "load", "status": "running", "percent": 25},
                {"operationId": "op_1", "stage": "profile", "status": "running", "percent": 80},
                {
                    "operationId": "op_1",
                    "stage": "profile",
                    "status": "completed",
                    "percent": 100,
                    "payload": {"token": "tok-NEVERshownNEVERshown", "rows": 40},
                },
            ],
        },
        {
            "name": "read_file",
            "arguments": {"path": "gone.txt"},
            "status": "failed",
            "errorMessage": "no such file: gone.txt",
        },
    ],
}


async def test_an_imported_run_has_no_stream_and_its_tool_calls_are_in_the_tree(
    api: ApiClient,
) -> None:
    reply = await api.http.post("neta/api/agent/run/import", json=HISTORY)
    assert reply.status_code == 200, reply.text
    rid, sid = reply.json()["requestId"], reply.json()["sessionId"]
    stream = await api.http.get("neta/api/agent/run/stream", params={"requestId": rid})
    assert stream.status_code == 409 and stream.json()["errCode"] == "IMPORTED_RUN"

    tree = (await api.http.get("neta/api/sessions/tree", params={"sessionId": sid})).json()
    entries = [e for e in tree["entries"] if e["requestId"] == rid]
    assert [e["role"] for e in entries] == ["user", "assistant", "tool", "tool", "assistant"]
    skill, read = entries[1]["toolCalls"]
    assert entries[1]["status"] == "complete"
    assert (skill["toolName"], skill["status"], skill["durationMs"]) == (
        "run_skill",
        "completed",
        1830,
    )
    assert json.loads(skill["arguments"])["args"] == {"path": "sales.csv"}
    assert [(p["stage"], p["status"]) for p in skill["process"]] == [
        ("load", "running"),
        ("profile", "running"),
        ("profile", "completed"),
    ]
    assert {p["toolCallId"] for p in skill["process"]} == {skill["toolCallId"]}
    assert skill["process"][-1]["payload"] == {"token": "[redacted]", "rows": 40}
    assert (read["status"], read["errorMessage"]) == ("failed", "no such file: gone.txt")
    assert entries[2]["message"]["content"] == "40 rows, 4 columns"
    assert entries[4]["message"]["content"] == HISTORY["answer"]
