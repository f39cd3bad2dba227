"""The session tree's events: what runs add, finalise and move on their streams, and a session's
own stream, followed over the WebSocket and SSE, which also carries a leaf switched over REST."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import websockets
from httpx_sse import aconnect_sse
from websockets.asyncio.client import ClientConnection

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, script

pytestmark = pytest.mark.timeout(120)

TREE = {"SESSION_ENTRY_ADDED", "SESSION_ENTRY_UPDATED", "SESSION_LEAF_CHANGED"}


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {
        "permission_rules": [{"tool": "read_file", "args": {"path": "secret*"}, "action": "ask"}]
    }


def tree_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["eventType"] in TREE]


async def snapshot(api: ApiClient, session_id: str) -> dict[str, Any]:
    reply = await api.http.get("neta/api/sessions/tree", params={"sessionId": session_id})
    assert reply.status_code == 200, reply.text
    tree: dict[str, Any] = reply.json()
    return tree


async def stored(runtime: Runtime, stream: str, after: int = -1) -> list[str]:
    return [e.payload for e in await runtime.store.events.read_after(stream, after)]


def compact(envelope: dict[str, Any]) -> str:
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)


def assert_agrees_with_snapshot(events: list[dict[str, Any]], tree: dict[str, Any]) -> None:
    """Applied in order, the events give the snapshot's nodes and leaf."""
    nodes: dict[str, dict[str, Any]] = {}
    leaf = None
    for event in events:
        data = event["data"]
        if event["eventType"] == "SESSION_LEAF_CHANGED":
            leaf = data["leafEntryId"]
        else:
            nodes[data["entryId"]] = data
    assert leaf == tree["leafEntryId"]
    by_id = {e["entryId"]: e for e in tree["entries"]}
    for entry_id, node in nodes.items():
        entry = by_id[entry_id]
        assert (node.get("parentId"), node["role"], node["status"]) == (
            entry["parentId"],
            entry["role"],
            entry["status"],
        )
        assert node.get("toolCalls") == entry.get("toolCalls")


async def test_a_run_publishes_the_entries_it_adds_and_finalises_and_the_leaf_it_moves(
    api: ApiClient, runtime: Runtime
) -> None:
    script(
        runtime,
        ScriptedTurn(text="Let me look.", tool_calls=[ScriptedToolCall("list_files", {})]),
        ScriptedTurn(text="There are no files."),
    )
    started = await api.start("which files are there?", model="scripted")
    rid, sid = started["requestId"], started["sessionId"]
    events = tree_events(await api.segment(rid))
    shape = [(e["eventType"], e["data"].get("role"), e["data"].get("status")) for e in events]
    assert shape == [
        ("SESSION_ENTRY_ADDED", "user", "complete"),
        ("SESSION_LEAF_CHANGED", None, None),
        ("SESSION_ENTRY_ADDED", "assistant", "pending"),
        ("SESSION_LEAF_CHANGED", None, None),
        ("SESSION_ENTRY_ADDED", "tool", "complete"),
        ("SESSION_LEAF_CHANGED", None, None),
        ("SESSION_ENTRY_UPDATED", "assistant", "complete"),
        ("SESSION_ENTRY_ADDED", "assistant", "complete"),
        ("SESSION_LEAF_CHANGED", None, None),
    ]
    user, _, asking, _, result, _, finalised, answer, last_move = (e["data"] for e in events)
    # The entry the run finalises is the reply whose call now has its result.
    assert finalised["entryId"] == asking["entryId"] == result["parentId"]
    [call] = asking["toolCalls"]
    assert call["toolName"] == "list_files" and call["status"] == "pending"
    # Its result joined the history with what the call's events said of it.
    assert finalised["toolCalls"] == [
        {**call, "status": "completed", "durationMs": finalised["toolCalls"][0]["durationMs"]}
    ]
    assert isinstance(finalised["toolCalls"][0]["durationMs"], int)
    assert all(e["data"]["requestId"] == rid for e in events)
    # Every new entry becomes the leaf; the last move names the run's answer.
    moves = [e["data"] for e in events if e["eventType"] == "SESSION_LEAF_CHANGED"]
    assert [m["leafEntryId"] for m in moves] == [
        user["entryId"],
        asking["entryId"],
        result["entryId"],
        answer["entryId"],
    ]
    assert [m.get("previousLeafEntryId") for m in moves] == [
        None,
        *(m["leafEntryId"] for m in moves[:-1]),
    ]
    assert last_move["leafEntryId"] == answer["entryId"]
    tree = await snapshot(api, sid)
    assert_agrees_with_snapshot(events, tree)
    # The session's own stream carries the same changes, numbered from 0 under the session's id.
    own = [json.loads(p) for p in await stored(runtime, sid)]
    assert [e["seq"] for e in own] == list(range(len(own)))
    assert {e["requestId"] for e in own} == {sid}
    assert [(e["eventType"], e["data"]) for e in own] == [
        (e["eventType"], e["data"]) for e in events
    ]
    assert tree["lastSeq"] == own[-1]["seq"]


async def test_a_run_that_ends_before_its_call_runs_marks_the_call_not_run(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "secret.txt").write_text("the password")
    script(
        runtime, ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "secret.txt"})])
    )
    started = await api.start("read secret.txt", model="scripted")
    rid = started["requestId"]
    first = await api.segment(rid)
    assert first[-1]["eventType"] == "MESSAGE_SUSPENDED"
    [waiting] = [e["data"] for e in tree_events(first) if e["data"].get("role") == "assistant"]
    assert waiting["status"] == "pending"
    stopped = await api.post("terminateTask", {"requestId": rid})
    assert stopped.status_code == 200, stopped.text
    after = tree_events(await api.segment(rid, first[-1]["seq"]))
    [updated] = [e["data"] for e in after if e["eventType"] == "SESSION_ENTRY_UPDATED"]
    assert updated["entryId"] == waiting["entryId"] and updated["status"] == "complete"
    assert [c["status"] for c in updated["toolCalls"]] == ["not_run"]
    assert_agrees_with_snapshot(
        tree_events(first) + after, await snapshot(api, started["sessionId"])
    )


async def test_a_prompt_that_supersedes_a_waiting_run_continues_after_the_calls_it_closed(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "secret.txt").write_text("the password")
    model = script(
        runtime,
        ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "secret.txt"})]),
        ScriptedTurn(text="As you wish."),
    )
    one = await api.start("read secret.txt", model="scripted", sessionName="superseded")
    waiting = await api.segment(one["requestId"])
    assert waiting[-1]["eventType"] == "MESSAGE_SUSPENDED"
    two = await api.start("never mind", model="scripted", sessionId=one["sessionId"])
    events = tree_events(await api.segment(two["requestId"]))
    closed = tree_events(await api.segment(one["requestId"], waiting[-1]["seq"]))
    [not_run] = [e["data"] for e in closed if e["data"].get("role") == "tool"]
    question = events[0]["data"]
    assert question["parentId"] == not_run["entryId"], "the new turn follows the closed call"
    # The model sees every call it made answered (providers refuse a call without its result).
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "tool", "user"]


async def two_turns(api: ApiClient, runtime: Runtime) -> tuple[str, dict[str, Any]]:
    script(runtime, ScriptedTurn(text="first answer"), ScriptedTurn(text="second answer"))
    one = await api.start("first question", model="scripted", sessionName="branches")
    await api.segment(one["requestId"])
    two = await api.start("second question", model="scripted", sessionId=one["sessionId"])
    await api.segment(two["requestId"])
    sid = one["sessionId"]
    return sid, await snapshot(api, sid)


async def switch(api: ApiClient, session_id: str, entry_id: str) -> dict[str, Any]:
    reply = await api.http.post(
        "neta/api/sessions/leaf", json={"sessionId": session_id, "leafEntryId": entry_id}
    )
    assert reply.status_code == 200, reply.text
    tree: dict[str, Any] = reply.json()
    return tree


async def received(ws: ClientConnection, count: int) -> list[dict[str, Any]]:
    """The next ``count`` envelopes (heartbeats dropped); fails on a control frame."""
    out: list[dict[str, Any]] = []
    async with asyncio.timeout(30):
        while len(out) < count:
            frame = json.loads(await ws.recv())
            assert isinstance(frame, list), frame
            out += [e for e in frame if e["eventType"] != "HEARTBEAT"]
    assert len(out) == count, out
    return out


async def subscribe(ws: ClientConnection, session_id: str, last: int | None) -> None:
    message: dict[str, Any] = {"type": "subscribe_session", "sessionId": session_id}
    if last is not None:
        message["lastEventId"] = last
    await ws.send(json.dumps(message))
    assert json.loads(await ws.recv()) == {"type": "subscribed_session", "sessionId": session_id}


async def test_a_leaf_switched_over_rest_reaches_a_websocket_follower_who_resumes_exactly(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    sid, tree = await two_turns(api, runtime)
    first_answer, second_answer = (
        e["entryId"] for e in tree["entries"] if e["role"] == "assistant"
    )
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
        await subscribe(ws, sid, tree["lastSeq"])
        switched = await switch(api, sid, first_answer)
        [moved] = await received(ws, 1)
    assert moved["eventType"] == "SESSION_LEAF_CHANGED"
    assert moved["requestId"] == sid and moved["seq"] == tree["lastSeq"] + 1
    assert moved["data"] == {
        "type": "session_leaf",
        "sessionId": sid,
        "leafEntryId": first_answer,
        "previousLeafEntryId": second_answer,
    }
    assert switched["lastSeq"] == moved["seq"] and switched["leafEntryId"] == first_answer

    # Away from the socket: a switch back, and a new turn branching from the first answer.
    await switch(api, sid, second_answer)
    await switch(api, sid, first_answer)
    script(runtime, ScriptedTurn(text="branch answer"))
    branch = await api.start("branch question", model="scripted", sessionId=sid)
    await api.segment(branch["requestId"])
    missed = await stored(runtime, sid, moved["seq"])
    assert len(missed) == 2 + 4, "two switches, then the question and the answer with their moves"
    async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
        await subscribe(ws, sid, moved["seq"])
        again = await received(ws, len(missed))
        await ws.send(json.dumps({"type": "ping"}))
        assert json.loads(await ws.recv()) == {"type": "pong"}, "nothing more than was missed"
        await ws.send(json.dumps({"type": "unsubscribe_session", "sessionId": sid}))
        assert json.loads(await ws.recv()) == {"type": "unsubscribed_session", "sessionId": sid}
    assert [compact(e) for e in again] == missed
    assert [e["seq"] for e in again] == list(range(moved["seq"] + 1, moved["seq"] + 7))
    question = json.loads(missed[2])["data"]
    assert question["parentId"] == first_answer and question["role"] == "user"
    assert_agrees_with_snapshot(
        [json.loads(p) for p in await stored(runtime, sid)], await snapshot(api, sid)
    )


async def sse_events(api: ApiClient, session_id: str, last: int | None, count: int) -> list[Any]:
    params: dict[str, Any] = {"sessionId": session_id}
    if last is not None:
        params["lastEventId"] = last
    frames: list[Any] = []
    async with (
        asyncio.timeout(30),
        aconnect_sse(api.http, "GET", "neta/api/agent/session/stream", params=params) as src,
    ):
        assert src.response.status_code == 200
        async for sse in src.aiter_sse():
            if sse.event != "HEARTBEAT":
                frames.append(sse)
            if len(frames) == count:
                break
    return frames


async def test_a_session_followed_over_sse_sees_the_switch_and_resumes_exactly(
    api: ApiClient, runtime: Runtime
) -> None:
    sid, tree = await two_turns(api, runtime)
    first_answer = next(e["entryId"] for e in tree["entries"] if e["role"] == "assistant")
    params = {"sessionId": sid, "lastEventId": tree["lastSeq"]}
    async with (
        asyncio.timeout(30),
        aconnect_sse(api.http, "GET", "neta/api/agent/session/stream", params=params) as src,
    ):
        assert src.response.status_code == 200
        await switch(api, sid, first_answer)  # while the follower is connected
        live = await anext(e async for e in src.aiter_sse() if e.event != "HEARTBEAT")
    assert live.event == "SESSION_LEAF_CHANGED" and int(live.id) == tree["lastSeq"] + 1
    assert json.loads(live.data)["data"]["leafEntryId"] == first_answer
    assert live.data == (await stored(runtime, sid, tree["lastSeq"]))[0]
    # From any point, exactly what follows; from the start, the whole stream.
    everything = await stored(runtime, sid)
    for last in (None, 3, int(live.id) - 1):
        after = -1 if last is None else last
        frames = await sse_events(api, sid, last, len(everything) - after - 1)
        assert [int(f.id) for f in frames] == list(range(after + 1, len(everything)))
        assert [f.data for f in frames] == everything[after + 1 :]


async def test_compaction_publishes_the_new_branch_on_the_session_stream(
    api: ApiClient, runtime: Runtime
) -> None:
    sid, tree = await two_turns(api, runtime)
    runtime.models.register("summ", ScriptedModel([ScriptedTurn(text="two questions so far")]))
    reply = await api.http.post(
        "neta/api/sessions/compact", json={"sessionId": sid, "model": "summ"}
    )
    assert reply.status_code == 200, reply.text
    events = tree_events(await api.segment(reply.json()["requestId"]))
    assert [(e["eventType"], e["data"].get("role")) for e in events] == [
        ("SESSION_ENTRY_ADDED", "summary"),
        ("SESSION_ENTRY_ADDED", "user"),
        ("SESSION_ENTRY_ADDED", "assistant"),
        ("SESSION_LEAF_CHANGED", None),
    ]
    assert "parentId" not in events[0]["data"], "the summary is a root"
    assert events[-1]["data"]["previousLeafEntryId"] == tree["leafEntryId"]
    own = [json.loads(p) for p in await stored(runtime, sid, tree["lastSeq"])]
    assert [(e["eventType"], e["data"]) for e in own] == [
        (e["eventType"], e["data"]) for e in events
    ]
    assert_agrees_with_snapshot(
        [json.loads(p) for p in await stored(runtime, sid)], await snapshot(api, sid)
    )


async def test_bad_session_subscriptions_get_errors_and_the_socket_stays_open(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    sid, tree = await two_turns(api, runtime)
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
        cases = [
            ({"type": "subscribe_session"}, "INVALID_FIELDS"),
            ({"type": "subscribe_session", "sessionId": "s_nope"}, "SESSION_NOT_FOUND"),
            (
                {"type": "subscribe_session", "sessionId": sid, "lastEventId": "x"},
                "INVALID_LAST_EVENT_ID",
            ),
            (
                {"type": "subscribe_session", "sessionId": sid, "lastEventId": tree["lastSeq"] + 1},
                "LAST_EVENT_ID_OUT_OF_RANGE",
            ),
            ({"type": "unsubscribe_session"}, "INVALID_FIELDS"),
        ]
        for frame, code in cases:
            await ws.send(json.dumps(frame))
            reply = json.loads(await ws.recv())
            assert reply["type"] == "error" and reply["errCode"] == code, (frame, reply)
            assert reply["message"]
        await subscribe(ws, sid, tree["lastSeq"])
    for params, status, code in [
        ({"sessionId": "s_nope"}, 404, "SESSION_NOT_FOUND"),
        ({"sessionId": sid, "lastEventId": "x"}, 400, "INVALID_LAST_EVENT_ID"),
        ({"sessionId": sid, "lastEventId": tree["lastSeq"] + 1}, 416, "LAST_EVENT_ID_OUT_OF_RANGE"),
        ({}, 400, "MISSING_PARAMETER"),
    ]:
        reply = await api.http.get("neta/api/agent/session/stream", params=params)
        assert (reply.status_code, reply.json()["errCode"]) == (status, code), reply.text
