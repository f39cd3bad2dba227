"""The widget's comm protocol in a real kernel (embedded mode): the test plays the front end."""

from __future__ import annotations

import itertools
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.widgets.run_widget import BATCH_INTERVAL
from tests.kernel.test_embedded import KernelSession, kernel

pytestmark = pytest.mark.timeout(90)

LAST = "from neta_jupyter.kernel import current_context as _cc\n_last = _cc().last\n"


def custom(message: dict[str, Any]) -> dict[str, Any] | None:
    """The custom content of a comm message from the widget, if it is one."""
    if message["msg_type"] != "comm_msg":
        return None
    data = message["content"]["data"]
    content: dict[str, Any] | None = data.get("content") if data.get("method") == "custom" else None
    return content


def to_widget(k: KernelSession, comm_id: str, content: dict[str, Any]) -> None:
    """What the JavaScript's ``model.send(content)`` does."""
    msg = k.kc.session.msg(
        "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": content}}
    )
    k.kc.shell_channel.send(msg)


def event_messages(k: KernelSession, comm_id: str, after: int = 0) -> list[dict[str, Any]]:
    return [
        m
        for m in k.messages[after:]
        if m["msg_type"] == "comm_msg"
        and m["content"]["comm_id"] == comm_id
        and (custom(m) or {}).get("kind") == "events"
    ]


async def test_replay_actions_and_batched_live_events_over_the_comm(tmp_path: Path) -> None:
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0.002"}) as k:
        await k.run("%load_ext neta_jupyter")
        own = await k.run("%neta what is 17*23?")
        opened = next(
            m
            for m in own
            if m["msg_type"] == "comm_open"
            and m["content"]["data"]["state"].get("prompt") == "what is 17*23?"
        )
        comm_id = opened["content"]["comm_id"]
        assert opened["content"]["data"]["state"]["mode"] == "embedded"
        state = await k.json(
            LAST + "await _last.wait(30)\n"
            "print(__import__('json').dumps([_last.status, _last.pending_ask['askId']]))",
            timeout=40,
        )
        assert state[0] == "suspended"
        assert event_messages(k, comm_id) == [], "no view asked yet"

        mark = len(k.messages)
        to_widget(k, comm_id, {"kind": "replay", "lastSeq": -1})
        first = await k.wait_for(lambda m: bool(event_messages(k, comm_id, mark)))
        replayed = custom(first)["events"]  # type: ignore[index]
        assert [e["seq"] for e in replayed] == list(range(len(replayed)))
        assert replayed[-1]["eventType"] == "MESSAGE_SUSPENDED"
        rid = replayed[0]["requestId"]

        mark = len(k.messages)
        to_widget(
            k,
            comm_id,
            {
                "kind": "action",
                "action": "resume",
                "requestId": rid,
                "askId": state[1],
                "approved": True,
                "always": False,
            },
        )
        await k.wait_for(
            lambda m: any(
                e["eventType"] == "MESSAGE_COMPLETED"
                for msg in event_messages(k, comm_id, mark)
                for e in custom(msg)["events"]  # type: ignore[index]
            )
        )
        live = event_messages(k, comm_id, mark)
        events = [e for msg in live for e in custom(msg)["events"]]  # type: ignore[index]
        assert [e["seq"] for e in events] == list(
            range(replayed[-1]["seq"] + 1, events[-1]["seq"] + 1)
        ), "no loss, no repeats"
        assert len(live) < len(events), "events were batched"
        sent = [datetime.fromisoformat(str(m["header"]["date"])) for m in live]
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(sent)]
        assert all(gap >= BATCH_INTERVAL * 0.8 for gap in gaps), gaps
        done = next(e for e in events if e["eventType"] == "TOOL_COMPLETED")
        assert done["data"]["output"].strip() == "391"

        # A view that reconnects gets only what it has not seen.
        mark = len(k.messages)
        to_widget(k, comm_id, {"kind": "replay", "lastSeq": events[-3]["seq"]})
        again = await k.wait_for(lambda m: bool(event_messages(k, comm_id, mark)))
        assert (
            [e["seq"] for e in custom(again)["events"]]
            == [  # type: ignore[index]
                e["seq"] for e in events[-2:]
            ]
        )

        # An action the run refuses comes back as an error message.
        mark = len(k.messages)
        to_widget(k, comm_id, {"kind": "action", "action": "retry", "requestId": rid})
        refused = await k.wait_for(
            lambda m: (
                m["msg_type"] == "comm_msg"
                and (custom(m) or {}).get("kind") == "error"
                and k.messages.index(m) >= mark
            )
        )
        assert "cannot be retried" in custom(refused)["message"]  # type: ignore[index]

        # The snapshot trait (what a saved notebook keeps) reached the front end.
        updates = [
            m["content"]["data"]["state"]["snapshot"]
            for m in k.messages
            if m["msg_type"] == "comm_msg"
            and m["content"]["comm_id"] == comm_id
            and m["content"]["data"].get("method") == "update"
            and "snapshot" in m["content"]["data"]["state"]
        ]
        assert updates[-1]["status"] == "completed" and updates[-1]["requestId"] == rid
        assert "391" in updates[-1]["finalText"]


async def test_a_view_follows_another_run_through_the_widget_and_approves_it(
    tmp_path: Path,
) -> None:
    """A child run is a run: a view opens it through its widget's comm and answers it there."""
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0.002"}) as k:
        await k.run("%load_ext neta_jupyter")
        own = await k.run("%neta hello")
        opened = next(
            m
            for m in own
            if m["msg_type"] == "comm_open"
            and m["content"]["data"]["state"].get("prompt") == "hello"
        )
        comm_id = opened["content"]["comm_id"]
        await k.run(LAST + "await _last.wait(30)", timeout=40)
        await k.run("%neta what is 17*23?")
        other = await k.json(
            LAST + "await _last.wait(30)\n"
            "print(__import__('json').dumps([_last.request_id, _last.pending_ask['askId']]))",
            timeout=40,
        )
        rid, ask_id = other

        def about_other(after: int) -> list[dict[str, Any]]:
            return [
                e
                for m in event_messages(k, comm_id, after)
                if custom(m).get("requestId") == rid  # type: ignore[union-attr]
                for e in custom(m)["events"]  # type: ignore[index]
            ]

        mark = len(k.messages)
        to_widget(k, comm_id, {"kind": "replay", "lastSeq": -1, "requestId": rid})
        await k.wait_for(
            lambda m: any(e["eventType"] == "MESSAGE_SUSPENDED" for e in about_other(mark))
        )
        replayed = about_other(mark)
        assert [e["seq"] for e in replayed] == list(range(len(replayed)))
        assert {e["requestId"] for e in replayed} == {rid}

        to_widget(
            k,
            comm_id,
            {
                "kind": "action",
                "action": "resume",
                "requestId": rid,
                "askId": ask_id,
                "approved": True,
            },
        )
        await k.wait_for(
            lambda m: any(e["eventType"] == "MESSAGE_COMPLETED" for e in about_other(mark))
        )
        events = about_other(mark)
        assert [e["seq"] for e in events] == list(range(len(events))), "no loss, no repeats"
        done = next(e for e in events if e["eventType"] == "TOOL_COMPLETED")
        assert done["data"]["output"].strip() == "391"
        status = await k.json(
            LAST + f"print(__import__('json').dumps(_last.host.status({rid!r})['status']))"
        )
        assert status == "completed"


async def test_a_view_follows_a_sub_agent_of_an_embedded_run_through_the_comm(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("first note\nsecond note\n")
    (tmp_path / "data.csv").write_text("a,b\n1,2\n3,4\n")
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0.002"}) as k:
        await k.run("%load_ext neta_jupyter")
        own = await k.run("%neta compare notes.txt and data.csv")
        opened = next(
            m
            for m in own
            if m["msg_type"] == "comm_open"
            and m["content"]["data"]["state"].get("prompt") == "compare notes.txt and data.csv"
        )
        comm_id = opened["content"]["comm_id"]
        children = await k.json(
            LAST + "await _last.wait(60)\n"
            "print(__import__('json').dumps([c['requestId'] for e in _last.events"
            " if e['eventType'] == 'SUBAGENT_RUN_STARTED' for c in e['data']['children']]))",
            timeout=70,
        )
        assert len(children) == 2
        child = children[1]

        mark = len(k.messages)
        to_widget(k, comm_id, {"kind": "replay", "lastSeq": -1, "requestId": child})
        await k.wait_for(
            lambda m: any(
                e["eventType"] == "MESSAGE_COMPLETED"
                for msg in event_messages(k, comm_id, mark)
                if custom(msg).get("requestId") == child  # type: ignore[union-attr]
                for e in custom(msg)["events"]  # type: ignore[index]
            )
        )
        events = [
            e
            for msg in event_messages(k, comm_id, mark)
            for e in custom(msg)["events"]  # type: ignore[index]
        ]
        assert {e["requestId"] for e in events} == {child}, "only the child's events were sent"
        assert [e["seq"] for e in events] == list(range(len(events)))
        read = next(e for e in events if e["eventType"] == "TOOL_COMPLETED")
        assert "data.csv" in read["data"]["output"]
