"""Which clients get compressed streams by default: every one but a client on the server's own
machine that reaches it directly, where bytes cost nothing and compressing only costs CPU.

A proxy in front of the server (JupyterHub's, nginx) says so with ``X-Forwarded-For`` or
``Forwarded``: its clients are remote, and get compressed streams.
"""

from __future__ import annotations

from typing import Any

import pytest
import websockets
from tornado import httputil

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.server.compression import worth_compressing
from tests.helpers import ApiClient, script

STREAM = "neta/api/agent/run/stream"


async def _encoding(api: ApiClient, rid: str, **headers: str) -> str | None:
    sent = {"Accept-Encoding": "gzip, deflate", **headers}
    async with api.http.stream("GET", STREAM, params={"requestId": rid}, headers=sent) as r:
        assert r.status_code == 200, await r.aread()
        return r.headers.get("content-encoding")


async def test_sse_is_plain_on_this_machine_and_gzipped_through_a_proxy(
    api: ApiClient, runtime: Runtime
) -> None:
    script(runtime, ScriptedTurn(text=["a ", "b "]))
    rid = (await api.start("go", model="scripted"))["requestId"]
    assert await _encoding(api, rid) is None
    assert await _encoding(api, rid, **{"X-Forwarded-For": "203.0.113.9"}) == "gzip"
    assert await _encoding(api, rid, Forwarded="for=203.0.113.9") == "gzip"


async def _extensions(url: str, headers: dict[str, str]) -> str:
    async with websockets.connect(url, additional_headers=headers) as ws:
        assert ws.response is not None
        return str(ws.response.headers.get("Sec-WebSocket-Extensions", ""))


async def test_the_websocket_is_deflated_only_through_a_proxy(
    server_url: str, jp_auth_header: dict[str, str]
) -> None:
    url = server_url.replace("http://", "ws://") + "neta/ws"
    assert await _extensions(url, jp_auth_header) == ""
    proxied = {**jp_auth_header, "X-Forwarded-For": "203.0.113.9"}
    assert "permessage-deflate" in await _extensions(url, proxied)


def _request(remote_ip: str, **headers: str) -> httputil.HTTPServerRequest:
    request = httputil.HTTPServerRequest(
        method="GET", uri="/", headers=httputil.HTTPHeaders(headers)
    )
    request.remote_ip = remote_ip
    return request


@pytest.mark.parametrize(
    ("remote_ip", "headers", "policy", "compressed"),
    [
        ("127.0.0.1", {}, "auto", False),
        ("::1", {}, "auto", False),
        ("::ffff:127.0.0.1", {}, "auto", False),
        ("10.1.2.3", {}, "auto", True),
        ("127.0.0.1", {"X-Forwarded-For": "10.1.2.3"}, "auto", True),
        ("127.0.0.1", {}, "always", True),
        ("10.1.2.3", {}, "never", False),
    ],
)
def test_the_policy_decides_by_the_peer_and_its_proxy(
    remote_ip: str, headers: dict[str, Any], policy: str, compressed: bool
) -> None:
    assert worth_compressing(_request(remote_ip, **headers), policy) is compressed
