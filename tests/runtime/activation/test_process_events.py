"""Process events (seed 000): sanitising, per-operation throttling, the JSONL log, and the
whole path through a real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.events import EventData, EventType, ProcessData
from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.runtime.activation import process
from neta_jupyter.runtime.activation.process import (
    REDACTED,
    ProcessEventBuffer,
    ProcessLog,
    ProcessReporter,
    is_secret_key,
    sanitize_payload,
)
from neta_jupyter.tools import ToolContext, tool
from tests.helpers import ApiClient, types

PLANTED = "sk-PLANTED-0123456789"


def wire(data: ProcessData) -> dict[str, Any]:
    return data.model_dump(mode="json", by_alias=True, exclude_none=True)


def update(i: int, op: str = "op1", status: Any = "running", stage: str = "work") -> ProcessData:
    return ProcessData(operation_id=op, status=status, stage=stage, current=i, total=50)


class ListEmitter:
    """Collects what a reporter publishes."""

    def __init__(self) -> None:
        self.events: list[tuple[EventType, EventData]] = []

    def emit(self, event_type: EventType, data: EventData) -> int:
        self.events.append((event_type, data))
        return len(self.events) - 1

    def process(self) -> list[ProcessData]:
        return [d for t, d in self.events if isinstance(d, ProcessData)]


# --- sanitising ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "API-KEY",
        "x-api-key",
        "Api Key",
        "Authorization",
        "proxy-authorization",
        "client_secret",
        "clientSecret",
        "password",
        "DB_PASSWORD",
        "accessToken",
        "refresh_token",
        "X-Auth-Token",
        "credentials",
        "aws.credential.file",
    ],
)
def test_secret_keys_are_recognised_in_any_spelling(key: str) -> None:
    assert is_secret_key(key)
    assert sanitize_payload({key: PLANTED}) == {key: REDACTED}


@pytest.mark.parametrize("key", ["path", "rows", "api", "key", "keys", "stage", "author"])
def test_ordinary_keys_are_kept(key: str) -> None:
    assert not is_secret_key(key)
    assert sanitize_payload({key: "value"}) == {key: "value"}


def test_secrets_nested_in_lists_and_dicts_are_redacted() -> None:
    payload = {
        "request": {"headers": [{"Authorization": f"Bearer {PLANTED}"}, {"accept": "json"}]},
        "attempts": [[{"config": {"apiKey": PLANTED, "model": "m"}}]],
        "token": {"nested": "whole value goes"},
        "rows": 3,
    }
    clean = sanitize_payload(payload)
    assert PLANTED not in json.dumps(clean)
    assert clean["request"]["headers"][1] == {"accept": "json"}
    assert clean["attempts"][0][0]["config"] == {"apiKey": REDACTED, "model": "m"}
    assert clean["token"] == REDACTED
    assert clean["rows"] == 3
    assert payload["attempts"][0][0]["config"]["apiKey"] == PLANTED  # the input is not changed


def test_long_values_are_cut_so_an_event_stays_small() -> None:
    huge = {"text": "x" * 100_000, "items": list(range(10_000)), "deep": {"a": {"b": {"c": {}}}}}
    clean = sanitize_payload(huge)
    assert len(json.dumps(clean)) < 8_000
    assert clean["text"].startswith("xxx") and "more characters" in clean["text"]
    assert clean["items"][-1] == "[9950 more items]"
    assert sanitize_payload({"value": object()})["value"].startswith("<object object")


# --- the buffer ----------------------------------------------------------------------------


async def test_fifty_updates_inside_the_interval_become_two_and_the_terminal() -> None:
    emitted: list[ProcessData] = []
    buffer = ProcessEventBuffer(emitted.append, interval=0.4)
    for i in range(1, 51):
        buffer.push(update(i))
    assert [e.current for e in emitted] == [1]  # the first goes out at once
    buffer.push(update(50, status="completed"))
    assert [(e.current, e.status) for e in emitted] == [
        (1, "running"),
        (50, "running"),  # the pending latest, flushed before the terminal
        (50, "completed"),
    ]


async def test_pending_update_goes_out_when_the_interval_elapses() -> None:
    emitted: list[ProcessData] = []
    buffer = ProcessEventBuffer(emitted.append, interval=0.1)
    for i in range(1, 11):
        buffer.push(update(i))
    assert len(emitted) == 1
    await asyncio.sleep(0.25)
    assert [e.current for e in emitted] == [1, 10]
    buffer.push(update(11, status="completed"))
    assert [e.current for e in emitted] == [1, 10, 11]
    await asyncio.sleep(0.15)
    assert len(emitted) == 3  # nothing left behind after the terminal


class FakeTime:
    """The buffer's clock and timers, advanced by the test (so a loaded machine changes nothing)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Any]] = []

    def schedule(self, delay: float, callback: Any) -> Any:
        entry = (self.now + delay, callback)
        self.timers.append(entry)
        handle = type("Handle", (), {"cancel": lambda _self: self.timers.remove(entry)})
        return handle()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for entry in sorted(self.timers, key=lambda t: t[0]):
            if entry[0] <= self.now and entry in self.timers:
                self.timers.remove(entry)
                entry[1]()


def test_updates_spread_over_time_are_throttled_not_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTime()
    monkeypatch.setattr(process, "_clock", lambda: fake.now)
    monkeypatch.setattr(process, "_schedule", fake.schedule)
    emitted: list[ProcessData] = []
    buffer = ProcessEventBuffer(emitted.append, interval=0.05)
    for i in range(1, 21):
        buffer.push(update(i))
        fake.advance(0.01)
    buffer.push(update(21, status="completed"))
    currents = [e.current for e in emitted]
    assert currents == sorted(currents), "order preserved"
    assert currents[0] == 1 and currents[-2:] == [20, 21]
    assert 3 <= len(emitted) <= 12


async def test_operations_are_throttled_separately_and_stages_are_kept() -> None:
    emitted: list[ProcessData] = []
    buffer = ProcessEventBuffer(emitted.append, interval=0.4)
    buffer.push(update(1, op="a"))
    buffer.push(update(1, op="b"))
    buffer.push(update(2, op="a", stage="load"))
    buffer.push(update(3, op="a", stage="load"))
    buffer.push(update(4, op="a", stage="fit"))  # a new stage lets "load" out first
    buffer.push(update(2, op="b", status="failed"))
    buffer.push(update(5, op="a", status="completed", stage="fit"))
    assert [(e.operation_id, e.current, e.stage, e.status) for e in emitted] == [
        ("a", 1, "work", "running"),
        ("b", 1, "work", "running"),
        ("a", 3, "load", "running"),
        ("b", 2, "work", "failed"),
        ("a", 4, "fit", "running"),
        ("a", 5, "fit", "completed"),
    ]


# --- the reporter and the JSONL log --------------------------------------------------------


async def test_jsonl_holds_exactly_the_emitted_events(tmp_path: Path) -> None:
    emitter = ListEmitter()
    log = ProcessLog(tmp_path)
    reporter = ProcessReporter(emitter, log, session_id="s1", tool_call_id="call_1")
    for i in range(1, 51):
        reporter.report(stage="work", current=i, total=50, payload={"api_key": PLANTED, "i": i})
    reporter.report(stage="child", operation_id="sub", message="a sub-operation")
    references = reporter.close("completed")
    emitted = emitter.process()
    assert [e.status for e in emitted if e.operation_id == "op_call_1"] == [
        "running",
        "running",
        "completed",
    ]
    assert references == [
        "neta-process-events/s1/op_call_1.jsonl",
        "neta-process-events/s1/sub.jsonl",
    ]
    for ref in references:
        op = Path(ref).stem
        assert log.read(ref) == [wire(e) for e in emitted if e.operation_id == op]
    text = "".join((tmp_path / ref).read_text() for ref in references)
    assert PLANTED not in text and PLANTED not in json.dumps([wire(e) for e in emitted])
    sub = [e for e in emitted if e.operation_id == "sub"]
    assert sub[0].parent_operation_id == "op_call_1" and sub[-1].status == "completed"
    # The sub-operation ends before its parent.
    ends = [e.operation_id for e in emitted if e.status == "completed"]
    assert ends == ["sub", "op_call_1"]


async def test_reporter_ignores_reports_after_the_call_ends(tmp_path: Path) -> None:
    emitter = ListEmitter()
    reporter = ProcessReporter(emitter, ProcessLog(tmp_path), session_id="s", tool_call_id="c")
    reporter.report(stage="one")
    reporter.close("failed")
    reporter.report(stage="late")
    assert [(e.stage, e.status, e.level) for e in emitter.process()] == [
        ("one", "running", "info"),
        ("one", "failed", "error"),
    ]


# --- through the server ---------------------------------------------------------------------


@tool(readonly=True)
async def busy_tool(ctx: ToolContext, steps: int = 50) -> str:
    """Reports many progress updates quickly, with a secret in the payload."""
    for i in range(1, steps + 1):
        ctx.process.report(
            stage="crunch",
            current=i,
            total=steps,
            percent=100 * i / steps,
            message=f"step {i}",
            payload={"api_key": PLANTED, "headers": {"Authorization": PLANTED}, "step": i},
        )
    ctx.process.report(status="completed", stage="crunch", percent=100, message="done")
    return "crunched"


async def test_progress_reaches_the_stream_throttled_sanitised_and_logged(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.tools.register(busy_tool)
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("busy_tool", {})]), ScriptedTurn(text="ok")]
    )
    runtime.models.register("scripted", model)
    rid = (await api.start("crunch", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    assert PLANTED not in json.dumps(events)

    process = [e["data"] for e in events if e["eventType"] == "PROCESS_EVENT"]
    assert 2 <= len(process) <= 3
    assert process[0]["current"] == 1
    assert process[-1]["status"] == "completed" and process[-1]["message"] == "done"
    assert all(p["toolCallId"] == process[0]["toolCallId"] for p in process)
    assert process[0]["payload"]["api_key"] == "[redacted]"
    assert process[0]["payload"]["headers"]["Authorization"] == "[redacted]"

    completed = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    ref = completed["output"].split("[process log: ")[1].rstrip("]")
    assert completed["output"].startswith("crunched")
    log_file = runtime.config.data_dir / ref
    assert PLANTED not in log_file.read_text()
    assert ProcessLog(runtime.config.data_dir).read(ref) == process
    # Process events precede the tool's end.
    names = types(events)
    assert max(i for i, n in enumerate(names) if n == "PROCESS_EVENT") < names.index(
        "TOOL_COMPLETED"
    )
    model.assert_complete()


@tool(readonly=True)
async def failing_tool(ctx: ToolContext) -> str:
    """Reports progress, then breaks without a terminal status."""
    ctx.process.report(stage="start", message="starting")
    raise RuntimeError("boom")


async def test_a_failing_tool_ends_its_operation_as_failed(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.tools.register(failing_tool)
    runtime.models.register(
        "scripted",
        ScriptedModel(
            [
                ScriptedTurn(tool_calls=[ScriptedToolCall("failing_tool", {})]),
                ScriptedTurn(text="sorry"),
            ]
        ),
    )
    rid = (await api.start("fail", model="scripted"))["requestId"]
    events = await api.segment(rid)
    process = [e["data"] for e in events if e["eventType"] == "PROCESS_EVENT"]
    assert [(p["status"], p["level"]) for p in process] == [
        ("running", "info"),
        ("failed", "error"),
    ]
    failed = next(e["data"] for e in events if e["eventType"] == "TOOL_FAILED")
    assert "RuntimeError: boom" in failed["errorMessage"]
    assert "[process log: neta-process-events/" in failed["errorMessage"]
