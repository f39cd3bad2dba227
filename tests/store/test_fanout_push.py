"""Followers written to from the commit itself: every event once, in order, whatever they do.

A caught-up follower is handed each durable batch by the commit; one whose client is behind, or
that leaves, or whose write fails, is taken off and its own task goes on from where it was.
Over the real server: many SSE followers of one run, some compressed, each get the whole log.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.store import EventRow, Store
from tests.helpers import TERMINAL, ApiClient, script, stored
from tests.server.test_compression import _ws_events
from tests.store.test_event_log import delta, done

STREAM = "neta/api/agent/run/stream"


class Client:
    """What a pushed follower's transport does: takes batches while ``ready``, records them.

    Like the SSE handler's, it leaves a batch that ends the run to its task, which then stops.
    """

    def __init__(self, *, fail_at: int = -1) -> None:
        self.got: list[int] = []
        self.pushed = 0
        self.ready = True
        self.fail_at = fail_at

    def push(self, rows: list[EventRow]) -> bool:
        if not self.ready or any(kind in TERMINAL for _, kind, _ in rows):
            return False
        if self.pushed == self.fail_at:
            raise OSError("the socket broke")
        self.pushed += 1
        self.got += [seq for seq, _, _ in rows]
        return True


async def _follow(log: Any, rid: str, client: Client, *, until: int) -> None:
    async for batch in log.follow(rid, -1, push=client.push):
        client.got += [seq for seq, _, _ in batch]
        if client.got and client.got[-1] >= until:
            return


async def test_pushed_followers_each_get_every_event_once_in_order(tmp_path: Path) -> None:
    # Many events per turn, many followers: all of them get the log, and once caught up they
    # get it from the commit (their tasks are not woken per batch).
    store = Store(tmp_path / "log.sqlite3", commit_interval=0.001)
    log = store.events
    await log.open("r")
    clients = [Client() for _ in range(30)]
    tasks = [asyncio.create_task(_follow(log, "r", c, until=5_000)) for c in clients]
    await asyncio.sleep(0.01)
    for i in range(5_000):
        log.append_nowait(delta("r", str(i)))
        if i % 100 == 99:
            await asyncio.sleep(0)
    await log.append(done("r"))
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    for client in clients:
        assert client.got == list(range(5_001))
        assert client.pushed > 10, "caught-up followers are written from the commit"
    store.close()


async def test_a_follower_whose_client_is_behind_is_not_pushed_to_until_it_caught_up(
    tmp_path: Path,
) -> None:
    # Its client stops reading: the commit stops writing to it (its task sends, and waits for
    # the client), so nothing piles up for it beyond the stream's bounded tail.
    store = Store(tmp_path / "log.sqlite3", commit_interval=0.001)
    log = store.events
    await log.open("r")
    slow, fast = Client(), Client()
    follower = log.follow("r", -1, push=slow.push)
    fast_task = asyncio.create_task(_follow(log, "r", fast, until=20_000))
    first = asyncio.create_task(follower.__anext__())
    await asyncio.sleep(0.01)
    slow.ready = False  # its socket is full
    for i in range(20_000):
        log.append_nowait(delta("r", str(i)))
        if i % 500 == 499:
            await asyncio.sleep(0)
    await log.append(done("r"))
    await asyncio.wait_for(fast_task, 60)
    batch = await asyncio.wait_for(first, 10)  # what the commit could not push
    assert slow.pushed == 0 and batch[0][0] == 0
    assert len(log._fanout._tails["r"].events) <= 2 * 4096, "memory stays bounded"
    slow.ready = True
    slow.got += [seq for seq, _, _ in batch]
    async for batch in follower:  # reads the rest from the store, then from the tail
        slow.got += [seq for seq, _, _ in batch]
        if slow.got[-1] == 20_000:
            break
    assert slow.got == list(range(20_001))
    assert fast.got == list(range(20_001))
    await follower.aclose()  # type: ignore[attr-defined]
    store.close()


async def test_a_follower_leaving_or_failing_mid_stream_leaves_the_others_whole(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "log.sqlite3", commit_interval=0.001)
    log = store.events
    await log.open("r")
    steady, broken, leaving = Client(), Client(fail_at=5), Client()
    tasks = [asyncio.create_task(_follow(log, "r", c, until=3_000)) for c in (steady, broken)]
    gone = asyncio.create_task(_follow(log, "r", leaving, until=3_000))
    await asyncio.sleep(0.01)
    for i in range(3_000):
        log.append_nowait(delta("r", str(i)))
        if i % 50 == 49:
            await asyncio.sleep(0)
        if i == 1_000:
            gone.cancel()  # its client went away between two commits
    await log.append(done("r"))
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    assert steady.got == list(range(3_001))
    # The broken push took nothing of the batch it failed on; its task sent it and went on.
    assert broken.got == list(range(3_001))
    assert gone.cancelled()
    left = leaving.pushed
    tail = log._fanout._tails.get("r")
    assert tail is None or all(p.push != leaving.push for p in tail.pushers)
    log.append_nowait(delta("r", "after"))
    await log.flush()
    assert leaving.pushed == left, "a follower that left is written to no more"
    store.close()


async def test_pushed_followers_get_heartbeats_only_once_quiet(tmp_path: Path) -> None:
    store = Store(tmp_path / "log.sqlite3")
    log = store.events
    await log.open("r")
    client = Client()
    beats: list[float] = []

    async def read() -> None:
        loop = asyncio.get_running_loop()
        async for batch in log.follow("r", -1, heartbeat=0.5, push=client.push):
            if batch:
                client.got += [seq for seq, _, _ in batch]
            else:
                beats.append(loop.time())
                if len(beats) == 2:
                    return

    reading = asyncio.create_task(read())
    for i in range(60):  # 1.2 s of events, far closer together than the heartbeat
        log.append_nowait(delta("r", str(i)))
        await asyncio.sleep(0.02)
    await log.flush()
    assert not beats, "no heartbeat while events are pushed"
    await asyncio.wait_for(reading, 30)
    assert client.got == list(range(60)) and client.pushed > 0
    store.close()


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"stream_compression": "always"}


async def _sse_events(api: ApiClient, rid: str, accept: str) -> list[str]:
    headers = {"Accept-Encoding": accept}
    async with api.http.stream("GET", STREAM, params={"requestId": rid}, headers=headers) as r:
        raw = b"".join([chunk async for chunk in r.aiter_raw()])
    text = zlib.decompress(raw, 16 + zlib.MAX_WBITS) if r.headers.get("content-encoding") else raw
    return [line[6:] for line in text.decode().split("\n") if line.startswith("data: ")]


async def test_many_sse_followers_of_one_live_run_each_get_the_whole_log(
    api: ApiClient, runtime: Runtime
) -> None:
    # Deltas a few per millisecond: followers catch up and are then written from the commit,
    # gzipped or plain, each frame in chunked HTTP framing, the terminal event last.
    script(runtime, ScriptedTurn(text=[f"w{i} " for i in range(1500)], delay=0.0005))
    rid = (await api.start("go", model="scripted"))["requestId"]
    accepts = ["gzip", "identity"] * 6
    got = await asyncio.gather(*(_sse_events(api, rid, accept) for accept in accepts))
    log = await stored(runtime, rid)
    for events in got:
        assert events == log
        assert json.loads(events[-1])["eventType"] == "MESSAGE_COMPLETED"


async def test_many_websocket_subscribers_of_one_live_run_each_get_the_whole_log(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    # Written from the commit once caught up, through each connection's own compressor.
    script(runtime, ScriptedTurn(text=[f"w{i} " for i in range(1500)], delay=0.0005))
    rid = (await api.start("go", model="scripted"))["requestId"]
    url = server_url.replace("http://", "ws://") + "neta/ws"
    options: list[dict[str, Any]] = [{}, {"compression": None}] * 4
    got = await asyncio.gather(*(_ws_events(url, jp_auth_header, rid, **o) for o in options))
    log = [json.dumps(json.loads(e), separators=(",", ":")) for e in await stored(runtime, rid)]
    for (extensions, events), option in zip(got, options, strict=True):
        assert events == log
        assert ("permessage-deflate" in extensions) == (option == {})
