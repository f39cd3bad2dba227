"""Crews over the API: a task graph of child runs, its durable log over SSE and the WebSocket."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import websockets

from neta_jupyter.crews import CrewDefinitionError, checked, load_file, parse_text, resolve_inputs
from neta_jupyter.events import decode_event
from neta_jupyter.providers import ScriptedModel, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.crew_helpers import (
    agent,
    four_tasks,
    prompts,
    sse,
    sse_with_cuts,
    start,
    task_statuses,
    ws_with_cuts,
)
from tests.helpers import ApiClient

CYCLE = """\
name: loop
agents:
  - name: a
tasks:
  - id: first
    agent: a
    description: one
    depends_on: [second]
  - id: second
    agent: a
    description: two
    depends_on: [first]
"""


def _agents(runtime: Runtime) -> dict[str, ScriptedModel]:
    return {
        "sales": agent(runtime, "profiler_a", ScriptedTurn(text="sales has 3 columns", delay=0.05)),
        "stock": agent(runtime, "profiler_b", ScriptedTurn(text="stock has 5 columns", delay=0.05)),
        "reconcile": agent(runtime, "reconciler", ScriptedTurn(text="both share the sku column")),
        "report": agent(runtime, "writer", ScriptedTurn(text="REPORT: tables agree on sku")),
    }


def _contiguous(events: list[dict[str, Any]]) -> None:
    assert [e["seq"] for e in events] == list(range(len(events)))


# --- definitions


def test_a_cycle_is_refused_with_the_field_and_line() -> None:
    with pytest.raises(CrewDefinitionError) as caught:
        parse_text(CYCLE)
    assert caught.value.field == "tasks[0].depends_on"
    assert caught.value.line == 8
    assert "first -> second -> first" in str(caught.value)


def test_an_unknown_agent_or_task_is_named() -> None:
    definition = four_tasks(reconcile={"agent": "nobody"})
    with pytest.raises(CrewDefinitionError, match=r"tasks\[2\]\.agent: unknown agent 'nobody'"):
        checked(definition)
    definition = four_tasks(report={"depends_on": ["reconcile", "summary"]})
    with pytest.raises(CrewDefinitionError, match=r"tasks\[3\]\.depends_on\[1\]: unknown task"):
        checked(definition)


def test_a_placeholder_must_name_an_input_or_an_upstream_task() -> None:
    definition = four_tasks(sales={"description": "Profile {report}"})
    with pytest.raises(CrewDefinitionError, match=r"tasks\[0\]\.description.*depends_on"):
        checked(definition)


def test_missing_and_unknown_inputs_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "crew.yaml"
    path.write_text(json.dumps(four_tasks()))
    crew = load_file(path)
    with pytest.raises(CrewDefinitionError, match=r"inputs\.table_a: missing input"):
        resolve_inputs(crew, {})
    with pytest.raises(CrewDefinitionError, match=r"inputs\.table_c: unknown input"):
        resolve_inputs(crew, {"table_a": "x", "table_c": "y"})
    assert resolve_inputs(crew, {"table_a": "sales.csv"}) == {
        "table_a": "sales.csv",
        "table_b": "stock.csv",
    }


def test_a_bad_field_in_yaml_names_its_line() -> None:
    text = CYCLE.replace("depends_on: [second]", "retries: many")
    with pytest.raises(CrewDefinitionError) as caught:
        parse_text(text)
    assert caught.value.field == "tasks[0].retries"
    assert caught.value.line == 8


async def test_definition_errors_are_4xx_and_start_nothing(
    api: ApiClient, runtime: Runtime
) -> None:
    _agents(runtime)
    cases = [
        ({"definition": CYCLE}, "tasks[0].depends_on"),
        ({"definition": four_tasks(sales={"agent": "ghost"})}, "tasks[0].agent"),
        ({"definition": four_tasks()}, "inputs.table_a"),
        ({"definition": four_tasks(), "inputs": {"table_a": "a", "zzz": "b"}}, "inputs.zzz"),
    ]
    for body, field in cases:
        response = await api.http.post("neta/api/crew/run", json=body)
        assert response.status_code == 400, response.text
        assert response.json()["errCode"] == "INVALID_CREW"
        assert field in response.json()["message"]
    broken = four_tasks()
    broken["agents"][0]["model"] = "no-such-model"
    response = await api.http.post(
        "neta/api/crew/run", json={"definition": broken, "inputs": {"table_a": "a"}}
    )
    assert response.status_code == 400 and "agents[0].model" in response.json()["message"]
    assert await runtime.runs.find(limit=100) == []
    listed = await api.http.get("neta/api/crews")
    assert listed.json()["crews"] == []


# --- a crew run


async def test_four_tasks_over_sse_with_cuts(api: ApiClient, runtime: Runtime) -> None:
    models = _agents(runtime)
    rid = await start(api, four_tasks(), table_a="sales.csv")
    events = await sse_with_cuts(api, rid, random.Random(7))
    _contiguous(events)
    assert events == await sse(api, rid, -1)
    final = events[-1]
    assert final["eventType"] == "crew:run:status" and final["data"]["status"] == "completed"
    assert final["data"]["counts"] == {"completed": 4}
    # Every event is of the event protocol: typed, with the body its event type declares.
    typed = [decode_event(e) for e in events]
    assert {(e.event_type.value, type(e.data).__name__) for e in typed if e is not None} == {
        ("crew:run:status", "CrewStatusData"),
        ("crew:task:status", "CrewTaskData"),
        ("crew:log", "CrewLogData"),
    }
    assert None not in typed
    for task_id in ("sales", "stock", "reconcile", "report"):
        statuses = task_statuses(events, task_id)
        assert statuses[-1] == "completed" and "running" in statuses
    # The two profilers ran at once: both started before either completed.
    order = [
        (e["data"]["taskId"], e["data"]["status"])
        for e in events
        if e["eventType"] == "crew:task:status"
    ]
    first_done = min(order.index(("sales", "completed")), order.index(("stock", "completed")))
    assert order.index(("sales", "running")) < first_done
    assert order.index(("stock", "running")) < first_done
    # Outputs reached their dependents, inputs and defaults their tasks.
    assert prompts(models["sales"])[0].startswith("Profile sales.csv")
    assert prompts(models["stock"])[0].startswith("Profile stock.csv")
    assert prompts(models["reconcile"])[0].startswith(
        "Reconcile: sales has 3 columns | stock has 5 columns"
    )
    assert "both share the sku column" in prompts(models["report"])[0]
    report = [
        e["data"]
        for e in events
        if e["eventType"] == "crew:task:status" and e["data"]["status"] == "completed"
    ]
    assert {r["taskId"]: r["output"] for r in report}["report"] == "REPORT: tables agree on sku"
    children = {r["taskId"]: r["childRequestId"] for r in report}
    for child in children.values():
        run = await runtime.runs.get(child)
        assert run is not None and run.parent_request_id == rid and run.status == "completed"
    # A finished crew's stream read to its end: nothing follows.
    done = await api.http.get(
        "neta/api/crew/stream", params={"requestId": rid, "lastEventId": events[-1]["seq"]}
    )
    assert done.status_code == 204


async def test_four_tasks_over_the_websocket_with_cuts(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    _agents(runtime)
    url = server_url.replace("http://", "ws://") + "neta/crew"
    async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
        await ws.send(
            json.dumps(
                {
                    "type": "crew:trigger",
                    "id": 1,
                    "definition": four_tasks(),
                    "inputs": {"table_a": "sales.csv"},
                }
            )
        )
        replies = []
        while not replies or not isinstance(replies[-1], dict) or "replyTo" not in replies[-1]:
            replies.append(json.loads(await ws.recv()))
        rid = replies[-1]["requestId"]
        assert replies[-1]["type"] == "crew:started"
        await ws.send(json.dumps({"type": "crew:control", "requestId": rid, "action": "bogus"}))
        while isinstance(reply := json.loads(await ws.recv()), list):
            pass
        assert reply["type"] == "error" and reply["errCode"] == "INVALID_FIELDS"
    events = await ws_with_cuts(url, jp_auth_header, rid, random.Random(3))
    _contiguous(events)
    assert events[-1]["data"]["status"] == "completed"
    assert events == await sse(api, rid, -1)
