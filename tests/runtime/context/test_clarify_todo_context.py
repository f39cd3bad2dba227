"""Clarify and todo round trips; the context builder's sections."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import websockets

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, types
from tests.notebook_room import write_notebook


def of(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["eventType"] == name]


async def test_clarify_round_trip_over_rest(api: ApiClient, runtime: Runtime) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[
                    ScriptedToolCall(
                        "clarify", {"question": "Which column?", "options": ["price", "qty"]}
                    )
                ]
            ),
            ScriptedTurn(text="Using qty."),
        ]
    )
    runtime.models.register("c", model)
    rid = (await api.start("plot the column", model="c"))["requestId"]
    first = await api.segment(rid)
    [request] = of(first, "CLARIFY_REQUEST")
    assert request["question"] == "Which column?" and request["options"] == ["price", "qty"]
    suspended = first[-1]["data"]["suspendReason"]
    assert suspended["type"] == "CLARIFY_REQUEST" and suspended["askId"] == request["clarifyId"]
    missing = await api.resume(rid, askId=request["clarifyId"])
    assert missing.status_code == 400 and missing.json()["errCode"] == "ANSWER_REQUIRED"
    ok = await api.resume(rid, askId=request["clarifyId"], answer="qty")
    assert ok.status_code == 200, ok.text
    second = await api.segment(rid, first[-1]["seq"])
    completed = of(second, "TOOL_COMPLETED")[0]
    assert completed["toolName"] == "clarify" and completed["output"] == "qty"
    assert model.requests[1].messages[-1].content == "qty"
    assert second[-1]["eventType"] == "MESSAGE_COMPLETED"


async def test_clarify_answered_over_websocket(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    runtime.models.register(
        "c",
        ScriptedModel(
            [
                ScriptedTurn(tool_calls=[ScriptedToolCall("clarify", {"question": "Which year?"})]),
                ScriptedTurn(text="2024 it is."),
            ]
        ),
    )
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
        await ws.send(json.dumps({"type": "chat", "content": "sales?", "model": "c"}))
        events: list[dict[str, Any]] = []
        rid = None
        answered = False
        while not events or events[-1]["eventType"] != "MESSAGE_COMPLETED":
            frame = json.loads(await ws.recv())
            if isinstance(frame, dict):
                rid = frame.get("requestId", rid)
                assert frame["type"] != "error", frame
                continue
            events += frame
            if events[-1]["eventType"] == "MESSAGE_SUSPENDED" and not answered:
                answered = True
                clarify_id = of(events, "CLARIFY_REQUEST")[0]["clarifyId"]
                await ws.send(
                    json.dumps(
                        {
                            "type": "clarify_response",
                            "requestId": rid,
                            "askId": clarify_id,
                            "answer": "2024",
                        }
                    )
                )
    assert of(events, "TOOL_COMPLETED")[0]["output"] == "2024"


async def test_todo_updates_reach_the_stream_and_the_context(
    api: ApiClient, runtime: Runtime
) -> None:
    items = [
        {"content": "load the data", "status": "completed"},
        {"content": "plot the trend", "status": "in_progress"},
    ]
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ScriptedToolCall("todo", {"items": items})]),
            ScriptedTurn(text="Plan recorded."),
            ScriptedTurn(text="Continuing with the plot."),
        ]
    )
    runtime.models.register("t", model)
    events = await api.segment(
        (await api.start("analyse", model="t", sessionName="plan"))["requestId"]
    )
    [update] = of(events, "TODO_UPDATE")
    assert update["items"] == [
        {"id": "1", "content": "load the data", "status": "completed"},
        {"id": "2", "content": "plot the trend", "status": "in_progress"},
    ]
    assert "2 items, 1 done" in of(events, "TOOL_COMPLETED")[0]["output"]
    await api.segment((await api.start("go on", model="t", sessionName="plan"))["requestId"])
    system = model.requests[2].system
    assert (
        "## Todo list" in system
        and "- [x] load the data" in system
        and "- [~] plot the trend" in system
    )


async def test_context_has_agents_md_memo_and_trims_huge_outputs(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "AGENTS.md").write_text("Always answer in British English.")
    (jp_root_dir / "proj" / "nb").mkdir(parents=True)
    write_notebook(jp_root_dir / "proj" / "nb" / "analysis.ipynb")
    (jp_root_dir / "proj" / "AGENTS.md").write_text("Prices are in EUR.")
    (jp_root_dir / "other").mkdir()
    (jp_root_dir / "other" / "AGENTS.md").write_text("NOT FOR THIS NOTEBOOK")
    (jp_root_dir / ".neta").mkdir()
    (jp_root_dir / ".neta" / "MEMO.md").write_text("The user prefers seaborn.")
    (jp_root_dir / "big.txt").write_text("x" * 100_000)
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[
                    ScriptedToolCall("read_file", {"path": "big.txt", "max_bytes": 100_000})
                ]
            ),
            ScriptedTurn(text="done"),
        ]
    )
    runtime.models.register("ctx", model)
    rid = (await api.start("read big.txt", model="ctx", notebookPath="proj/nb/analysis.ipynb"))[
        "requestId"
    ]
    events = await api.segment(rid)
    system = model.requests[0].system
    assert system.index("British English") < system.index("Prices are in EUR")
    assert "NOT FOR THIS NOTEBOOK" not in system
    assert "The user prefers seaborn." in system
    tool_message = model.requests[1].messages[-1].content
    assert len(tool_message) < 20_000 and "characters trimmed" in tool_message
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    session = await runtime.store.records.get_session(events[0]["data"]["sessionId"])
    assert session is not None
    stored = await runtime.store.records.path(session.session_id, session.leaf_entry_id)
    assert any(len(e.message.get("content", "")) >= 100_000 for e in stored), (
        "the transcript keeps it whole"
    )


async def test_agents_md_and_the_memo_stay_inside_the_root_and_are_read_once(
    api: ApiClient,
    runtime: Runtime,
    jp_root_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from neta_jupyter.runtime.context import instructions

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- hunter2")
    (outside / "notes.md").write_text("memo from outside the root")
    (jp_root_dir / "AGENTS.md").symlink_to(outside / "id_rsa")
    (jp_root_dir / ".neta").mkdir()
    (jp_root_dir / ".neta" / "MEMO.md").symlink_to(outside / "notes.md")
    (jp_root_dir / "proj").mkdir()
    (jp_root_dir / "proj" / "real.md").write_text("Use metric units. " + "x" * 5_000_000)
    (jp_root_dir / "proj" / "AGENTS.md").symlink_to(jp_root_dir / "proj" / "real.md")
    write_notebook(jp_root_dir / "proj" / "a.ipynb")
    reads: list[Path] = []
    read_start = instructions._read_start
    monkeypatch.setattr(instructions, "_read_start", lambda p: reads.append(p) or read_start(p))
    model = ScriptedModel([ScriptedTurn(text="one"), ScriptedTurn(text="two")])
    runtime.models.register("notes", model)
    for prompt in ("first", "second"):
        started = await api.start(prompt, model="notes", notebookPath="proj/a.ipynb")
        assert types(await api.segment(started["requestId"]))[-1] == "MESSAGE_COMPLETED"
    for request in model.requests:
        assert "hunter2" not in request.system and "memo from outside" not in request.system
        assert "Use metric units." in request.system, "a link inside the root is followed"
        assert len(request.system) < 20_000, "a huge AGENTS.md is cut to its start"
    assert reads == [(jp_root_dir / "proj" / "real.md").resolve()], "read once, then cached"
