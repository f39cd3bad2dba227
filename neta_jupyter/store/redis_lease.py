"""One writer per run across servers: leases on Redis, renewed by a heartbeat of their own.

A server that starts, resumes, retries or takes over a run first acquires its lease: a key
holding ``<replica>:<fence>`` that expires unless renewed, the fence counting the run's leases.
Every write of the run carries the token and the scripts refuse it once the token is not the
lease's (:mod:`.redis_log`), so a server that paused past its lease (a long GC, a partition, a
SIGSTOP) writes nothing after another took the run over. The heartbeat renews every lease this
server holds every third of the lease time, whatever the run is doing (a tool may run for many
lease times). When renewals fail for most of a lease time, the server stops its runs itself
rather than act on runs another may be taking over. A run whose owner's lease expired is found
by :meth:`RedisLeases.expired`, and so is a sub-agent still waiting for a slot of its batch (it
holds no lease of its own) whose parent's lease expired; the runtime's sweeper takes it over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

from .redis_conn import UserKeys
from .redis_log import RedisEvents

ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 0 then
  return false
end
local fence = redis.call('HINCRBY', KEYS[2], 'fence', 1)
local token = ARGV[1] .. ':' .. fence
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'owner', ARGV[1])
redis.call('HDEL', KEYS[2], 'stop')
return token
"""
"""``KEYS``: lease, run; ``ARGV``: replica, lease time in ms. The new token, or nil when the run
is held (or does not exist)."""

RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('HEXISTS', KEYS[2], 'stop') == 1 then
  redis.call('HDEL', KEYS[2], 'stop')
  return 2
end
return 1
"""
"""``KEYS``: lease, run; ``ARGV``: token, lease time in ms. 0: the lease is lost; 1: renewed;
2: renewed, and another server asks to terminate the run."""

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HDEL', KEYS[2], 'owner')
end
return 0
"""

STOP = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], 'stop', '1')
return 1
"""
"""``KEYS``: lease, run. 1: the run's owner is asked to terminate it; 0: nobody holds it."""

SELF_FENCE = 0.8
"""Share of the lease time without a renewal after which a server stops its runs itself."""


def new_replica() -> str:
    """A server's name in leases: its host, its pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class RedisLeases(RedisEvents):
    """Leases of runs (:class:`~neta_jupyter.store.contract.Leases`) on the events' Redis."""

    shared = True
    """Other servers may hold this store's runs."""

    def init_leases(self, lease_ttl: float) -> None:
        """Lease runs for ``lease_ttl`` seconds, as a replica of a random name."""
        self.replica = new_replica()
        self.lease_ttl = lease_ttl
        self.lease_ms = max(1, round(lease_ttl * 1000))
        self._stop_listeners: list[Callable[[str], None]] = []
        self._heartbeat: asyncio.Task[None] | None = None
        self._renewed = time.monotonic()

    def _lease_keys(self, user: UserKeys, request_id: str) -> list[str]:
        return [user.lease(request_id), user.run(request_id)]

    async def acquire(self, request_id: str) -> bool:
        """Take the run for this server; False when another holds it."""
        keys = self._lease_keys(await self.keys(request_id), request_id)
        token = await self._client.eval(ACQUIRE, 2, *keys, self.replica, self.lease_ms)
        if token is None:
            return False
        self._fenced.discard(request_id)
        self._tokens[request_id] = str(token)
        self._start_heartbeat()
        return True

    async def release(self, request_id: str) -> None:
        """Let go of a run taken but not activated (its lease, if this server holds it)."""
        token = self._tokens.pop(request_id, None)
        if token is not None:
            self.let_go(request_id)
            keys = self._lease_keys(await self.keys(request_id), request_id)
            await self._client.eval(RELEASE, 2, *keys, token)

    def holds(self, request_id: str) -> bool:
        """Whether this server holds the run's lease."""
        return request_id in self._tokens

    async def held_elsewhere(self, request_id: str) -> bool:
        """Whether another server holds the run's lease."""
        user = await self.keys(request_id)
        found = await self._client.get(user.lease(request_id))
        return found is not None and found != self._tokens.get(request_id)

    async def request_stop(self, request_id: str) -> bool:
        """Ask the run's owner to terminate it; False when nobody holds it."""
        keys = self._lease_keys(await self.keys(request_id), request_id)
        return bool(await self._client.eval(STOP, 2, *keys))

    def on_stop(self, listener: Callable[[str], None]) -> None:
        """Call ``listener`` with a run of this server another server asked to terminate."""
        self._stop_listeners.append(listener)

    async def expired(self) -> list[str]:
        """Runs left running by a server whose lease on them expired."""
        found: list[str] = []
        for principal in await self.users():
            user = UserKeys(principal)
            rids = await self._client.zrange(user.running, 0, -1)
            if not rids:
                continue
            pipe = self._client.pipeline(transaction=False)
            for rid in rids:
                pipe.hget(user.run(rid), "owner")
                pipe.exists(user.lease(rid))
            replies = await pipe.execute()
            unowned: list[str] = []
            for i, rid in enumerate(rids):
                owner, held = replies[2 * i], replies[2 * i + 1]
                if not held:
                    (found if owner else unowned).append(rid)
            found += await self._orphans(user, unowned)
        return found

    async def _orphans(self, user: UserKeys, unowned: list[str]) -> list[str]:
        """Of runs left running that no server holds or held, those whose parent run nobody holds.

        A sub-agent waiting for a slot of its batch holds no lease: the parent's batch starts
        it, so it waits exactly as long as the parent's lease lives. Once that lapsed (its
        server died) nobody would start it. A top-level run, or a crew's task (its parent is
        the crew, not a run), is never one of these.
        """
        if not unowned:
            return []
        pipe = self._client.pipeline(transaction=False)
        for rid in unowned:
            pipe.hget(user.run(rid), "rec")
        parents = [json.loads(rec or "{}").get("parent_request_id") for rec in await pipe.execute()]
        children = [(rid, p) for rid, p in zip(unowned, parents, strict=True) if p]
        if not children:
            return []
        pipe = self._client.pipeline(transaction=False)
        for _, parent in children:
            pipe.exists(user.run(parent))
            pipe.exists(user.lease(parent))
        replies = await pipe.execute()
        return [
            rid for i, (rid, _) in enumerate(children) if replies[2 * i] and not replies[2 * i + 1]
        ]

    # --- the heartbeat

    def _start_heartbeat(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._renewed = time.monotonic()
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        while not self._stopped:
            await asyncio.sleep(self.lease_ttl / 3)
            try:
                await self._renew()
                self._renewed = time.monotonic()
            except RedisError as error:
                if time.monotonic() - self._renewed > SELF_FENCE * self.lease_ttl:
                    self._self_fence(error)

    async def _renew(self) -> None:
        held = list(self._tokens.items())
        if not held:
            return
        pipe = self._client.pipeline(transaction=False)
        for rid, token in held:
            keys = self._lease_keys(await self.keys(rid), rid)
            pipe.eval(RENEW, 2, *keys, token, self.lease_ms)
        replies: list[Any] = await pipe.execute()
        for (rid, token), reply in zip(held, replies, strict=True):
            if self._tokens.get(rid) != token:
                continue  # released meanwhile
            if int(reply) == 0:
                self.log.warning("neta: run %s was taken over by another server", rid)
                self.fence_out(rid)
            elif int(reply) == 2:
                for listener in self._stop_listeners:
                    listener(rid)

    def _self_fence(self, error: RedisError) -> None:
        """No renewal for most of a lease time: stop every run before another takes them."""
        if self._tokens:
            self.log.error(
                "neta: the leases of %d run(s) could not be renewed (%s); stopping them",
                len(self._tokens),
                error,
            )
        for rid in list(self._tokens):
            self.fence_out(rid)

    def stop_heartbeat(self) -> None:
        """Renew nothing more (the server stops, or crashes)."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(RuntimeError):
                self._heartbeat = None
