"""End to end over a real jupyter server and a real SSE client: the demo run and seed 003 §7."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import TERMINAL, ApiClient, assert_in_order, types


@pytest.fixture
def neta_config() -> dict[str, Any]:
    # Reading files is read-only and allowed by default; this server asks first, so the demo
    # run exercises the whole permission round trip.
    return {
        "permission_rules": [
            {"tool": "read_file", "action": "ask", "description": "reading files needs approval"}
        ]
    }


async def test_demo_run_with_permission_ask_and_answer(api: ApiClient, jp_root_dir: Path) -> None:
    (jp_root_dir / "notes.txt").write_text("quarterly revenue grew 12%\nchurn fell to 3%\n")
    started = await api.start("Please summarise notes.txt for me")
    rid = started["requestId"]

    first = await api.segment(rid)
    names = types(first)
    assert names[0] == "SESSION_CREATED"
    assert [e["seq"] for e in first] == list(range(len(first)))
    assert sum(n in TERMINAL for n in names) == 1 and names[-1] == "MESSAGE_SUSPENDED"
    assert_in_order(
        names,
        [
            "SESSION_CREATED",
            "REASONING_START",
            "REASONING_DELTA",
            "REASONING_END",
            "TOOL_CALL_GENERATING",
            "PERMISSION_ASK",
            "MESSAGE_SUSPENDED",
        ],
    )
    ask = next(e for e in first if e["eventType"] == "PERMISSION_ASK")["data"]
    assert ask["toolName"] == "read_file" and "notes.txt" in ask["arguments"]
    assert ask["ruleDescription"] == "reading files needs approval"
    assert first[-1]["data"]["suspendReason"]["type"] == "PERMISSION_ASK"

    response = await api.resume(rid, approved=True, askId=ask["askId"])
    assert response.status_code == 200, response.text

    second = await api.segment(rid, last_event_id=first[-1]["seq"])
    assert [e["seq"] for e in second] == list(
        range(first[-1]["seq"] + 1, first[-1]["seq"] + 1 + len(second))
    )
    names = types(second)
    assert sum(n in TERMINAL for n in names) == 1 and names[-1] == "MESSAGE_COMPLETED"
    assert_in_order(
        names,
        [
            "PERMISSION_ASK_RESOLVED",
            "TOOL_START",
            "TOOL_RUNNING",
            "TOOL_COMPLETED",
            "TEXT_START",
            "TEXT_DELTA",
            "TEXT_END",
            "MESSAGE_COMPLETED",
        ],
    )
    completed = next(e for e in second if e["eventType"] == "TOOL_COMPLETED")["data"]
    assert "quarterly revenue grew 12%" in completed["output"]
    answer = "".join(e["data"]["text"] for e in second if e["eventType"] == "TEXT_DELTA")
    assert "12%" in answer or "quarterly revenue" in answer
    final = second[-1]
    assert final["data"]["finishReason"] == "STOP"
    assert final["data"]["usage"]["totalTokens"] > 0
    assert final["requestId"] == rid

    # The whole log replays from 0 in one piece, identical to what was streamed.
    replay = await api.frames(rid, last_event_id=None)
    assert [f.json for f in replay if f.event != "HEARTBEAT"][: len(first)] == first


async def test_reconnect_after_terminal_gets_204(api: ApiClient) -> None:
    rid = (await api.start("hello there"))["requestId"]
    events = await api.segment(rid)
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
    response = await api.http.get(
        "neta/api/agent/run/stream", params={"requestId": rid, "lastEventId": events[-1]["seq"]}
    )
    assert response.status_code == 204
    # The standard header works too, as a browser EventSource sends it.
    response = await api.http.get(
        "neta/api/agent/run/stream",
        params={"requestId": rid},
        headers={"Last-Event-ID": str(events[-1]["seq"])},
    )
    assert response.status_code == 204
