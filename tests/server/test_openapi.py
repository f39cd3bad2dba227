"""The OpenAPI document is true to the server: every route, every method, every error body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tornado.web import RequestHandler

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.server.openapi import ErrorBody
from tests.helpers import ApiClient
from tests.server_process import ServerProcess

VERBS = ("get", "post", "put", "patch", "delete")


def registered_routes(jp_serverapp: Any) -> dict[str, type[RequestHandler]]:
    app = jp_serverapp.extension_manager.extension_apps["neta_jupyter"]
    ext = next(iter(app))
    # The WebSockets and the MCP server's endpoint speak protocols of their own.
    elsewhere = (r"/neta/ws", r"/neta/crew", r"/neta/mcp")
    return {pattern: handler for pattern, handler, *_ in ext.handlers if pattern not in elsewhere}


async def test_every_route_is_documented_and_every_documented_route_exists(
    api: ApiClient, jp_serverapp: Any, jp_base_url: str
) -> None:
    response = await api.http.get("neta/api/openapi.json")
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"].startswith("3.")
    documented = {
        path.removeprefix(jp_base_url.rstrip("/")): ops for path, ops in doc["paths"].items()
    }
    routes = registered_routes(jp_serverapp)
    assert set(documented) == set(routes)
    for path, handler in routes.items():
        implemented = {v for v in VERBS if getattr(handler, v) is not getattr(RequestHandler, v)}
        assert implemented == set(documented[path]), path
    # Each documented operation answers (with auth) something other than 404/405 for its method.
    for path, ops in documented.items():
        for method in ops:
            reply = await api.http.request(method.upper(), path.lstrip("/"), content=b"{}")
            assert reply.status_code not in (405, 500), (method, path, reply.text)


async def test_a_suspended_runs_status_and_pending_ask_are_as_documented(
    api: ApiClient, runtime: Runtime, jp_base_url: str
) -> None:
    import jsonschema

    runtime.models.register(
        "ask",
        ScriptedModel(
            [ScriptedTurn(tool_calls=[ScriptedToolCall("clarify", {"question": "Which year?"})])]
        ),
    )
    rid = (await api.start("sales?", model="ask"))["requestId"]
    events = await api.segment(rid)
    [question] = [e["data"] for e in events if e["eventType"] == "CLARIFY_REQUEST"]
    doc = (await api.http.get("neta/api/openapi.json")).json()
    prefix = jp_base_url.rstrip("/")
    for path, params in (
        ("/neta/api/agent/run/status", {"requestId": rid}),
        ("/neta/api/agent/runs", {}),
    ):
        documented = doc["paths"][prefix + path]["get"]["responses"]["200"]["content"]
        body = (await api.http.get(path.lstrip("/"), params=params)).json()
        jsonschema.validate(
            body, {**documented["application/json"]["schema"], "components": doc["components"]}
        )
    status = await api.status(rid)
    pending = doc["components"]["schemas"]["PendingAsk"]
    assert set(status["pendingAsk"]) == set(pending["properties"]) == set(pending["required"])
    assert status["pendingAsk"] == {
        "kind": "clarify",
        "askId": question["clarifyId"],
        "toolCallId": question["toolCallId"],
        "toolName": "clarify",
    }
    assert all(p.get("description") for p in pending["properties"].values())


def test_schemathesis_finds_no_server_errors(tmp_path: Path) -> None:
    import schemathesis
    from hypothesis import HealthCheck, settings
    from hypothesis import given as hgiven

    server = ServerProcess(tmp_path)
    server.start()
    try:
        doc = httpx.get(
            server.url + "neta/api/openapi.json", headers=server.headers, timeout=10
        ).json()
        schema = schemathesis.openapi.from_dict(doc)
        failures: list[str] = []
        checked = 0
        with httpx.Client(
            base_url=server.url.rstrip("/"), headers=server.headers, timeout=30
        ) as http:
            for result in schema.get_all_operations():
                operation = result.ok()
                if operation.path.endswith("/stream"):
                    continue  # a live stream: covered by the resume and bad-input tests

                @settings(
                    max_examples=25,
                    deadline=None,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                )
                @hgiven(case=operation.as_strategy())
                def check(case: Any) -> None:
                    nonlocal checked
                    checked += 1
                    kwargs = case.as_transport_kwargs(base_url=server.url.rstrip("/"))
                    reply = http.request(
                        kwargs["method"],
                        kwargs["url"],
                        params=kwargs.get("params"),
                        json=kwargs.get("json"),
                        content=kwargs.get("data")
                        if isinstance(kwargs.get("data"), (bytes, str))
                        else None,
                        headers={"Authorization": server.headers["Authorization"]},
                    )
                    if reply.status_code >= 500:
                        failures.append(
                            f"{case.method} {case.path}: {reply.status_code} {reply.text[:200]}"
                        )
                    elif reply.status_code >= 400:
                        try:
                            ErrorBody.model_validate(reply.json())
                        except (ValueError, json.JSONDecodeError) as exc:
                            failures.append(
                                f"{case.method} {case.path}: bad error body {reply.text[:200]} ({exc})"
                            )

                check()
        assert checked > 100
        assert failures == [], "\n".join(failures[:20])
    finally:
        server.stop()


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {}
