"""An MCP server that sends too much: a huge result, an odd resource name, a flood of stderr.

A real jupyter server and a real stdio MCP server written with the SDK (``tests/mcp/sdk_server.py``);
the scripted model calls its tools.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedModel, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, script, types
from tests.mcp.test_tools import SERVER, listing
from tests.tools.test_kernel_tools import call

pytestmark = pytest.mark.timeout(180)

LIMIT = 1_000_000


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {
        "mcp_servers": {"cat": {"command": sys.executable, "args": [SERVER], "startup": True}},
        "mcp_max_result_bytes": LIMIT,
    }


async def test_a_result_over_the_cap_fails_the_call_saying_so(
    api: ApiClient, runtime: Runtime
) -> None:
    await listing(api)
    model = script(
        runtime,
        call("cat__dump", chars=3 * LIMIT),
        call("cat__dump", chars=LIMIT // 4),
        ScriptedTurn(text="done"),
    )
    rid = (await api.start("dump it", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    failed = next(e["data"] for e in events if e["eventType"] == "TOOL_FAILED")
    assert failed["toolName"] == "cat__dump"
    assert f"over the limit of {LIMIT:,} bytes" in failed["errorMessage"]
    # The server and its session are fine: the next, smaller result arrives whole.
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert done["toolName"] == "cat__dump" and done.get("truncated") is True
    answered = [m.content for m in model.requests[2].messages if m.role == "tool"]
    assert "over the limit" in answered[0] and answered[1].startswith("x" * 9000)
    assert f"{LIMIT // 4:,} characters" in answered[1]  # all of it arrived


async def test_another_run_completes_while_a_huge_result_is_refused(
    api: ApiClient, runtime: Runtime
) -> None:
    await listing(api)
    script(runtime, call("cat__dump", chars=60_000_000), ScriptedTurn(text="too big"))
    other = ScriptedModel([ScriptedTurn(text="meanwhile, hello")], name="other")
    runtime.models.register("other", other)
    big = (await api.start("dump 60 MB", model="scripted"))["requestId"]
    small = (await api.start("say hello", model="other"))["requestId"]
    small_events, big_events = await asyncio.gather(api.segment(small), api.segment(big))
    assert types(small_events)[-1] == "MESSAGE_COMPLETED"
    assert types(big_events)[-1] == "MESSAGE_COMPLETED"
    failed = next(e["data"] for e in big_events if e["eventType"] == "TOOL_FAILED")
    assert "over the limit" in failed["errorMessage"]


@pytest.mark.parametrize(("name", "stored"), [("..", "export-1.csv"), ("r" * 300, "r" * 116)])
async def test_a_resource_with_a_hostile_name_is_attached_under_a_safe_one(
    api: ApiClient, runtime: Runtime, name: str, stored: str
) -> None:
    await listing(api)
    script(runtime, call("cat__export", name=name), ScriptedTurn(text="exported"))
    rid = (await api.start("export", model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED", events[-1]
    attached = next(e["data"] for e in events if e["eventType"] == "ATTACHMENT_CHANGED")
    assert attached["fileName"].startswith(stored[:100])
    got = await api.http.get(
        "neta/api/agent/attachment/download", params={"virtualPath": attached["virtualPath"]}
    )
    assert got.status_code == 200 and got.content == b"region,rain\nnorth,12\n"


async def test_a_flood_of_stderr_is_logged_only_up_to_its_budget(
    api: ApiClient, runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    await listing(api)
    script(runtime, call("cat__shout", lines=2_000, width=10_000), ScriptedTurn(text="loud"))
    rid = (await api.start("shout", model="scripted"))["requestId"]
    assert types(await api.segment(rid))[-1] == "MESSAGE_COMPLETED"

    def from_cat() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.getMessage().startswith("neta: MCP server cat")
        ]

    for _ in range(600):  # the reader thread logs what it has read
        if any("is not logged" in m for m in from_cat()):
            break
        await asyncio.sleep(0.1)
    logged = from_cat()
    assert any("more than 65536 characters a minute" in m for m in logged)
    assert sum(len(m) for m in logged) < 200_000  # of 20 MB written
    assert all(len(m) < 2_200 for m in logged)
    assert any("cut at 2000 characters" in m for m in logged)


def test_a_relayed_server_that_does_not_exist_cannot_start(tmp_path: Path) -> None:
    from neta_jupyter.mcp.config import StdioServer
    from neta_jupyter.mcp.relay import relayed

    with pytest.raises(FileNotFoundError):
        relayed(StdioServer(command=str(tmp_path / "nope")), LIMIT)
