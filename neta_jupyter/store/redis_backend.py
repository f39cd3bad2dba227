"""The Redis backend: runs shared through a Redis (or Valkey) that keeps an append-only file.

Selected by a ``redis://``, ``rediss://`` or ``unix://`` store URL. Events are Redis streams
(:mod:`.redis_log`), records hashes and sorted sets (:mod:`.redis_records`); attachments' bytes
stay on disk. Before use, :meth:`RedisBackend.start` refuses a Redis that could lose what it is
given and says which durability it offers, and one whose Redis user may not touch the keys it
needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis
from redis.exceptions import NoPermissionError, RedisError

from .health import StorageUnavailable
from .redis_conn import (
    OWNERS,
    USERS,
    StoreMisconfigured,
    UserKeys,
    check_durable,
    connect,
)
from .redis_kernels import DROP, RedisKernels
from .redis_log import RedisEvents
from .redis_records import RedisRecords
from .redis_scripts import APPEND
from .redis_tail import RedisTail
from .redis_url import masked_url


class RedisBackend(RedisKernels, RedisTail, RedisRecords):
    """A :class:`~neta_jupyter.store.contract.Backend` and its leases on one Redis."""

    def __init__(
        self,
        url: str,
        *,
        commit_interval: float = 0.002,
        lease_ttl: float = 15.0,
        event_retention: float = 0,
        user: str | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        """``user``: the one user whose runs this server keeps, touching no other key."""
        self.url = url
        self.shown_url = masked_url(url)
        """The URL as logs and errors show it (no password)."""
        self.client = connect(url)
        self.mode: str | None = None
        """The durability the Redis offers (``aof-always``, ``aof-everysec``), once started."""
        RedisEvents.__init__(self, self.client, logger, commit_interval=commit_interval, user=user)
        RedisRecords.__init__(self, self.client, self)
        self.init_leases(lease_ttl)
        self.init_kernels()
        self.init_tail()
        self.keep_s = max(0, round(event_retention))

    async def start(self) -> str:
        """Check the Redis keeps what it is given; its durability mode (logged)."""
        try:
            self.mode = await check_durable(self.client, self.shown_url)
            await self._check_keys()
        except StoreMisconfigured:
            raise
        except RedisError as error:
            raise StorageUnavailable(
                f"cannot reach the Redis store at {self.shown_url}: {error}",
                reason=f"the Redis store at {self.shown_url} is unreachable",
            ) from None
        self.log.info("neta: storing runs in Redis at %s (%s)", self.shown_url, self.mode)
        return self.mode

    async def _check_keys(self) -> None:
        """Refuse a Redis user that may not touch the keys this server needs (an ACL)."""
        needed = [OWNERS, USERS] if self.user is None else [UserKeys(self.user).owners]
        try:
            await self.client.exists(*needed)
        except NoPermissionError:
            if self.user is None:
                raise StoreMisconfigured(
                    f"the Redis user of {self.shown_url} may not read {OWNERS} and {USERS}, "
                    "which servers keeping every user's runs share; a server that keeps one "
                    "user's runs, with a Redis user limited to that user's keys, must say whose "
                    "(c.NetaApp.store_user, or NETA_STORE_USER)"
                ) from None
            raise StoreMisconfigured(
                f"the Redis user of {self.shown_url} may not use the keys of {self.user!r} "
                f"({UserKeys(self.user).prefix}*): check its ACL, or c.NetaApp.store_user"
            ) from None

    def close(self) -> None:
        """Write what is pending (waiting here: the server is stopping) and disconnect."""
        calls = self.pending_calls()
        hosted = self.stop_kernels()
        self.stop_heartbeat()
        self.stop_tails()
        self.stop()
        if calls or hosted:
            self._write_now(calls, hosted)
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().create_task(self.client.aclose())

    def _write_now(self, calls: list[tuple[list[str], list[str | int]]], hosted: list[str]) -> None:
        """The last writes (pending events, kernels hosted no more), waiting for each."""
        sync = redis.Redis.from_url(self.url, decode_responses=True)
        try:
            append = sync.register_script(APPEND)
            for keys, args in calls:
                append(keys=keys, args=args)
            drop = sync.register_script(DROP)
            for key in hosted:
                drop(keys=[key], args=[self.replica])
        except RedisError as error:
            self.log.error("neta: what was pending at shutdown was not saved: %s", error)
        finally:
            sync.close()

    def crash(self) -> None:
        """Stop as a killed process would: what is not written yet is lost."""
        self.stop_heartbeat()
        self.stop_kernels()
        self.stop_tails()
        self.stop()
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().create_task(self.client.aclose())
