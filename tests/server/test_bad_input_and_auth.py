"""Bad input gets a clear 4xx with an errCode; auth is required everywhere; runs are private."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient

ROUTES_POST = [
    "async",
    "resumeTask",
    "retryTask",
    "terminateTask",
    "suspendTask",
    "addSupplementaryInput",
    "import",
]


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and body["httpStatusCode"] == status
    assert body["errCode"] == code
    assert body["message"] and "Traceback" not in body["message"]
    return body


@pytest.mark.parametrize("route", ROUTES_POST)
async def test_malformed_json_is_400(api: ApiClient, route: str) -> None:
    response = await api.http.post(f"neta/api/agent/run/{route}", content=b"{not json")
    assert_error(response, 400, "INVALID_JSON")
    response = await api.http.post(f"neta/api/agent/run/{route}", content=b"[1, 2]")
    assert_error(response, 400, "INVALID_JSON")


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("async", {}, "content"),
        ("async", {"content": 42}, "content"),
        ("async", {"content": "x", "maxSteps": "many"}, "maxSteps"),
        ("async", {"content": "x", "approve": "sometimes"}, "approve"),
        ("async", {"content": "x", "suspendTimeout": 0}, "suspendTimeout"),
        ("async", {"content": "x", "virtualTools": [{"name": "bad name!"}]}, "virtualTools"),
        ("resumeTask", {"approved": True}, "requestId"),
        ("resumeTask", {"requestId": "r", "approved": "yes please"}, "approved"),
        ("addSupplementaryInput", {"requestId": "r"}, "content"),
    ],
)
async def test_missing_or_wrongly_typed_fields_are_400(
    api: ApiClient, route: str, body: dict[str, Any], field: str
) -> None:
    error = assert_error(await api.post(route, body), 400, "INVALID_FIELDS")
    assert field in error["message"]


async def test_unknown_request_ids(api: ApiClient) -> None:
    for route in ("resumeTask", "retryTask", "terminateTask", "suspendTask"):
        assert_error(await api.post(route, {"requestId": "r_nope"}), 404, "RUN_NOT_FOUND")
    assert_error(
        await api.post("addSupplementaryInput", {"requestId": "r_nope", "content": "x"}),
        404,
        "RUN_NOT_FOUND",
    )
    frames = await api.frames("r_nope")
    assert [f.event for f in frames] == ["error"] and frames[0].data == ""
    response = await api.http.get("neta/api/agent/run/stream", params={"requestId": "r_nope"})
    assert ": no run with requestId" in response.text
    assert_error(
        await api.http.get("neta/api/agent/run/status", params={"requestId": "r_nope"}),
        404,
        "RUN_NOT_FOUND",
    )


async def test_stream_parameters(api: ApiClient) -> None:
    rid = (await api.start("hello"))["requestId"]
    response = await api.http.get(
        "neta/api/agent/run/stream", params={"requestId": rid, "lastEventId": "abc"}
    )
    assert_error(response, 400, "INVALID_LAST_EVENT_ID")
    response = await api.http.get("neta/api/agent/run/stream")
    assert_error(response, 400, "MISSING_PARAMETER")
    assert_error(
        await api.post("async", {"content": "x", "model": "nope:none"}), 400, "UNKNOWN_MODEL"
    )
    assert_error(await api.post("async", {"content": "   "}), 400, "EMPTY_CONTENT")


async def test_body_over_the_limit_is_413(api: ApiClient) -> None:
    big = json.dumps({"content": "x" * 1_100_000})
    assert_error(
        await api.http.post("neta/api/agent/run/async", content=big), 413, "BODY_TOO_LARGE"
    )


async def test_resume_of_a_run_that_is_not_suspended_is_409(api: ApiClient) -> None:
    rid = (await api.start("hello"))["requestId"]
    await api.segment(rid)
    assert_error(await api.resume(rid, approved=True), 409, "RUN_NOT_SUSPENDED")


async def test_bad_websocket_frames_get_errors_and_the_socket_stays_open(
    api: ApiClient, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header, max_size=None) as ws:
        cases = [
            ("{oops", "INVALID_JSON"),
            ("[1]", "INVALID_JSON"),
            (json.dumps({"type": "launch_rockets"}), "UNKNOWN_TYPE"),
            (json.dumps({"type": "subscribe"}), "INVALID_FIELDS"),
            (json.dumps({"type": "subscribe", "requestId": "r_nope"}), "RUN_NOT_FOUND"),
            (
                json.dumps({"type": "subscribe", "requestId": "r", "lastEventId": "x"}),
                "INVALID_LAST_EVENT_ID",
            ),
            (json.dumps({"type": "chat", "content": 5}), "INVALID_FIELDS"),
            (
                json.dumps(
                    {"type": "chat", "content": "hi", "attachments": [{"attachmentId": "x"}]}
                ),
                "ATTACHMENT_NOT_FOUND",
            ),
            (json.dumps({"type": "ping", "pad": "x" * 1_200_000}), "FRAME_TOO_LARGE"),
        ]
        for frame, code in cases:
            await ws.send(frame)
            reply = json.loads(await ws.recv())
            assert reply["type"] == "error" and reply["errCode"] == code, (frame[:40], reply)
            assert reply["message"]
        await ws.send(json.dumps({"type": "ping", "id": 7}))
        assert json.loads(await ws.recv()) == {"type": "pong", "replyTo": 7}
        await ws.send(json.dumps({"type": "chat", "content": "hi over websocket"}))
        started = json.loads(await ws.recv())
        assert started["type"] == "started"
        events: list[dict[str, Any]] = []
        while not events or events[-1]["eventType"] != "MESSAGE_COMPLETED":
            frame = json.loads(await ws.recv())
            if isinstance(frame, list):
                events += frame
        assert [e["seq"] for e in events] == list(range(len(events)))


async def test_no_token_is_rejected_everywhere(server_url: str, api: ApiClient) -> None:
    async with httpx.AsyncClient(base_url=server_url, trust_env=False) as anon:
        for route in ROUTES_POST:
            response = await anon.post(f"neta/api/agent/run/{route}", json={"content": "x"})
            assert response.status_code == 403, route
        for path in (
            "neta/api/agent/run/stream?requestId=x",
            "neta/api/agent/run/status?requestId=x",
            "neta/api/agent/runs",
            "neta/api/sessions",
            "neta/api/models",
            "neta/api/agent/attachment/download?virtualPath=x",
        ):
            assert (await anon.get(path)).status_code == 403, path
        wrong = {"Authorization": "token not-the-token"}
        assert (
            await anon.post("neta/api/agent/run/async", json={"content": "x"}, headers=wrong)
        ).status_code == 403
        kernel_wrong = {"Authorization": "neta-kernel not-the-token"}
        assert (
            await anon.post("neta/api/agent/run/async", json={"content": "x"}, headers=kernel_wrong)
        ).status_code == 403
    url = server_url.replace("http://", "ws://") + "neta/ws"
    with pytest.raises(InvalidStatus) as info:
        async with websockets.connect(url):
            pass
    assert info.value.response.status_code == 403


async def test_cross_origin_websocket_is_refused(
    server_url: str, jp_auth_header: dict[str, str]
) -> None:
    url = server_url.replace("http://", "ws://") + "neta/ws"
    with pytest.raises(InvalidStatus) as info:
        async with websockets.connect(url, origin="http://evil.example"):  # type: ignore[arg-type]
            pass
    assert info.value.response.status_code in (403, 404)


async def test_cookie_post_without_xsrf_is_refused(server_url: str, jp_serverapp: Any) -> None:
    token = jp_serverapp.identity_provider.token
    async with httpx.AsyncClient(base_url=server_url, trust_env=False) as browser:
        login = await browser.get(f"lab?token={token}")  # sets the login cookie, like a browser
        assert login.status_code in (200, 302, 404)
        assert any(c.startswith("username-") for c in browser.cookies), "no login cookie was set"
        refused = await browser.post("neta/api/agent/run/async", json={"content": "x"})
        assert refused.status_code == 403
        xsrf = browser.cookies.get("_xsrf")
        assert xsrf, "the server sets an _xsrf cookie"
        accepted = await browser.post(
            "neta/api/agent/run/async", json={"content": "x"}, headers={"X-XSRFToken": xsrf}
        )
        assert accepted.status_code == 200, accepted.text


async def test_another_principals_run_does_not_exist(api: ApiClient, runtime: Runtime) -> None:
    theirs = await runtime.start("someone-else", "private question")
    await runtime.wait(theirs.request_id)
    assert_error(
        await api.http.get("neta/api/agent/run/status", params={"requestId": theirs.request_id}),
        404,
        "RUN_NOT_FOUND",
    )
    frames = await api.frames(theirs.request_id)
    assert [f.event for f in frames] == ["error"]
    assert_error(
        await api.post("terminateTask", {"requestId": theirs.request_id}), 404, "RUN_NOT_FOUND"
    )
    assert_error(
        await api.post("suspendTask", {"requestId": theirs.request_id}), 404, "RUN_NOT_FOUND"
    )
    runs = (await api.http.get("neta/api/agent/runs")).json()["runs"]
    assert theirs.request_id not in {r["requestId"] for r in runs}


async def test_kernel_token_authenticates(
    api: ApiClient, server_url: str, runtime: Runtime, jp_serverapp: Any
) -> None:
    token = jp_serverapp.web_app.settings["neta_kernel_token"]
    async with httpx.AsyncClient(
        base_url=server_url, trust_env=False, headers={"Authorization": f"neta-kernel {token}"}
    ) as kernel:
        response = await kernel.post(
            "neta/api/agent/run/async", json={"content": "from the kernel"}
        )
        assert response.status_code == 200, response.text
        rid = response.json()["requestId"]
    # The browser/token user and the kernel are the same owner: the run is visible to both.
    assert (await api.status(rid))["prompt"] == "from the kernel"
