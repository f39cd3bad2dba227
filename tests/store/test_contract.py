"""The store contract (``tests/store/contract.py``, ``tests/store/backlog.py``) on every backend:
SQLite, in-memory, Redis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from neta_jupyter.store import MemoryBackend, MemoryData, RedisBackend, Store
from tests.redis_server import redis_server
from tests.store.backlog import BacklogContract
from tests.store.contract import Place, StoreContract


class SqlitePlace:
    """A SQLite file; a restart opens it again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.opened: list[Store] = []

    def open(self) -> Store:
        store = Store(self.path)
        self.opened.append(store)
        return store

    def crash(self, store: Store) -> None:
        db = store.db
        # What a killed process loses: everything not yet committed.
        db._pending.clear()
        db._pending_count = 0
        db._pending_writes.clear()
        db.close()

    def break_writes(self, store: Store) -> None:
        store.db.conn.execute("PRAGMA query_only = 1")  # every write fails as on a read-only disk

    def mend_writes(self, store: Store) -> None:
        store.db.conn.execute("PRAGMA query_only = 0")

    def close(self) -> None:
        for store in self.opened:
            store.close()


class MemoryPlace:
    """A :class:`MemoryData` that outlives the backends opened on it."""

    def __init__(self) -> None:
        self.data = MemoryData()

    def open(self) -> Store:
        return Store(MemoryBackend(self.data))

    def crash(self, store: Store) -> None:
        assert isinstance(store.backend, MemoryBackend)
        store.backend.crash()

    def break_writes(self, store: Store) -> None:
        assert isinstance(store.backend, MemoryBackend)
        store.backend.fail_writes("the disk is full")

    def mend_writes(self, store: Store) -> None:
        assert isinstance(store.backend, MemoryBackend)
        store.backend.fail_writes(None)

    def close(self) -> None:
        pass


class RedisPlace:
    """A database of a real redis-server (emptied first); a restart connects again."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.admin = redis.Redis.from_url(url)
        self.admin.flushall()
        self.opened: list[Store] = []

    def open(self) -> Store:
        # Reads of a network store let the writer run, as SQLite's never do: a group-commit
        # window longer than a few local round trips keeps "not yet durable" observable.
        store = Store(self.url, commit_interval=0.05)
        self.opened.append(store)
        return store

    def crash(self, store: Store) -> None:
        assert isinstance(store.backend, RedisBackend)
        store.backend.crash()

    def break_writes(self, store: Store) -> None:
        # With no replica to copy to, Redis refuses every write (NOREPLICAS) and serves reads.
        self.admin.config_set("min-replicas-to-write", 1)

    def mend_writes(self, store: Store) -> None:
        self.admin.config_set("min-replicas-to-write", 0)

    def close(self) -> None:
        self.mend_writes(self.opened[0]) if self.opened else None
        for store in self.opened:
            store.close()
        self.admin.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One redis-server for the contract tests (each test empties it)."""
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


class TestStoreContract(StoreContract, BacklogContract):
    @pytest.fixture(params=["sqlite", "memory", "redis"])
    def place(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
        found: SqlitePlace | MemoryPlace | RedisPlace
        if request.param == "sqlite":
            found = SqlitePlace(tmp_path / "neta.sqlite3")
        elif request.param == "memory":
            found = MemoryPlace()
        else:
            found = RedisPlace(request.getfixturevalue("redis_url"))
        yield found
        found.close()
