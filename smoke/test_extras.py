"""The installed wheel with an extra: what the extra adds works against its real counterpart."""

from __future__ import annotations

import asyncio

import pytest
from conftest import EXTRAS, Server


@pytest.mark.skipif("redis" not in EXTRAS, reason="the redis extra is not installed")
def test_with_the_redis_extra_runs_are_kept_in_redis(server: Server, store_url: str) -> None:
    import redis.asyncio as aioredis

    rid = server.start_run(content="what files are here?", model="demo", approve="auto")
    events = server.follow(rid)
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED", events[-1]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert any(e["eventType"] == "TOOL_COMPLETED" for e in events)

    async def stored() -> list[str]:
        client = aioredis.Redis.from_url(store_url)
        try:
            return [k.decode() async for k in client.scan_iter(match="neta:*")]
        finally:
            await client.aclose()

    keys = asyncio.run(stored())
    assert any(rid in key for key in keys), keys
