"""The runs a widget follows for its views and the actions they take (run widget, crew board)."""

from __future__ import annotations

import asyncio
from typing import Any

from neta_jupyter.widgets.board import BoardMessage, ControlMessage
from neta_jupyter.widgets.comm import KernelMessage, ResumeAction, outgoing
from neta_jupyter.widgets.crew_board import CrewBoard
from neta_jupyter.widgets.followers import FollowedRuns
from tests.widgets.test_protocol import TreeFeed, until

APPROVE = ResumeAction(
    kind="action", action="resume", request_id="r_child", ask_id="ask_c", approved=True
)


class Refusing(TreeFeed):
    """A feed whose runs refuse every action."""

    async def perform(self, action: Any) -> None:
        raise PermissionError(f"run {action.request_id} is not yours")


def recorder() -> tuple[list[dict[str, Any]], Any]:
    sent: list[dict[str, Any]] = []

    def send(message: KernelMessage) -> None:
        sent.append(outgoing(message))

    return sent, send


def seqs(sent: list[dict[str, Any]], request_id: str = "r_child") -> list[int]:
    return [
        e["seq"]
        for m in sent
        if m["kind"] == "events" and m.get("requestId") == request_id
        for e in m["events"]
    ]


async def test_an_action_on_a_followed_run_goes_to_the_feed_and_what_follows_reaches_the_views() -> (
    None
):
    feed = TreeFeed()
    sent, send = recorder()
    runs = FollowedRuns(feed, send)
    runs.follow("r_child", -1)
    await until(lambda: seqs(sent) == [0, 1, 2])
    runs.act(APPROVE)
    await until(lambda: seqs(sent) == [0, 1, 2, 3, 4])
    assert feed.actions == [APPROVE]
    runs.close()


async def test_a_refusal_names_the_run_it_is_about_but_not_the_widgets_own() -> None:
    sent, send = recorder()
    runs = FollowedRuns(Refusing(), send, own=lambda: "r_parent")
    runs.act(APPROVE)
    runs.act(APPROVE.model_copy(update={"request_id": "r_parent"}))
    await until(lambda: len(sent) == 2)
    assert sent == [
        {"kind": "error", "message": "run r_child is not yours", "requestId": "r_child"},
        {"kind": "error", "message": "run r_parent is not yours"},
    ]


def test_without_a_feed_or_a_running_loop_a_view_is_told_why() -> None:
    sent, send = recorder()
    nothing = FollowedRuns(None, send)
    nothing.follow("r_child", -1)
    nothing.act(APPROVE)
    outside = FollowedRuns(TreeFeed(), send)  # no event loop runs in this test
    outside.follow("r_child", -1)
    outside.act(APPROVE)
    assert [m["message"] for m in sent] == [
        "This run cannot be followed from here",
        "This run cannot be controlled from here",
        "The kernel has no running event loop",
        "The kernel has no running event loop",
    ]
    assert all(m["requestId"] == "r_child" for m in sent)


class Board(CrewBoard):
    """Keeps what would go to the front end."""

    def __init__(self, feed: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        self.decisions: list[BoardMessage] = []
        super().__init__(self.decisions.append, feed)

    def send(self, content: Any, buffers: Any = None) -> None:
        self.sent.append(content)


async def test_the_crew_board_follows_a_task_run_and_answers_its_ask_as_the_run_widget_does() -> (
    None
):
    feed = TreeFeed()
    board = Board(feed)
    board._on_view_message(board, {"kind": "replay", "lastSeq": -1, "requestId": "r_child"}, [])
    await until(lambda: seqs(board.sent) == [0, 1, 2])
    approve = {"kind": "action", "action": "resume", "requestId": "r_child", "askId": "ask_c"}
    board._on_view_message(board, {**approve, "approved": True}, [])
    await until(lambda: seqs(board.sent) == [0, 1, 2, 3, 4])
    assert feed.actions == [APPROVE]
    board._on_view_message(board, {"type": "control", "action": "pause"}, [])
    assert board.decisions == [ControlMessage(type="control", action="pause")]
    board.close()
    await asyncio.sleep(0)
