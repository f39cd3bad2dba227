"""What only the Redis backend has: its fenced append, its start-up checks, its secret.

Against a real redis-server (``tests/redis_server.py``), as the store contract is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from neta_jupyter.runtime import Runtime, RuntimeConfig
from neta_jupyter.store import StorageError, Store
from neta_jupyter.store.redis_conn import UserKeys
from neta_jupyter.store.redis_scripts import RunUpdate, fenced_append
from neta_jupyter.store.redis_url import masked_url
from tests.redis_server import SAFE, redis_server

USER = UserKeys("alice")


def rows(first: int, count: int, tag: str = "") -> list[tuple[int, str, str]]:
    return [
        (seq, "TEXT_DELTA", f'{{"seq":{seq},"by":"{tag}"}}') for seq in range(first, first + count)
    ]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as found:
        yield found


@pytest.fixture
def client(url: str) -> Redis:
    redis.Redis.from_url(url).flushall()
    return Redis.from_url(url, decode_responses=True)


async def stored(client: Redis, stream: str) -> list[tuple[int, str]]:
    """``(seq, payload)`` of every event of the stream, as Redis keeps them."""
    found = await client.xrange(USER.stream(stream))
    return [(int(eid.split("-")[1]) - 1, fields["p"]) for eid, fields in found]


async def test_a_batch_continues_the_stream_or_is_refused(client: Redis) -> None:
    assert await fenced_append(client, USER, "r_1", "-", rows(0, 3)) == 3
    with pytest.raises(ResponseError, match="SEQ expected 3"):
        await fenced_append(client, USER, "r_1", "-", rows(5, 2))  # a gap
    with pytest.raises(ResponseError, match="SEQ expected 3"):
        await fenced_append(client, USER, "r_1", "-", rows(1, 1))  # behind the end
    assert [seq for seq, _ in await stored(client, "r_1")] == [0, 1, 2]


async def test_a_stale_lease_token_is_refused(client: Redis) -> None:
    await client.set(USER.lease("r_1"), "replica-b:7")
    with pytest.raises(ResponseError, match="FENCED"):
        await fenced_append(client, USER, "r_1", "replica-a:6", rows(0, 2))
    assert await stored(client, "r_1") == [], "a refused batch writes nothing"
    assert await fenced_append(client, USER, "r_1", "replica-b:7", rows(0, 2)) == 2


async def test_a_replayed_batch_whose_reply_was_lost_is_accepted_once(client: Redis) -> None:
    assert await fenced_append(client, USER, "r_1", "-", rows(0, 4)) == 4
    assert await fenced_append(client, USER, "r_1", "-", rows(0, 4)) == 0, "accepted, not written"
    assert await fenced_append(client, USER, "r_1", "-", rows(4, 1)) == 1
    assert [seq for seq, _ in await stored(client, "r_1")] == [0, 1, 2, 3, 4]


async def test_a_batch_ending_where_another_writers_events_end_is_no_replay(
    client: Redis,
) -> None:
    # B took the run over, wrote its end and let the lease go; A's queued batch covers the same
    # seqs. Taken for a replay, A would tell its followers of events the log does not hold.
    assert await fenced_append(client, USER, "r_1", "-", rows(0, 3, "b")) == 3
    with pytest.raises(ResponseError, match="FENCED"):
        await fenced_append(client, USER, "r_1", "replica-a:6", rows(1, 2, "a"))
    with pytest.raises(ResponseError, match="SEQ expected 3"):
        await fenced_append(client, USER, "r_1", "-", rows(2, 1, "a"))
    # B's own last batch, sent again after it let the lease go, still is one.
    assert await fenced_append(client, USER, "r_1", "replica-b:7", rows(1, 2, "b")) == 0
    assert await stored(client, "r_1") == [(seq, payload) for seq, _, payload in rows(0, 3, "b")]


async def test_two_writers_racing_for_the_next_seq_leave_no_gap_or_duplicate(
    url: str, client: Redis
) -> None:
    await fenced_append(client, USER, "r_1", "-", rows(0, 3))
    other = Redis.from_url(url, decode_responses=True)
    for round_ in range(50):
        first = 3 + 2 * round_
        results = await asyncio.gather(
            fenced_append(client, USER, "r_1", "-", rows(first, 2, "a")),
            fenced_append(other, USER, "r_1", "-", rows(first, 1, "b")),
            return_exceptions=True,
        )
        wins = [r for r in results if not isinstance(r, Exception)]
        assert len(wins) == 1, results
        if wins == [1]:  # b won: a's next batch fills seq first+1 alone
            await fenced_append(client, USER, "r_1", "-", rows(first + 1, 1, "a"))
    found = await stored(client, "r_1")
    assert [seq for seq, _ in found] == list(range(103)), "contiguous, each seq once"
    await other.aclose()


async def test_a_terminal_event_and_its_status_are_one_write(client: Redis) -> None:
    await client.hset(USER.run("r_1"), mapping={"rec": "{}", "status": "running", "state": "{}"})
    update = RunUpdate("r_1", "completed", '{"phase":"done"}')
    await client.set(USER.lease("r_1"), "someone-else")
    with pytest.raises(ResponseError, match="FENCED"):
        await fenced_append(client, USER, "r_1", "-", rows(0, 1), update)
    assert await client.hget(USER.run("r_1"), "status") == "running", "neither, when refused"
    await client.delete(USER.lease("r_1"))
    await fenced_append(client, USER, "r_1", "-", rows(0, 1), update)
    assert await client.hget(USER.run("r_1"), "status") == "completed"


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (["--appendonly", "no"], "CONFIG SET appendonly yes"),
        (
            ["--appendonly", "yes", "--maxmemory-policy", "allkeys-lru"],
            "CONFIG SET maxmemory-policy noeviction",
        ),
    ],
)
async def test_start_up_refuses_a_redis_that_could_lose_runs(
    tmp_path: Path, settings: list[str], says: str
) -> None:
    with redis_server(tmp_path, settings=settings) as found:
        store = Store(found)
        with pytest.raises(StorageError, match=says) as refused:
            await store.start()
        assert refused.value.code == "STORAGE_MISCONFIGURED"
        store.close()


@pytest.mark.parametrize(
    ("fsync", "mode"), [("always", "aof-always"), ("everysec", "aof-everysec")]
)
async def test_start_up_logs_the_durability_mode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fsync: str, mode: str
) -> None:
    settings = [*SAFE[:2], "--appendfsync", fsync, *SAFE[4:]]
    with redis_server(tmp_path, settings=settings) as found:
        store = Store(found, logger=logging.getLogger("neta_jupyter"))
        with caplog.at_level(logging.INFO, logger="neta_jupyter"):
            await store.start()
        assert f"({mode})" in caplog.text
        store.close()


async def test_the_password_never_shows(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    password = "s3cret-redis-pass-42"
    with redis_server(
        tmp_path, "--requirepass", password, settings=["--appendonly", "no"]
    ) as found:
        assert password in found
        store = Store(found, logger=logging.getLogger("neta_jupyter"))
        Runtime(store, RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path))
        assert store.redactor(f"echo {password}") == "echo [redacted]", "redacted like a key"
        with caplog.at_level(logging.DEBUG), pytest.raises(StorageError) as refused:
            await store.start()
        assert "appendonly" in refused.value.message and "***" in refused.value.message
        assert password not in str(refused.value) and password not in caplog.text
        wrong = Store(found.replace(password, password[::-1]))
        with pytest.raises(StorageError) as unreachable:
            await wrong.start()
        assert password[::-1] not in str(unreachable.value)
        store.close()
        wrong.close()
    assert password not in masked_url(f"redis://user:{password}@host:6379/0")
    assert masked_url("rediss://host/0?password=abc123") == "rediss://host/0?password=***"


def test_the_store_url_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from neta_jupyter.server.app import NetaApp

    assert NetaApp().store_url == "", "SQLite unless told otherwise"
    monkeypatch.setenv("NETA_STORE_URL", "redis://redis.internal:6379/2")
    assert NetaApp().store_url == "redis://redis.internal:6379/2"
    assert masked_url("unix:///run/redis.sock") == "unix:///run/redis.sock"
    assert masked_url("unix://:hunter2-long@/run/redis.sock") == "unix://:***@/run/redis.sock"


async def test_events_refused_by_the_store_reach_no_one(
    url: str, client: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.store.contract import delta

    store = Store(url)
    log = store.events
    await log.open("r_1")
    log.append_nowait(delta("r_1", "mine"))
    await log.flush()
    follower = log.follow("r_1", 0, heartbeat=30)
    await client.set(UserKeys("_").lease("r_1"), "another-server:3")  # the run's lease moved
    with caplog.at_level(logging.ERROR, logger="neta_jupyter"):
        log.append_nowait(delta("r_1", "not mine"))
        await asyncio.wait_for(log.flush(), 30)
    assert [e.seq for e in await log.read_after("r_1", -1)] == [0]
    assert "refused the events of r_1" in caplog.text and "FENCED" in caplog.text
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(follower), 0.5)  # nothing was sent to followers
    await follower.aclose()  # type: ignore[attr-defined]
    store.close()


async def lease_store(url: str, ttl: float = 1.0) -> tuple[Store, Any]:
    """A store on ``url`` holding one running run of alice's (``r_1``)."""
    from neta_jupyter.store import RedisBackend, RunRecord

    store = Store(url, lease_ttl=ttl)
    run = RunRecord(
        request_id="r_1", principal="alice", session_id="s_1", status="running",
        model="m", created=1.0, prompt="p", state={},
    )  # fmt: skip
    await store.backend.insert_run(run)
    assert isinstance(store.backend, RedisBackend)
    return store, store.backend


async def test_racing_for_a_runs_lease_has_one_winner(url: str, client: Redis) -> None:
    stores = [await lease_store(url) for _ in range(4)]
    won = await asyncio.gather(*(store.acquire("r_1") for store, _ in stores))
    assert sorted(won) == [False, False, False, True]
    holder = stores[won.index(True)][1]
    assert await client.get(USER.lease("r_1")) == f"{holder.replica}:1", "fence 1"
    for store, _ in stores:
        store.close()


async def test_a_writer_whose_lease_lapsed_is_refused_and_the_new_owner_writes(
    url: str, client: Redis
) -> None:
    from tests.store.contract import delta

    old, old_backend = await lease_store(url, ttl=0.3)
    assert await old.acquire("r_1")
    old_backend.stop_heartbeat()  # a server that stalls: it renews nothing
    await old.events.open("r_1")
    old.events.append_nowait(delta("r_1", "before"))
    await old.events.flush()
    await asyncio.sleep(0.6)  # past its lease
    new, _ = await lease_store(url)
    assert await new.acquire("r_1"), "a lapsed lease is free"
    token = await client.get(USER.lease("r_1"))
    assert token is not None and token.endswith(":2"), "the fence counts the run's leases"
    old.events.append_nowait(delta("r_1", "stale"))
    await old.events.flush()
    assert not old_backend.holds("r_1"), "a refused writer lets go of the run"
    await new.events.open("r_1")
    new.events.append_nowait(delta("r_1", "after"))
    await new.events.flush()
    payloads = [e.payload for e in await new.events.read_after("r_1", -1)]
    assert len(payloads) == 2 and "before" in payloads[0] and "after" in payloads[1]
    old.close()
    new.close()


async def test_the_heartbeat_keeps_a_lease_past_many_lease_times(url: str, client: Redis) -> None:
    store, backend = await lease_store(url, ttl=0.3)
    assert await store.acquire("r_1")
    await asyncio.sleep(1.5)  # five lease times without a write
    assert backend.holds("r_1")
    other, _ = await lease_store(url)
    assert not await other.acquire("r_1"), "still held"
    store.close()
    other.close()


async def test_a_terminal_status_releases_the_lease(url: str, client: Redis) -> None:
    store, backend = await lease_store(url)
    assert await store.acquire("r_1")
    await store.backend.update_run("r_1", "completed", {}, with_events=True)
    assert await client.get(USER.lease("r_1")) is None
    assert not backend.holds("r_1")
    assert await client.zrange(USER.running, 0, -1) == []
    assert await client.hget(USER.run("r_1"), "owner") is None
    assert await store.leases.expired() == [], "an ended run is nobody's to take over"
    store.close()


async def test_an_ended_runs_events_expire_and_a_live_or_waiting_runs_never(
    url: str, client: Redis
) -> None:
    from tests.store.contract import delta

    store, backend = await lease_store(url)
    backend.keep_s = 3600
    assert await store.acquire("r_1")
    await store.events.open("r_1")
    store.events.append_nowait(delta("r_1", "hello"))
    await store.backend.update_run("r_1", "running", {}, with_events=True)
    assert await client.ttl(USER.stream("r_1")) == -1, "a live run's stream has no TTL"
    await store.backend.update_run("r_1", "suspended", {}, with_events=True)
    assert await client.ttl(USER.stream("r_1")) == -1, "nor a suspended one's"
    await store.backend.update_run("r_1", "failed", {}, with_events=False)
    assert 3500 < await client.ttl(USER.stream("r_1")) <= 3600
    await store.backend.update_run("r_1", "running", {}, with_events=False)  # retried
    assert await client.ttl(USER.stream("r_1")) == -1
    store.close()


async def test_more_readers_at_once_than_connections_all_read(url: str, client: Redis) -> None:
    """Followers catching up at the same moment wait for a connection instead of failing."""
    from tests.store.contract import delta

    store = Store(url + "?max_connections=4")
    log = store.events
    await log.open("r_1")
    for number in range(50):
        log.append_nowait(delta("r_1", f"d{number} "))
    await log.flush()
    reads = await asyncio.gather(*(log.read_after("r_1", -1) for _ in range(40)))
    assert all([e.seq for e in read] == list(range(50)) for read in reads)
    store.close()
