"""The run digest, the markdown transcript and the widget class, without a kernel."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.widgets import run_widget
from neta_jupyter.widgets.comm import Action, RetryAction
from neta_jupyter.widgets.run_widget import BATCH_INTERVAL, RunWidget
from neta_jupyter.widgets.transcript import digest, transcript_markdown


def envelope(seq: int, event_type: str, **data: Any) -> dict[str, Any]:
    kind = {
        "SESSION": "session",
        "TEXT": "text",
        "TOOL": "tool",
        "MESSAGE": "message",
        "PERMISSION": "permission_ask",
    }[event_type.split("_")[0]]
    return {"eventType": event_type, "seq": seq, "requestId": "r_1", "data": {"type": kind, **data}}


STOP = "USER_CANCELLED"
"""The error code of a run someone stopped."""

RUN = [
    envelope(0, "SESSION_CREATED", sessionId="s_1"),
    envelope(1, "TOOL_START", toolCallId="c1", toolName="list_variables", arguments="{}"),
    envelope(2, "TOOL_COMPLETED", toolCallId="c1", toolName="list_variables", output="df: x"),
    envelope(
        3,
        "TOOL_START",
        toolCallId="c2",
        toolName="python",
        arguments=json.dumps({"code": "import matplotlib\nplot(`df`)\n" + "x" * 80}),
    ),
    envelope(4, "TOOL_COMPLETED", toolCallId="c2", toolName="python", images=["a.png", "b.png"]),
    envelope(5, "TOOL_START", toolCallId="c3", toolName="python", arguments='{"code": "1/0"}'),
    envelope(
        6,
        "TOOL_FAILED",
        toolCallId="c3",
        toolName="python",
        errorMessage="Traceback …\nZeroDivisionError: division by zero",
    ),
    envelope(7, "TEXT_START", text=""),
    envelope(8, "TEXT_DELTA", text="The mean "),
    envelope(9, "TEXT_DELTA", text="is **3**."),
    envelope(10, "TEXT_END"),
    envelope(
        11,
        "MESSAGE_COMPLETED",
        finishReason="STOP",
        usage={"totalTokens": 1234, "promptTokens": 1000, "completionTokens": 234},
    ),
]


def test_digest_folds_status_text_tools_and_usage() -> None:
    run = digest(RUN)
    assert run.status == "completed" and run.final and run.at_rest
    assert run.text == "The mean is **3**."
    assert [(t.name, t.state, t.images) for t in run.tools.values()] == [
        ("list_variables", "completed", 0),
        ("python", "completed", 2),
        ("python", "failed", 0),
    ]
    assert run.usage["totalTokens"] == 1234
    assert run.snapshot() == {
        "requestId": "r_1",
        "status": "completed",
        "finalText": "The mean is **3**.",
        "lastSeq": 11,
    }


def test_digest_drops_repeats_and_tracks_suspension_and_failure() -> None:
    run = digest(RUN[:3])
    assert not run.apply(RUN[1]), "a seq already seen is a repeat"
    assert run.last_seq == 2 and run.status == "running"
    run.apply(envelope(3, "PERMISSION_ASK", askId="a1", toolName="python"))
    run.apply(
        envelope(4, "MESSAGE_SUSPENDED", suspendReason={"type": "PERMISSION_ASK", "message": "ok?"})
    )
    assert run.status == "suspended" and run.pending_ask == {
        "type": "permission_ask",
        "askId": "a1",
        "toolName": "python",
    }
    assert run.at_rest and not run.final
    assert run.snapshot()["suspendReason"] == "PERMISSION_ASK", "a reload says why the run waits"
    run.apply(envelope(5, "MESSAGE_FAILED", errorMessage="boom", recoverable=True))
    assert run.status == "failed" and not run.final, "a recoverable failure may go on"
    assert run.snapshot()["errorMessage"] == "boom"


def test_transcript_reads_well_as_static_markdown() -> None:
    text = transcript_markdown("what is the mean\nof df?", RUN)
    assert text.startswith("**neta** · prompt:\n\n> what is the mean\n> of df?\n")
    lines = text.splitlines()
    assert "- `list_variables` ✓" in lines
    python_line = next(line for line in lines if "(2 images)" in line)
    assert python_line.startswith("- `python` `code=import matplotlib plot('df') xxx")
    assert "`" not in python_line[len("- `python` `") : python_line.rindex("`")]
    assert "- `python` `code=1/0` ✗ — ZeroDivisionError: division by zero" in lines
    assert "The mean is **3**." in lines
    assert lines[-1] == "*completed · 1,234 tokens · r_1*"


@pytest.mark.parametrize(
    ("tail", "ending"),
    [
        ([], "*running… · r_1*"),
        (
            [envelope(3, "MESSAGE_SUSPENDED", suspendReason={"message": "python needs approval"})],
            "*waiting: python needs approval · r_1*",
        ),
        (
            [envelope(3, "MESSAGE_FAILED", errorMessage="model call failed", recoverable=True)],
            "*failed: model call failed (can be retried) · r_1*",
        ),
        (
            [envelope(3, "MESSAGE_FAILED", errorMessage="the run was cancelled", errorCode=STOP)],
            "*stopped · r_1*",
        ),
        (
            [envelope(3, "MESSAGE_FAILED", errorMessage="superseded by a prompt", errorCode=STOP)],
            "*stopped: superseded by a prompt · r_1*",
        ),
    ],
)
def test_transcript_ending(tail: list[dict[str, Any]], ending: str) -> None:
    assert transcript_markdown("hi", RUN[:3] + tail).splitlines()[-1] == ending


def test_a_call_the_run_ended_before_reads_stopped_not_running() -> None:
    start = envelope(0, "TOOL_START", toolCallId="c1", toolName="python", arguments="{}")
    ended = envelope(1, "MESSAGE_FAILED", errorMessage="the run was cancelled", errorCode=STOP)
    lines = transcript_markdown("hi", [start, ended]).splitlines()
    assert "- `python` stopped" in lines
    assert not any("\u2026" in line for line in lines)


def test_widget_falls_back_to_an_inline_module_without_the_built_javascript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_widget, "_STATIC", tmp_path)
    module = run_widget._esm()
    assert isinstance(module, str) and "export default { render }" in module
    (tmp_path / "widget.js").write_text("export default {}")
    assert run_widget._esm() == tmp_path / "widget.js"


class RecordingWidget(RunWidget):
    """Keeps what would go to the front end."""

    def __init__(self, feed: Any, request_id: str = "r_1") -> None:
        self.sent: list[tuple[float, dict[str, Any]]] = []
        super().__init__(feed, request_id=request_id)

    def send(self, content: Any, buffers: Any = None) -> None:
        self.sent.append((asyncio.get_event_loop().time(), content))


class Feed:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.actions: list[Action] = []

    def events_after(self, seq: int) -> list[dict[str, Any]]:
        return [e for e in self.events if e["seq"] > seq]

    async def follow_run(self, request_id: str, after_seq: int) -> AsyncIterator[dict[str, Any]]:
        for event in self.events_after(after_seq):
            yield event

    async def perform(self, action: Action) -> None:
        self.actions.append(action)
        if isinstance(action, RetryAction):
            raise RuntimeError("the run cannot be retried")


async def test_widget_replays_then_batches_live_events() -> None:
    feed = Feed()
    widget = RecordingWidget(feed)
    feed.events = RUN[:4]
    widget.push(RUN[:4])
    assert widget.sent == [], "nothing is sent before a view asks"
    widget._on_view_message(widget, {"kind": "replay", "lastSeq": 1}, [])
    assert [e["seq"] for e in widget.sent[0][1]["events"]] == [2, 3]
    for pair in (RUN[i : i + 2] for i in range(4, len(RUN), 2)):
        # Two events arriving in one turn of the loop always share a batch, however loaded the
        # machine is; the rate limit may merge more.
        for event in pair:
            feed.events.append(event)
            widget.push([event])
        await asyncio.sleep(0.01)
    await asyncio.sleep(BATCH_INTERVAL * 3)
    batches = [content["events"] for _, content in widget.sent[1:]]
    assert [e["seq"] for batch in batches for e in batch] == list(range(4, 12))
    assert len(batches) < len(RUN[4:]), "events were batched"
    times = [when for when, _ in widget.sent]
    assert all(b - a >= BATCH_INTERVAL * 0.9 for a, b in itertools.pairwise(times))

    widget._on_view_message(widget, {"kind": "action", "action": "retry", "requestId": "r_1"}, [])
    await asyncio.sleep(0.01)
    assert feed.actions == [RetryAction(kind="action", action="retry", request_id="r_1")]
    assert widget.sent[-1][1] == {"kind": "error", "message": "the run cannot be retried"}
    widget.close()
