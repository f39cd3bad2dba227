"""The store contract (``tests/store_contract.py``) on every backend: SQLite and in-memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from neta_jupyter.store import MemoryBackend, MemoryData, Store
from tests.store_contract import Place, StoreContract


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


class TestStoreContract(StoreContract):
    @pytest.fixture(params=["sqlite", "memory"])
    def place(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
        found = (
            SqlitePlace(tmp_path / "neta.sqlite3") if request.param == "sqlite" else MemoryPlace()
        )
        yield found
        found.close()
