"""The protocol: envelope, SSE framing, tolerant decoding, the schema export."""

from __future__ import annotations

import json
import subprocess
import sys

from neta_jupyter.events import (
    AgentEvent,
    EventType,
    HeartbeatData,
    ReasoningData,
    TextData,
    ToolData,
    decode_event,
    encode_json,
    sse_error_frame,
    sse_frame,
    ws_batch,
)
from neta_jupyter.events.encoding import numbered, text_rests
from neta_jupyter.events.models import DATA_TYPES


def test_envelope_is_camel_case_and_omits_nulls() -> None:
    event = AgentEvent(
        event_type=EventType.TOOL_START,
        seq=5,
        request_id="r_1",
        step=1,
        total_tokens=856,
        data=ToolData(tool_call_id="call_1", tool_name="read_file", arguments='{"path":"a"}'),
    )
    wire = json.loads(encode_json(event))
    assert wire["eventType"] == "TOOL_START" and wire["requestId"] == "r_1"
    assert wire["data"] == {
        "type": "tool",
        "toolCallId": "call_1",
        "toolName": "read_file",
        "arguments": '{"path":"a"}',
    }
    assert wire["seq"] == 5 and wire["step"] == 1 and wire["totalTokens"] == 856
    assert wire["timestamp"].endswith("Z")
    assert decode_event(encode_json(event)) == event


def test_sse_frames() -> None:
    payload = encode_json(
        AgentEvent(
            event_type=EventType.TEXT_DELTA,
            seq=12,
            request_id="r",
            data=TextData(text="line one\nline two"),
        )
    )
    frame = sse_frame("TEXT_DELTA", payload, 12)
    assert frame.startswith("id: 12\nevent: TEXT_DELTA\ndata: {")
    assert frame.endswith("}\n\n") and frame.count("\n") == 4, (
        "a newline in the text must not split data"
    )
    heartbeat = encode_json(
        AgentEvent(event_type=EventType.HEARTBEAT, request_id="r", data=HeartbeatData())
    )
    frame = sse_frame("HEARTBEAT", heartbeat, None)
    assert not frame.startswith("id:") and "\nid:" not in frame
    error = sse_error_frame("no run with requestId 'x'\nsecond line")
    assert error == ": no run with requestId 'x' second line\nevent: error\ndata: \n\n"
    assert ws_batch(['{"a":1}', '{"b":2}']) == '[{"a":1},{"b":2}]'


def test_decoder_ignores_unknown_types_and_fields() -> None:
    base = {
        "eventType": "TEXT_DELTA",
        "seq": 1,
        "requestId": "r",
        "data": {"type": "text", "text": "hi"},
        "timestamp": "2026-01-01T00:00:00Z",
    }
    assert decode_event({**base, "eventType": "FUTURE_EVENT"}) is None
    assert decode_event({**base, "data": {"type": "hologram", "text": "x"}}) is None
    event = decode_event(
        {**base, "newTopLevel": 1, "data": {"type": "text", "text": "hi", "colour": "red"}}
    )
    assert event is not None and event.data == TextData(text="hi")
    assert decode_event("[1, 2]") is None
    assert decode_event({**base, "data": {"type": "text", "text": 5}}) is None


def test_every_event_type_and_data_type_is_in_the_schema() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "neta_jupyter.events", "--schema"],
        capture_output=True,
        text=True,
        check=True,
    )
    schema = json.loads(out.stdout)
    assert set(
        schema["properties"]["eventType"]["enum"]
        if "enum" in schema["properties"]["eventType"]
        else schema["$defs"]["EventType"]["enum"]
    ) == {e.value for e in EventType}
    mapping = schema["properties"]["data"]["discriminator"]["mapping"]
    assert set(mapping) == DATA_TYPES
    assert len(EventType) >= 19 + 1 + 9 + 9


def test_generated_files_are_current() -> None:
    """The enum and union, the schema and the widget's catalogue match the declarations."""
    out = subprocess.run(
        [sys.executable, "-m", "neta_jupyter.events", "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + "\nrun `python -m neta_jupyter.events --write`"


_NEW_BODY = """
from typing import ClassVar, Literal
from neta_jupyter.events.generate import stale
from neta_jupyter.events.wire import EventBody

class ChartData(EventBody):
    type: Literal["chart"] = "chart"
    event_types: ClassVar = {"CHART_DRAWN": "A chart was drawn."}

print(sorted(p.name for p in stale()))
"""


def test_a_new_body_makes_the_generated_files_stale() -> None:
    """One declared body is all it takes: the check then names the files to write again."""
    out = subprocess.run(
        [sys.executable, "-c", _NEW_BODY], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "['catalogue.ts', 'generated.py']"


def test_the_catalogue_is_what_the_bodies_declare() -> None:
    """Every declared event type is in the enum, with the body that declared it, once."""
    from neta_jupyter.events.generate import catalogue, data_type, render_python

    types = catalogue()
    assert list(types) == [t.value for t in EventType]
    assert types["TOOL_FAILED"] is ToolData and types["REASONING_DELTA"] is ReasoningData
    assert {data_type(body) for body in types.values()} == DATA_TYPES
    assert '    HEARTBEAT = "HEARTBEAT"\n' in render_python()


def test_an_event_type_declared_by_two_bodies_is_refused() -> None:
    script = """
from typing import ClassVar, Literal
from neta_jupyter.events.generate import catalogue
from neta_jupyter.events.wire import EventBody

class Again(EventBody):
    type: Literal["again"] = "again"
    event_types: ClassVar = {"TOOL_START": "Twice."}

catalogue()
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode != 0
    assert "TOOL_START is declared by ToolData too" in out.stderr


def test_deltas_built_without_a_model_match_the_model_encoding() -> None:
    """The fast path for text and reasoning deltas writes exactly what pydantic writes."""
    awkward = [
        "",
        "plain",
        'quo"te\\back',
        "new\nline\ttab\r",
        "\x00\x01\x1f\x7f",
        "é 中 😀",
        "\u2028\u2029",
        "</script>",
    ]
    for text in awkward:
        for kind, data in (("text", TextData(text=text)), ("reasoning", ReasoningData(text=text))):
            for step, total in ((None, None), (3, None), (None, 120), (2, 5)):
                event_type = EventType.TEXT_DELTA if kind == "text" else EventType.REASONING_DELTA
                event = AgentEvent(
                    event_type=event_type,
                    request_id='r_"x',
                    data=data,
                    timestamp="T",
                    step=step,
                    total_tokens=total,
                )
                fast = numbered(
                    event_type.value,
                    9,
                    text_rests(json.dumps('r_"x'), kind, [text], "T", step, total)[0],
                )
                assert fast == encode_json(event, 9)
                assert decode_event(fast) == event.model_copy(update={"seq": 9})
