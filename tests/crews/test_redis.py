"""A crew with runs stored in Redis: the same log, followed the same way, controlled the same."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.crew_helpers import agent, control, four_tasks, sse, sse_with_cuts, start, until
from tests.helpers import ApiClient
from tests.redis_server import redis_server


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture
def neta_config(redis_url: str) -> dict[str, Any]:
    return {"store_url": redis_url}


async def test_a_crew_runs_and_is_steered_with_runs_in_redis(
    api: ApiClient, runtime: Runtime
) -> None:
    agent(runtime, "profiler_a", ScriptedTurn(text="sales has 3 columns"))
    agent(runtime, "profiler_b", ScriptedTurn(text="stock has 5 columns"))
    agent(runtime, "reconciler", ScriptedTurn(text="both share sku"))
    agent(runtime, "writer", ScriptedTurn(text="REPORT"))
    rid = await start(api, four_tasks(report={"approval": "after"}), table_a="sales.csv")
    body = await until(api, rid, lambda s: s["status"] == "waiting")
    [gate] = body["escalations"]
    decided = await control(
        api, rid, "decide", escalationId=gate["escalationId"], decision="answer", approved=True
    )
    assert decided["applied"] is True
    events = await sse_with_cuts(api, rid, random.Random(5))
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["data"]["status"] == "completed"
    assert events == await sse(api, rid, -1)
    listed = (await api.http.get("neta/api/crews")).json()["crews"]
    assert [c["requestId"] for c in listed] == [rid]
