"""What an outside agent changes asks first; the answer comes through the run API, and the MCP
session's run replays over SSE with every call and decision in order."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import websockets

from neta_jupyter.tools.notebook_doc import source_hash
from tests.helpers import ApiClient, types
from tests.notebook_mcp.agent import agent, cells_of, text_of, write_notebook

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"mcp_progress_interval": 0.5}


async def pending_ask(api: ApiClient, prompt: str) -> tuple[str, dict[str, Any]]:
    """The requestId of the MCP session's run and the ask it waits on, once it does."""
    for _ in range(600):
        runs = (await api.http.get("neta/api/agent/runs")).json()["runs"]
        for run in runs:
            if run["prompt"] == prompt and run.get("pendingAsk"):
                return run["requestId"], run["pendingAsk"]
        await asyncio.sleep(0.1)
    raise AssertionError("no ask came")


async def test_an_ask_is_answered_through_the_run_api_and_the_run_replays_in_order(
    server_url: str, jp_auth_header: dict[str, str], jp_root_dir: Path, api: ApiClient
) -> None:
    path = write_notebook(jp_root_dir, "asks.ipynb", [("c1", "a = 1")])
    prompt = "MCP client asking-agent 2.0"
    async with agent(server_url, jp_auth_header, "asking-agent", "2.0") as session:
        read = await session.call_tool("read_notebook", {"notebook": "asks.ipynb"})
        assert not read.is_error  # reads are allowed without asking
        edit = {"notebook": "asks.ipynb", "cell_id": "c1", "source": "a = 2"}
        edit["source_hash"] = source_hash("a = 1")
        call = asyncio.ensure_future(session.call_tool("edit_cell", edit))
        request_id, ask = await pending_ask(api, prompt)
        assert cells_of(path)[0]["source"] == "a = 1"  # not before the answer
        answered = await api.resume(
            request_id, approved=True, askId=ask["askId"], digest=ask.get("digest")
        )
        assert answered.status_code == 200, answered.text
        edited = await asyncio.wait_for(call, 60)
        assert not edited.is_error, text_of(edited)
        assert cells_of(path)[0]["source"] == "a = 2"

        move = asyncio.ensure_future(
            session.call_tool(
                "delete_cell",
                {"notebook": "asks.ipynb", "cell_id": "c1", "source_hash": source_hash("a = 2")},
            )
        )
        request_id, ask = await pending_ask(api, prompt)
        refused = await api.resume(request_id, approved=False, askId=ask["askId"])
        assert refused.status_code == 200, refused.text
        denied = await asyncio.wait_for(move, 60)
        assert denied.is_error and "denied" in text_of(denied)
        assert [c["id"] for c in cells_of(path)] == ["c1"]

        again = asyncio.ensure_future(
            session.call_tool("insert_cell", {"notebook": "asks.ipynb", "source": "b = 1"})
        )
        request_id, ask = await pending_ask(api, prompt)
        always = await api.resume(request_id, approved=True, askId=ask["askId"], always=True)
        assert always.status_code == 200, always.text
        assert not (await asyncio.wait_for(again, 60)).is_error
        once_more = await session.call_tool(
            "insert_cell", {"notebook": "asks.ipynb", "source": "c = 1"}
        )
        assert not once_more.is_error  # "always allow" holds for the rest of the session
        assert [c["source"] for c in cells_of(path)] == ["a = 2", "b = 1", "c = 1"]
    async with agent(server_url, jp_auth_header, "asking-agent", "2.0") as session:
        fresh = asyncio.ensure_future(
            session.call_tool("insert_cell", {"notebook": "asks.ipynb", "source": "d = 1"})
        )
        later_id, ask = await pending_ask(api, prompt)  # a new session asks again
        assert later_id != request_id
        await api.resume(later_id, approved=False, askId=ask["askId"])
        assert (await asyncio.wait_for(fresh, 60)).is_error
    events = await api.segment(request_id)
    calls = [
        (e["eventType"], e["data"].get("toolName") or e["data"].get("approved"))
        for e in events
        if e["eventType"].startswith(("TOOL_START", "TOOL_COMPLETED", "TOOL_FAILED", "PERMISSION"))
    ]
    assert calls == [
        ("TOOL_START", "read_notebook"),
        ("TOOL_COMPLETED", "read_notebook"),
        ("PERMISSION_ASK", "edit_cell"),
        ("PERMISSION_ASK_RESOLVED", True),
        ("TOOL_START", "edit_cell"),
        ("TOOL_COMPLETED", "edit_cell"),
        ("PERMISSION_ASK", "delete_cell"),
        ("PERMISSION_ASK_RESOLVED", False),
        ("TOOL_FAILED", "delete_cell"),
        ("PERMISSION_ASK", "insert_cell"),
        ("PERMISSION_ASK_RESOLVED", True),
        ("TOOL_START", "insert_cell"),
        ("TOOL_COMPLETED", "insert_cell"),
        ("TOOL_START", "insert_cell"),
        ("TOOL_COMPLETED", "insert_cell"),
    ]
    assert types(events)[0] == "SESSION_CREATED" and types(events)[-1] == "MESSAGE_COMPLETED"
    assert [e["seq"] for e in events] == list(range(len(events)))
    started = next(
        e for e in events if e["eventType"] == "TOOL_START" and e["data"]["toolName"] == "edit_cell"
    )
    assert json.loads(started["data"]["arguments"]) == edit
    summary = await api.status(request_id)
    assert summary["status"] == "completed"
    assert summary["origin"] == {"kind": "mcp", "notebookPath": None, "client": "asking-agent"}
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header, max_size=None) as ws:
        await ws.send(json.dumps({"type": "subscribe", "requestId": request_id}))
        followed: list[dict[str, Any]] = []
        while not followed or followed[-1]["eventType"] != "MESSAGE_COMPLETED":
            frame = json.loads(await ws.recv())
            if isinstance(frame, list):
                followed += [e for e in frame if e["eventType"] != "HEARTBEAT"]
    assert followed == events  # over the WebSocket as over SSE
