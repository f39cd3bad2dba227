"""One client process of B11: starts its share of the runs, follows each over SSE, reports.

``python -m benchmarks.b11_worker BASE TOKEN MODEL COUNT``: prints ``started`` once its runs are
started, then one JSON line: the delivery latencies (ms, stamp to parse) of every delta, and how
many runs ended.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import httpx
from httpx_sse import aconnect_sse

from .harness import TERMINAL


async def _follow(client: httpx.AsyncClient, url: str, rid: str, out: list[float]) -> bool:
    """Follow one run; deltas made before the stream opened (replayed, not live) are not timed."""
    async with aconnect_sse(client, "GET", url, params={"requestId": rid}) as source:
        opened = time.time()
        async for sse in source.aiter_sse():
            if sse.event == "TEXT_DELTA":
                stamp = float(json.loads(sse.data)["data"]["text"])
                if stamp >= opened:
                    out.append(round((time.time() - stamp) * 1000, 2))
            elif sse.event in TERMINAL:
                return sse.event == "MESSAGE_COMPLETED"
    return False


async def main(base: str, token: str, model: str, count: int) -> None:
    headers = {"Authorization": f"token {token}"}
    limits = httpx.Limits(max_connections=count + 4, max_keepalive_connections=count + 4)
    async with httpx.AsyncClient(
        base_url=base, headers=headers, timeout=120, limits=limits, trust_env=False
    ) as client:
        latencies: list[float] = []
        url = "neta/api/agent/run/stream"
        follows: list[asyncio.Task[bool]] = []
        body = {"content": "go", "model": model}
        for _ in range(count):
            answer = await client.post("neta/api/agent/run/async", json=body)
            answer.raise_for_status()
            rid = answer.json()["requestId"]
            follows.append(asyncio.create_task(_follow(client, url, rid, latencies)))
        print("started", flush=True)
        done = await asyncio.gather(*follows)
    print(json.dumps({"latencies": latencies, "completed": sum(done)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
