"""A streamable-HTTP MCP server that sends too much: the same cap as a stdio server's.

A real MCP server written with the SDK (``tests/mcp/sdk_server.py http PORT``), answering with an
event stream or with one JSON body; a real jupyter server connects to it.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, script, types
from tests.mcp.test_http import HttpMcp, web  # noqa: F401 (a fixture)
from tests.tools.test_kernel_tools import call

pytestmark = pytest.mark.timeout(180)

LIMIT = 1_000_000


@pytest.fixture
def neta_config(web: HttpMcp) -> dict[str, Any]:  # noqa: F811
    return {"mcp_servers": {"web": {"url": web.url}}, "mcp_max_result_bytes": LIMIT}


@pytest.mark.parametrize("web", ["sse", "json"], indirect=True)
async def test_a_result_over_the_cap_fails_the_call_saying_so(
    api: ApiClient, runtime: Runtime
) -> None:
    model = script(
        runtime,
        call("web__dump", chars=3 * LIMIT),
        call("web__dump", chars=LIMIT // 4),
        ScriptedTurn(text="done"),
    )
    rid = (await api.start("dump it", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    failed = next(e["data"] for e in events if e["eventType"] == "TOOL_FAILED")
    assert failed["toolName"] == "web__dump"
    assert f"over the limit of {LIMIT:,} bytes" in failed["errorMessage"]
    assert "mcp_max_result_bytes" in failed["errorMessage"]
    # The server and its session are fine: the next, smaller result arrives whole.
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert done["toolName"] == "web__dump" and done.get("truncated") is True
    answered = [m.content for m in model.requests[2].messages if m.role == "tool"]
    assert "over the limit" in answered[0] and answered[1].startswith("x" * 9000)
    assert f"{LIMIT // 4:,} characters" in answered[1]  # all of it arrived


STREAM = (
    b": a comment\r\n"
    b'event: message\r\nid: 7\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\r\n\r\n'
    b'event: message\nid: 8\ndata:{"jsonrpc":"2.0",\r\ndata:  "id":3,"result":{}}\n\n'
    b"retry: 100\r\r"
    b"data: " + b'{"jsonrpc":"2.0","id":"big","result":"' + b"y" * 5000 + b'"}\r\n\r\n'
    b"data: "
    + b'{"jsonrpc":"2.0","method":"notifications/message","params":"'
    + b"z" * 5000
    + b'"}\r\n\r\n'
)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(STREAM)])
def test_an_event_stream_keeps_its_events_in_any_chunks_and_refuses_one_over_the_cap(
    size: int,
) -> None:
    from neta_jupyter.mcp.capped import _Events

    def events(limit: int) -> list[Any]:
        split = _Events(limit)
        chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
        out = b"".join(e for c in chunks for e in split.feed(c))
        return list(httpx2._sse._SSEParser().decode(out.decode()))  # the SDK's own parser

    whole = events(10_000)
    assert whole == list(httpx2._sse._SSEParser().decode(STREAM.decode()))  # as sent
    assert [e.id for e in whole] == ["7", "8", "8", "8", "8"] and whole[2].retry == 100
    assert json.loads(whole[1].data) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert json.loads(whole[3].data)["result"] == "y" * 5000
    capped = events(1000)
    assert len(capped) == 4  # the notification over the cap is dropped, nobody waits for it
    assert capped[:3] == whole[:3]
    refused = json.loads(capped[3].data)
    assert refused["id"] == "big" and refused["error"]["code"] == -32050
    assert refused["error"]["message"].startswith(
        f"the result is {len(whole[3].data):,} bytes, over the limit of 1,000 bytes"
    )
