"""The widget's comm protocol: one schema for both sides, typed reading, and child runs."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from neta_jupyter.widgets.board import board_message
from neta_jupyter.widgets.comm import (
    Action,
    BadMessage,
    KernelMessage,
    ResumeAction,
    UnknownKind,
    outgoing,
    parse_view_message,
)
from neta_jupyter.widgets.outbox import FOLLOW_BACKOFF
from neta_jupyter.widgets.run_widget import RunWidget
from neta_jupyter.widgets.schema import comm_schema

JS = Path(__file__).parents[2] / "js"
SHARED = json.loads((JS / "test" / "fixtures" / "comm_messages.json").read_text())
"""Messages the TypeScript side builds and reads (js/test/comm.test.ts checks it does)."""


def test_committed_comm_schema_is_current() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "neta_jupyter.widgets", "--comm-schema"],
        capture_output=True,
        text=True,
        check=True,
    )
    committed = json.loads((JS / "schema" / "comm.schema.json").read_text())
    assert committed == json.loads(out.stdout) == comm_schema(), (
        "js/schema/comm.schema.json is stale: run "
        "`python -m neta_jupyter.widgets --comm-schema > js/schema/comm.schema.json`"
    )


@pytest.mark.parametrize("message", SHARED["view"], ids=lambda m: f"{m['kind']}")
def test_every_message_the_view_sends_is_read_as_it_was_sent(message: dict[str, Any]) -> None:
    parsed = parse_view_message(message)
    assert parsed.model_dump(by_alias=True, exclude_unset=True) == message


@pytest.mark.parametrize("message", SHARED["kernel"], ids=lambda m: f"{m['kind']}")
def test_every_message_the_view_reads_is_what_the_kernel_writes(message: dict[str, Any]) -> None:
    typed = TypeAdapter(KernelMessage).validate_python(message)
    assert outgoing(typed) == message


def test_an_action_names_its_run_and_bad_or_unknown_messages_are_told_apart() -> None:
    resume = parse_view_message(SHARED["view"][4])
    assert isinstance(resume, ResumeAction)
    assert (resume.request_id, resume.ask_id, resume.answer) == ("r_child", "cl_1", "b")
    for unknown in ({"kind": "teleport"}, {"kind": "action", "action": "pause"}, [1], None):
        with pytest.raises(UnknownKind):
            parse_view_message(unknown)
    for bad in (
        {"kind": "replay", "lastSeq": "soon"},
        {"kind": "action", "action": "resume", "askId": "a"},  # no requestId
        {"kind": "action", "action": "input", "requestId": "r", "content": ""},
        {"kind": "unsubscribe"},
    ):
        with pytest.raises(BadMessage):
            parse_view_message(bad)


# --- the widget ---------------------------------------------------------------------------


def envelope(request_id: str, seq: int, event_type: str, **data: Any) -> dict[str, Any]:
    kind = {"TEXT": "text", "MESSAGE": "message", "PERMISSION": "permission_ask"}
    return {
        "eventType": event_type,
        "seq": seq,
        "requestId": request_id,
        "data": {"type": kind[event_type.split("_")[0]], **data},
    }


CHILD = [
    envelope("r_child", 0, "TEXT_START", text="a"),
    envelope("r_child", 1, "PERMISSION_ASK", askId="ask_c", toolName="python", toolCallId="c"),
    envelope("r_child", 2, "MESSAGE_SUSPENDED", suspendReason={"type": "PERMISSION_ASK"}),
    envelope("r_child", 3, "TEXT_DELTA", text="b"),
    envelope("r_child", 4, "MESSAGE_COMPLETED", finishReason="STOP"),
]


class TreeFeed:
    """A run with one child whose log grows when its ask is answered (a seam of the widget)."""

    def __init__(self) -> None:
        self.actions: list[Action] = []
        self.child_log = CHILD[:3]
        self.follows: list[tuple[str, int]] = []

    def events_after(self, seq: int) -> list[dict[str, Any]]:
        return []

    async def follow_run(self, request_id: str, after_seq: int) -> AsyncIterator[dict[str, Any]]:
        self.follows.append((request_id, after_seq))
        if request_id != "r_child":
            raise LookupError(f"no run with requestId {request_id!r}")
        for event in self.child_log:
            if event["seq"] > after_seq:
                yield event

    async def perform(self, action: Action) -> None:
        self.actions.append(action)
        if action.request_id == "r_child":
            self.child_log = CHILD


class Recording(RunWidget):
    """Keeps what would go to the front end."""

    def __init__(self, feed: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        super().__init__(feed, request_id="r_parent")

    def send(self, content: Any, buffers: Any = None) -> None:
        self.sent.append(content)


async def until(check: Any, timeout: float = 30.0) -> None:
    """Wait for ``check()``, giving up after a generous ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "gave up waiting"
        await asyncio.sleep(0.01)


def child_events(widget: Recording) -> list[int]:
    return [
        e["seq"]
        for m in widget.sent
        if m["kind"] == "events" and m.get("requestId") == "r_child"
        for e in m["events"]
    ]


async def test_a_view_follows_a_child_and_answers_it_and_the_child_goes_on() -> None:
    feed = TreeFeed()
    widget = Recording(feed)
    widget._on_view_message(widget, {"kind": "replay", "lastSeq": 0, "requestId": "r_child"}, [])
    await until(lambda: child_events(widget) == [1, 2])
    assert all("requestId" in m for m in widget.sent), "the child's messages name it"

    approve = {"kind": "action", "action": "resume", "requestId": "r_child", "askId": "ask_c"}
    widget._on_view_message(widget, {**approve, "approved": True}, [])
    await until(lambda: child_events(widget) == [1, 2, 3, 4])
    assert feed.actions == [
        ResumeAction(
            kind="action", action="resume", request_id="r_child", ask_id="ask_c", approved=True
        )
    ]
    # Seen to its end: the child is not followed again.
    follows = len(feed.follows)
    await asyncio.sleep(FOLLOW_BACKOFF[0] * 2)
    assert len(feed.follows) == follows
    widget.close()


async def test_a_child_that_cannot_be_followed_or_is_let_go_sends_nothing_more() -> None:
    feed = TreeFeed()
    widget = Recording(feed)
    widget._on_view_message(widget, {"kind": "replay", "lastSeq": -1, "requestId": "r_gone"}, [])
    await until(lambda: bool(widget.sent))
    assert widget.sent == [
        {"kind": "error", "message": "no run with requestId 'r_gone'", "requestId": "r_gone"}
    ]

    widget.sent.clear()
    widget._on_view_message(widget, {"kind": "replay", "lastSeq": -1, "requestId": "r_child"}, [])
    await until(lambda: child_events(widget) == [0, 1, 2])
    widget._on_view_message(widget, {"kind": "unsubscribe", "requestId": "r_child"}, [])
    feed.child_log = CHILD
    await asyncio.sleep(FOLLOW_BACKOFF[0] * 2)
    assert child_events(widget) == [0, 1, 2]
    widget.close()


async def test_unknown_messages_are_ignored_with_a_warning_and_bad_ones_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    widget = Recording(TreeFeed())
    with caplog.at_level(logging.WARNING, logger="neta_jupyter.widgets.followers"):
        widget._on_view_message(widget, {"kind": "hologram", "lastSeq": 1}, [])
        widget._on_view_message(widget, "replay", [])
        assert widget.sent == []
        widget._on_view_message(widget, {"kind": "action", "action": "retry"}, [])
    refusal = "The kernel refused a message of kind 'action' with bad fields: requestId"
    assert widget.sent == [{"kind": "error", "message": refusal}]
    warnings = [r.getMessage() for r in caplog.records]
    assert any("unknown kind 'hologram'" in w for w in warnings), warnings
    assert len(warnings) == 3
    widget.close()


@pytest.mark.parametrize("message", SHARED["board"], ids=lambda m: f"{m['type']}")
def test_every_message_of_the_crew_board_is_read_as_it_was_sent(message: dict[str, Any]) -> None:
    parsed = board_message(message)
    assert parsed is not None
    assert parsed.model_dump(by_alias=True, exclude_unset=True) == message


def test_the_board_tells_its_own_messages_from_the_run_widgets_and_refuses_bad_ones() -> None:
    for theirs in SHARED["view"]:
        assert board_message(theirs) is None
    for bad in (
        {"type": "decide", "decision": "retry"},  # no escalationId
        {"type": "decide", "escalationId": "e", "decision": "maybe"},
        {"type": "control", "action": "teleport"},
    ):
        with pytest.raises(BadMessage):
            board_message(bad)
