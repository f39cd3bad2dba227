"""Opening the store before the server serves: where it is, its checks, and the crash recovery.

SQLite answers without an event loop, so its recovery runs at once. A Redis store is across the
network: its checks and recovery run on the server's loop before it starts serving, or, when that
loop already runs (a server started from async code), the checks run on a loop of their own in a
thread (so a bad Redis still stops the start-up) and recovery as the loop's first task.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..store import (
    StorageError,
    StorageUnavailable,
    Store,
    finish_now,
    is_redis_url,
    masked_url,
    redis_of,
)

if TYPE_CHECKING:
    from ..store import RedisBackend

SCHEMES = "redis://, rediss:// or unix://"


def store_location(store_url: str, db_path: str | Path) -> str | Path:
    """What to open: the Redis at ``store_url`` when one is set, else the SQLite file."""
    if not store_url:
        return db_path
    if not is_redis_url(store_url):
        raise StorageError(
            f"store_url {masked_url(store_url)!r} is not a Redis URL ({SCHEMES}); "
            "leave it empty to keep runs in SQLite"
        )
    return store_url


def start_store(
    store: Store, recover: Callable[[], Coroutine[Any, Any, int]], log: logging.Logger
) -> int:
    """Check the store and end the runs a crash left running; how many (0 if not yet known)."""
    redis = redis_of(store.backend)
    if redis is None:
        return finish_now(recover())
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None:
        from redis.exceptions import RedisError  # present: the store was made with it

        async def both() -> int:
            await store.start()
            try:
                return await recover()
            except RedisError as error:  # an answer of the store, not a fault of the server
                raise StorageUnavailable(
                    f"ending the runs a crash left running failed: {error}", reason=str(error)
                ) from None

        return asyncio.get_event_loop_policy().get_event_loop().run_until_complete(both())
    check_in_thread(redis, log)
    task = loop.create_task(recover())
    task.add_done_callback(lambda done: _told(done, log))
    return 0


def check_in_thread(backend: RedisBackend, log: logging.Logger) -> None:
    """The start-up checks of ``backend``'s Redis, on a connection and loop of their own."""
    from ..store.redis_backend import RedisBackend  # present: the store was made with it

    failure: list[BaseException] = []

    def check() -> None:
        probe = RedisBackend(backend.url, user=backend.user, logger=log)
        try:
            asyncio.run(probe.start())
        except BaseException as error:  # handed to the caller's thread
            failure.append(error)
        finally:
            probe.stop()

    worker = threading.Thread(target=check, name="neta-store-check")
    worker.start()
    worker.join()
    if failure:
        raise failure[0]


def _told(done: asyncio.Task[int], log: logging.Logger) -> None:
    if done.cancelled():
        return
    error = done.exception()
    if error is not None:
        log.error("neta: ending the runs a crash left running failed: %s", error)
    elif done.result():
        log.warning("neta: %d run(s) were interrupted by a crash (SYSTEM_CRASH)", done.result())
