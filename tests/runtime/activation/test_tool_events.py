"""The tool side channel (TOOL_EVENT) over the run API's SSE stream against a real server.

``tool_stream_data``: a skill's plain stdout lines and what a ``python`` cell prints in a real
kernel reach the stream while the tool still runs, batched, in order, before the call's
TOOL_COMPLETED. ``auth_required``: a run against an endpoint whose key variable is unset tells
the user which variable to set, then fails once; a skill may say which credentials it lacks.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from httpx_sse import aconnect_sse
from rich.console import Console

from neta_jupyter.cli_render import TerminalRenderer
from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.terminal.live import LiveRenderer
from tests.helpers import ApiClient, types
from tests.tools.test_kernel_tools import call, kernel_of, script
from tests.tools.test_skills import make_skill
from tests.tools.test_skills import script as skill_script

SECRET = "sk-STREAMEDstreamedSTREAMED0123456789"
UNSET = "NETA_TEST_UNSET_MODEL_KEY"
TERMINAL = {"MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED"}


@pytest.fixture
def neta_config(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """One endpoint whose key is set (so its value is a known secret), one whose key is not."""
    monkeypatch.setenv("STREAM_TEST_KEY", SECRET)
    monkeypatch.delenv(UNSET, raising=False)
    return {
        "endpoints": {
            "keyed": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "STREAM_TEST_KEY"},
            "nokey": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": UNSET},
        }
    }


async def follow(
    api: ApiClient, rid: str, on_event: Callable[[dict[str, Any]], None] = lambda e: None
) -> list[dict[str, Any]]:
    """The envelopes of the run's stream segment, each handed to ``on_event`` as it arrives."""
    out: list[dict[str, Any]] = []
    async with aconnect_sse(
        api.http, "GET", "neta/api/agent/run/stream", params={"requestId": rid}
    ) as source:
        async for sse in source.aiter_sse():
            if sse.event == "HEARTBEAT":
                continue
            envelope = json.loads(sse.data)
            out.append(envelope)
            on_event(envelope)
    return out


def streamed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if e["eventType"] == "TOOL_EVENT" and e["data"]["category"] == "tool_stream_data"
    ]


def release_on_first_stream(gate: Path) -> Callable[[dict[str, Any]], None]:
    """Creates ``gate`` once the first streamed output arrives (the tool waits for it)."""

    def on_event(envelope: dict[str, Any]) -> None:
        if streamed([envelope]) and not gate.exists():
            gate.write_text("go")

    return on_event


def assert_streamed_before_completion(events: list[dict[str, Any]], tool: str) -> str:
    """The call's stream events: indexed 0.., all before its TOOL_COMPLETED; their text."""
    chunks = streamed(events)
    assert chunks, types(events)
    done = next(e for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert {c["data"]["toolCallId"] for c in chunks} == {done["data"]["toolCallId"]}
    assert {c["data"]["toolName"] for c in chunks} == {tool}
    assert all(c["seq"] < done["seq"] for c in chunks)
    assert [c["data"]["payload"]["index"] for c in chunks] == list(range(len(chunks)))
    assert [e["eventType"] for e in events if e["eventType"] in TERMINAL] == ["MESSAGE_COMPLETED"]
    return "".join(c["data"]["payload"]["text"] for c in chunks)


CHATTY_SKILL = """
import json, os, sys, time
args = json.loads(sys.stdin.read())
print("warming up", flush=True)
print(json.dumps({"type": "progress", "stage": "load", "percent": 10}), flush=True)
deadline = time.time() + 60
while not os.path.exists(args["gate"]) and time.time() < deadline:
    time.sleep(0.02)
print("gate open" if os.path.exists(args["gate"]) else "gate never opened", flush=True)
print("key " + args["secret"], flush=True)
for i in range(2000):
    print(f"row {i}", flush=True)
print(json.dumps({"type": "result", "output": "2000 rows"}), flush=True)
"""


async def test_a_skills_stdout_lines_stream_live_and_batched_before_it_completes(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, tmp_path: Path
) -> None:
    make_skill(jp_root_dir, "chatty", CHATTY_SKILL)
    gate = tmp_path / "gate"
    skill_script(runtime, "chatty", {"gate": str(gate), "secret": SECRET})
    rid = (await api.start("go", model="scripted", approve="auto"))["requestId"]
    events = await follow(api, rid, release_on_first_stream(gate))

    text = assert_streamed_before_completion(events, "run_skill")
    rows = "".join(f"row {i}\n" for i in range(2000))
    # The skill only went on once its first line had reached the stream: output is live.
    assert text == f"warming up\ngate open\nkey [redacted]\n{rows}"
    assert SECRET not in json.dumps(events)
    # 2003 lines, far fewer events: a chatty skill cannot flood the log.
    assert len(streamed(events)) <= 100
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert done["output"].startswith("2000 rows")  # the model reads the result, not the lines


CHATTY_CELL = """
import os, time
print("starting", flush=True)
deadline = time.time() + 60
while not os.path.exists({gate!r}) and time.time() < deadline:
    time.sleep(0.02)
print("gate open" if os.path.exists({gate!r}) else "gate never opened", flush=True)
for i in range(3000):
    print(f"line {{i}}")
print("finished")
"""


async def test_a_python_cell_streams_its_output_while_it_runs(
    api: ApiClient, runtime: Runtime, jp_serverapp: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "cell-gate"
    script(
        runtime, call("python", code=CHATTY_CELL.format(gate=str(gate))), ScriptedTurn(text="ok")
    )
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        rid = (await api.start("print", model="scripted", kernelId=kernel_id, approve="auto"))[
            "requestId"
        ]
        events = await follow(api, rid, release_on_first_stream(gate))
    text = assert_streamed_before_completion(events, "python")
    lines = "".join(f"line {i}\n" for i in range(3000))
    assert text == f"starting\ngate open\n{lines}finished\n"
    assert len(streamed(events)) <= 100


async def test_an_unset_key_variable_asks_for_it_and_fails_the_run_once(
    api: ApiClient,
) -> None:
    rid = (await api.start("hello", model="nokey:some-model"))["requestId"]
    events = await follow(api, rid)
    auth = [e["data"] for e in events if e["eventType"] == "TOOL_EVENT"]
    assert len(auth) == 1 and auth[0]["category"] == "auth_required"
    assert UNSET in auth[0]["userMessage"]
    assert auth[0]["payload"] == {"model": "nokey:some-model", "variable": UNSET}
    assert [e["eventType"] for e in events if e["eventType"] in TERMINAL] == ["MESSAGE_FAILED"]
    failed = events[-1]["data"]
    assert events[-1]["eventType"] == "MESSAGE_FAILED"
    assert failed["errorCode"] == "LLM_INVALID_REQUEST" and failed["recoverable"] is False
    assert UNSET in failed["errorMessage"]
    assert types(events).index("TOOL_EVENT") < len(events) - 1


async def test_a_skill_says_which_credentials_it_lacks(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    make_skill(
        jp_root_dir,
        "hub",
        """
        import json
        print(json.dumps({"type": "auth_required", "variable": "HF_TOKEN",
                          "message": "set HF_TOKEN to a token of huggingface.co"}), flush=True)
        print(json.dumps({"type": "error", "message": "no token"}), flush=True)
        """,
    )
    skill_script(runtime, "hub", {})
    rid = (await api.start("go", model="scripted", approve="auto"))["requestId"]
    events = await follow(api, rid)
    side = next(e for e in events if e["eventType"] == "TOOL_EVENT")
    failed = next(e for e in events if e["eventType"] == "TOOL_FAILED")
    assert side["data"]["category"] == "auth_required"
    assert side["data"]["userMessage"] == "set HF_TOKEN to a token of huggingface.co"
    assert side["data"]["payload"] == {"skill": "hub", "variable": "HF_TOKEN"}
    assert side["data"]["toolCallId"] == failed["data"]["toolCallId"]
    assert side["seq"] < failed["seq"]


def test_the_output_stream_batches_without_a_loop() -> None:
    """Outside an event loop nothing is timed: everything waits for the call's end."""
    from neta_jupyter.runtime.activation.toolstream import ToolOutputStream

    sent: list[Any] = []

    class Emitter:
        def emit(self, event_type: Any, data: Any) -> int:
            sent.append(data)
            return len(sent)

    stream = ToolOutputStream(Emitter(), "c1", "python")  # type: ignore[arg-type]
    stream.write("a\n")
    stream.write("b\npartial")
    stream.close()
    stream.write("late\n")
    assert "".join(d.payload["text"] for d in sent) == "a\nb\npartial"


# --- the terminal client ---------------------------------------------------------------------


def side_events() -> list[str]:
    """A call that streams two lines, a category from a newer server, a missing key."""

    def envelope(seq: int, event_type: str, **data: object) -> str:
        return json.dumps({"eventType": event_type, "seq": seq, "requestId": "r_1", "data": data})

    side = {"type": "tool_side", "toolCallId": "c1", "toolName": "python"}
    tool = {"type": "tool", "toolCallId": "c1", "toolName": "python"}
    return [
        envelope(0, "TOOL_START", **tool, arguments='{"code": "work()"}'),
        envelope(1, "TOOL_EVENT", **side, category="tool_stream_data", payload={"text": "a 1\n"}),
        envelope(2, "TOOL_EVENT", **side, category="tool_stream_data", payload={"text": "b 2\n"}),
        envelope(
            3,
            "TOOL_EVENT",
            **side,
            category="quota_hint_from_the_future",
            payload={"text": "UNSEEN"},
            userMessage="UNSEEN",
        ),
        envelope(
            4,
            "TOOL_EVENT",
            type="tool_side",
            toolCallId="model",
            toolName="model",
            category="auth_required",
            userMessage=f"set the environment variable {UNSET}",
        ),
    ]


def test_the_plain_terminal_shows_streamed_output_and_the_variable_to_set() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False)
    for payload in side_events():
        renderer.feed(payload)
    text = out.getvalue()
    assert "┆ a 1\n" in text and "┆ b 2\n" in text
    assert f"credentials needed: set the environment variable {UNSET}" in text
    assert "UNSEEN" not in text and "quota_hint" not in text  # an unknown category is ignored


def test_the_live_terminal_shows_streamed_output_in_the_card_and_the_variable_to_set() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, height=40, force_terminal=True, color_system=None)
    renderer = LiveRenderer(out, console=console)
    for payload in side_events()[:4]:
        renderer.feed(payload)
    view = Console(file=io.StringIO(), width=100, height=40, color_system=None)
    with view.capture() as shown:
        view.print(renderer.view())
    region = shown.get()
    assert "a 1" in region and "b 2" in region
    assert "UNSEEN" not in region
    renderer.feed(side_events()[4])
    renderer.close()
    printed = out.getvalue()
    assert "credentials needed" in printed and UNSET in printed
    assert "UNSEEN" not in printed and "quota_hint" not in printed
