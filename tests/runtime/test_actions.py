"""One table of run-API actions drives every surface, and nothing acts outside it.

Each action of ``runtime/actions.py`` is a REST route, a WebSocket frame type, an OpenAPI
operation, an in-process route and a TypeScript client method; no other route or frame does
what an action does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import websockets

from neta_jupyter.client import InProcessTransport, Refused
from neta_jupyter.client._transport import Call
from neta_jupyter.client.typescript import api_schema, typescript_client
from neta_jupyter.crews.requests import CrewRunRequest
from neta_jupyter.runtime import Runtime
from neta_jupyter.runtime.actions import ACTIONS, action_named
from neta_jupyter.runtime.queries import QUERIES
from neta_jupyter.runtime.requests import APPROVE_MODES
from neta_jupyter.server import handlers, openapi, routes
from neta_jupyter.widgets import comm
from tests.helpers import ApiClient

JS = Path(__file__).parents[2] / "js"
NAMES = [action.name for action in ACTIONS]
NOT_ACTIONS = {
    "agent/attachment/upload",
    "notebook/revert",
    "notebook/insert",
    "crew/run",
    "crew/control",
}
"""The POST routes that are no action of a run: a file, notebook edits, and crews."""
NOT_QUERIES = {
    "agent/run/stream",
    "agent/session/stream",
    "agent/attachment/download",
    "notebook/edits",
    "openapi.json",
    "crew/status",
    "crew/stream",
    "crews",
}
"""The GET routes that are no query of the runtime: streams, files, notebook edits, crews, this
API's document."""
SUBSCRIPTIONS = {"ping", "subscribe", "unsubscribe", "subscribe_session", "unsubscribe_session"}


def test_the_table_names_each_action_route_and_frame_once() -> None:
    for field in ("name", "route", "frame"):
        values = [getattr(action, field) for action in ACTIONS]
        assert len(values) == len(set(values)), field
    frames = [f for action in ACTIONS for f in (action.frame, *action.also_frames)]
    assert len(frames) == len(set(frames)) and not set(frames) & SUBSCRIPTIONS


def test_every_action_is_a_rest_route_and_an_openapi_operation_and_nothing_else_is() -> None:
    posts = {r.path: r for r in routes.ROUTES if any(op.method == "post" for op in r.operations)}
    by_action = {r.path: r for r in posts.values() if r.handler is handlers.ActionHandler}
    assert {p: r.kwargs for p, r in by_action.items()} == {a.route: {"action": a} for a in ACTIONS}
    assert set(posts) - set(by_action) == NOT_ACTIONS
    rules = {rule[0]: rule for rule in routes.routes()}
    doc = openapi.document("/")
    for action in ACTIONS:
        rule = rules[f"/neta/api/{action.route}"]
        assert rule[1] is handlers.ActionHandler and rule[2] == {"action": action}
        body = doc["paths"][f"/neta/api/{action.route}"]["post"]["requestBody"]
        schema = body["content"]["application/json"]["schema"]
        assert schema == {"$ref": f"#/components/schemas/{action.request.__name__}"}


def test_every_query_is_a_rest_route_and_an_openapi_operation_and_nothing_else_is() -> None:
    gets = {r.path: r for r in routes.ROUTES if any(op.method == "get" for op in r.operations)}
    by_query = {r.path: r for r in gets.values() if r.handler is handlers.QueryHandler}
    assert {p: r.kwargs for p, r in by_query.items()} == {q.route: {"query": q} for q in QUERIES}
    assert set(gets) - set(by_query) == NOT_QUERIES
    doc = openapi.document("/")
    for query in QUERIES:
        operation = doc["paths"][f"/neta/api/{query.route}"]["get"]
        documented = {(p["name"], p["required"]) for p in operation.get("parameters", [])}
        assert documented == {(p.name, p.required) for p in query.params}, query.name


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.name)
async def test_every_query_is_answered_in_process_and_over_rest(
    api: ApiClient, runtime: Runtime, query: Any
) -> None:
    started = await api.start("hello")
    await api.segment(started["requestId"])
    values = {"requestId": started["requestId"], "sessionId": started["sessionId"]}
    params = {p.name: values[p.name] for p in query.params}
    over_rest = (await api.http.get(f"neta/api/{query.route}", params=params)).json()
    in_process = InProcessTransport(runtime, "owner").send_blocking(
        Call("GET", query.route, params=params)
    )
    assert over_rest["success"] is True and set(in_process) == set(over_rest)
    for required in (p.name for p in query.params if p.required):
        missing = (await api.http.get(f"neta/api/{query.route}")).json()
        assert missing["errCode"] == "MISSING_PARAMETER" and required in missing["message"]
        with pytest.raises(Refused) as refused:
            InProcessTransport(runtime, "owner").send_blocking(Call("GET", query.route))
        assert refused.value.code == "MISSING_PARAMETER"


def test_the_typescript_client_and_its_schema_are_generated_from_the_table() -> None:
    assert (JS / "src" / "api.ts").read_text() == typescript_client(), (
        "js/src/api.ts is stale: run "
        "`python -m neta_jupyter.client.typescript --client > js/src/api.ts`"
    )
    committed = json.loads((JS / "schema" / "api.schema.json").read_text())
    assert committed == api_schema(), (
        "js/schema/api.schema.json is stale: run "
        "`python -m neta_jupyter.client.typescript --schema > js/schema/api.schema.json`"
    )
    client = typescript_client()
    for action in ACTIONS:
        assert f"  {action.name}(body: ActionBodies[{json.dumps(action.name)}])" in client
        assert json.dumps(action.route) in client and json.dumps(action.frame) in client
    assert list(committed["properties"]) == NAMES
    for query in QUERIES:
        assert f"  {json.dumps(query.name)}: {{ route: {json.dumps(query.route)}," in client


def test_the_widgets_actions_are_the_tables_bodies() -> None:
    for model in (
        comm.ResumeAction,
        comm.TerminateAction,
        comm.SuspendAction,
        comm.RetryAction,
        comm.InputAction,
    ):
        [name] = model.model_fields["action"].annotation.__args__  # type: ignore[union-attr]
        assert issubclass(model, action_named(name).request), name


async def test_every_action_is_a_websocket_frame_and_nothing_else_acts(
    api: ApiClient, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header, max_size=None) as ws:
        await ws.send(json.dumps({"type": "launch_rockets"}))
        unknown = json.loads(await ws.recv())
        known = set(unknown["message"].split("known: ", 1)[1].split(", "))
        frames = {f for action in ACTIONS for f in (action.frame, *action.also_frames)}
        assert known == frames | SUBSCRIPTIONS
        for action in ACTIONS:
            # Every action needs some field: an empty frame reaches its model, which says so.
            await ws.send(json.dumps({"type": action.frame, "id": action.name}))
            reply = json.loads(await ws.recv())
            assert reply["replyTo"] == action.name
            assert reply["type"] == "error" and reply["errCode"] == "INVALID_FIELDS", reply


async def test_every_rest_route_of_an_action_reads_its_model(api: ApiClient) -> None:
    for action in ACTIONS:
        response = await api.http.post(f"neta/api/{action.route}", json={})
        assert response.status_code == 400, (action.name, response.text)
        assert response.json()["errCode"] == "INVALID_FIELDS"


@pytest.mark.parametrize("name", NAMES)
async def test_every_action_is_answered_in_process(runtime: Runtime, name: str) -> None:
    transport = InProcessTransport(runtime, "owner")
    with pytest.raises(Refused) as refused:
        await transport.send(Call("POST", action_named(name).route, {}))
    assert refused.value.status == 400 and refused.value.code == "INVALID_FIELDS"
    # Each missing field is named by the action's own model.
    required = [f.alias or n for n, f in action_named(name).request.model_fields.items()]
    assert any(field in refused.value.message for field in required)


async def test_a_session_moves_its_leaf_and_sets_its_thinking_level_over_every_surface(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    started = await api.start("hello")
    await api.segment(started["requestId"])
    session_id = started["sessionId"]
    tree = (
        await api.http.post(
            "neta/api/sessions/leaf", json={"sessionId": session_id, "leafEntryId": None}
        )
    ).json()
    assert tree["sessionId"] == session_id and tree["activePath"] == []
    level = {"sessionId": session_id, "level": "high"}
    answer: dict[str, Any] = (
        await api.http.post("neta/api/sessions/thinkingLevel", json=level)
    ).json()
    assert answer == {"success": True, **level}
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
        await ws.send(
            json.dumps({"type": "set_thinking_level", "sessionId": session_id, "level": None})
        )
        ack = json.loads(await ws.recv())
    assert ack == {
        "type": "ack",
        "action": "set_thinking_level",
        "sessionId": session_id,
        "level": None,
    }
    session = await runtime.store.records.get_session(session_id)
    assert session is not None and session.thinking_level is None


def test_the_approve_modes_are_spelled_once() -> None:
    package = Path(__file__).parents[2] / "neta_jupyter"
    spelled = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if '"ask", "auto", "deny"' in path.read_text()
    ]
    assert spelled == ["runtime/data/state.py"]
    assert APPROVE_MODES == ("ask", "auto", "deny")
    for model in (action_named("start").request, CrewRunRequest):
        assert model.model_json_schema()["properties"]["approve"]["enum"] == list(APPROVE_MODES)
