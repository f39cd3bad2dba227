"""Tools that act on their run through a RunScope: no tool is known to the loop by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neta_jupyter.events import EventType, TextData
from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import RunScope, ToolContext, tool
from tests.helpers import ApiClient
from tests.notebook_room import write_notebook

SEEN: dict[str, Any] = {}


@tool(readonly=True)
async def confirm_plan(ctx: ToolContext, scope: RunScope, plan: str) -> str:
    """Ask the user to confirm a plan."""
    SEEN["runs"] = SEEN.get("runs", 0) + 1
    SEEN["resumed"] = scope.resumed
    answer = await scope.ask(f"Go ahead with {plan}?", ["yes", "no"])
    return f"the user said {answer}"


@tool(readonly=True)
async def where_am_i(ctx: ToolContext, scope: RunScope) -> str:
    """Say which run and session this is."""
    try:
        scope.emit(EventType.TEXT_DELTA, TextData(text="sneaky"))
    except ValueError as exc:
        SEEN["refused"] = str(exc)
    return json.dumps([scope.request_id, scope.tool_call_id, ctx.session_id])


def of(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["eventType"] == name]


async def test_a_tool_of_any_name_asks_the_user_through_its_scope(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.tools.register(confirm_plan)
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ScriptedToolCall("confirm_plan", {"plan": "a bar chart"})]),
            ScriptedTurn(text="Drawing it."),
        ]
    )
    runtime.models.register("plan", model)
    rid = (await api.start("chart it", model="plan"))["requestId"]
    first = await api.segment(rid)
    [question] = of(first, "CLARIFY_REQUEST")
    assert question["question"] == "Go ahead with a bar chart?"
    assert question["options"] == ["yes", "no"]
    status = await api.status(rid)
    assert status["pendingAsk"]["kind"] == "clarify"
    assert status["pendingAsk"]["toolName"] == "confirm_plan"
    [offered] = [t for t in model.requests[0].tools if t.name == "confirm_plan"]
    assert set(offered.parameters["properties"]) == {"plan"}, "the scope is not an argument"

    ok = await api.resume(rid, askId=question["clarifyId"], answer="yes")
    assert ok.status_code == 200, ok.text
    second = await api.segment(rid, first[-1]["seq"])
    [done] = of(second, "TOOL_COMPLETED")
    assert done["output"] == "the user said yes"
    assert of(second, "TOOL_START") == [], "the call went on in the card it had opened"
    assert SEEN["runs"] == 2 and SEEN["resumed"] is True
    assert model.requests[1].messages[-1].content == "the user said yes"
    assert second[-1]["eventType"] == "MESSAGE_COMPLETED"


async def test_a_scope_reads_its_run_and_publishes_only_side_events(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "work").mkdir()
    write_notebook(jp_root_dir / "work" / "a.ipynb")
    runtime.tools.register(where_am_i)
    runtime.models.register(
        "where",
        ScriptedModel(
            [
                ScriptedTurn(tool_calls=[ScriptedToolCall("where_am_i", id="c7")]),
                ScriptedTurn(text="Found it."),
            ]
        ),
    )
    started = await api.start("where?", model="where", notebookPath="work/a.ipynb")
    rid = started["requestId"]
    events = await api.segment(rid)
    [done] = of(events, "TOOL_COMPLETED")
    assert json.loads(done["output"]) == [rid, "c7", started["sessionId"]]
    assert "TEXT_DELTA" in SEEN["refused"] and "sneaky" not in json.dumps(events)
