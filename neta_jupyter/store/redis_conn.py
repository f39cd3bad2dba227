"""Reaching a Redis store: its URL (with the password kept out of sight), its keys, its checks.

Every key of a user shares one hash tag, ``{u:<principal>}``, so a user's events and records sit
in one slot and one script can change them together, on one Redis or a Redis Cluster. Callers
name records by id alone, so an index says which user an id (a run, a session, an entry, an
input, an attachment's path) belongs to:

* a server that keeps the runs of one user only (``c.NetaApp.store_user``, a JupyterHub
  single-user server) keeps that index among the user's own keys (:attr:`UserKeys.owners`) and
  touches no other key, so a Redis user limited to ``neta:{u:<user>}:*`` is all it needs;
* servers that keep everyone's runs share one index, ``neta:owners``, and ``neta:users``, the set
  of users (one Redis user for the whole deployment).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis

from .health import StorageError

OWNERS = "neta:owners"
"""Hash shared by every user: ``<rid>``, ``<sid>``, ``e:<eid>``, ``i:<input_id>``, ``a:<path>``,
``ed:<edit_id>`` → the principal (for entries ``<principal> <sid>``). Only where one Redis user
serves everyone."""
USERS = "neta:users"
"""Set of the principals that have records (to list every user's runs); shared like
:data:`OWNERS`."""
NOBODY = "_"
"""The principal of a stream no record claims (a stream appended before any run names it)."""

_KEPT = re.compile(r"[A-Za-z0-9._@-]")


@functools.lru_cache(maxsize=4096)  # every key names its user: each write would escape it anew
def user_tag(principal: str) -> str:
    """The principal, escaped so that ``{``, ``}``, ``*``, ``?`` and ``[`` never reach a key."""
    return "".join(c if _KEPT.fullmatch(c) else f"%{ord(c):x}" for c in principal)


@dataclass(frozen=True, slots=True)
class UserKeys:
    """The keys of one user's records and streams."""

    principal: str

    @property
    def prefix(self) -> str:
        """What every key of this user starts with (its hash tag)."""
        return f"neta:{{u:{user_tag(self.principal)}}}:"

    @property
    def owners(self) -> str:
        """The user's own index of ids, as :data:`OWNERS` (a server that keeps one user's runs)."""
        return f"{self.prefix}owners"

    def stream(self, stream: str) -> str:
        """A run's (or a session's) events: entry id ``0-(seq+1)``."""
        return f"{self.prefix}ev:{stream}"

    def lease(self, stream: str) -> str:
        """Who may write a run's events: ``<replica>:<fence>``, expiring unless renewed.

        Absent: nobody holds the run (suspended, ended, or its owner died), and only a writer
        holding no lease writes it (a session's tree, a suspended run ended).
        """
        return f"{self.prefix}lease:{stream}"

    @property
    def running(self) -> str:
        """Zset of the user's runs whose status is ``running`` (what a sweeper looks through)."""
        return f"{self.prefix}running"

    def wake(self, replica: str) -> str:
        """Stream a replica adds to so that its blocked read of this user's streams starts again."""
        return f"{self.prefix}wake:{replica}"

    def run(self, request_id: str) -> str:
        """A run's hash.

        ``rec`` (its fixed fields, JSON), ``status``, ``state`` (JSON); while a replica holds it
        ``owner``; ``fence`` (the count of its leases), ``stop`` (asked to terminate).
        """
        return f"{self.prefix}run:{request_id}"

    @property
    def runs(self) -> str:
        """Zset of the user's runs by creation time."""
        return f"{self.prefix}runs"

    def session(self, session_id: str) -> str:
        """A session: one field per attribute, each JSON."""
        return f"{self.prefix}session:{session_id}"

    @property
    def sessions(self) -> str:
        """Zset of the user's sessions by creation time."""
        return f"{self.prefix}sessions"

    @property
    def session_names(self) -> str:
        """Hash: session name → session id (names are unique per user)."""
        return f"{self.prefix}session-names"

    def entries(self, session_id: str) -> str:
        """Hash: entry id → entry (JSON)."""
        return f"{self.prefix}session:{session_id}:entries"

    def entry_order(self, session_id: str) -> str:
        """List of the session's entry ids in the order they were added."""
        return f"{self.prefix}session:{session_id}:order"

    @property
    def inputs(self) -> str:
        """Hash: input id → ``[request_id, content, consumed]`` (JSON)."""
        return f"{self.prefix}inputs"

    def run_inputs(self, request_id: str) -> str:
        """List of a run's input ids, oldest first."""
        return f"{self.prefix}run:{request_id}:inputs"

    @property
    def attachments(self) -> str:
        """Hash: virtual path → attachment record (JSON); the bytes stay on disk."""
        return f"{self.prefix}attachments"

    @property
    def notebook_edits(self) -> str:
        """Hash: edit id → notebook edit (JSON)."""
        return f"{self.prefix}notebook-edits"

    def run_edits(self, request_id: str) -> str:
        """List of a run's notebook edit ids, oldest first."""
        return f"{self.prefix}run:{request_id}:edits"


POOL_SIZE = 100
"""Connections to Redis per server unless the URL says (``?max_connections=N``)."""
POOL_WAIT = 30.0
"""Seconds a command waits for a free connection before it fails as a storage error."""


def connect(url: str) -> Redis:
    """A client for ``url`` (hiredis parses replies when installed).

    A command waits for a free connection of the pool: redis-py's default pool fails the one
    past its size at once, so a hundred followers catching up at the same moment made a 500.
    """
    pool = BlockingConnectionPool.from_url(
        url,
        decode_responses=True,
        health_check_interval=30,
        max_connections=POOL_SIZE,
        timeout=POOL_WAIT,
    )
    return Redis(connection_pool=pool)


class StoreMisconfigured(StorageError):
    """The Redis the store is pointed at would lose what it is given."""

    status = 503
    code = "STORAGE_MISCONFIGURED"


class UserNotServed(StorageError):
    """A request of another user reached a server that keeps one user's runs only."""

    status = 403
    code = "USER_NOT_SERVED"


def served(only: str | None, principal: str) -> UserKeys:
    """The keys of ``principal``; refused when the server keeps only ``only``'s runs."""
    if only is not None and principal != only:
        raise UserNotServed(
            f"this server keeps the runs of {only!r} only (c.NetaApp.store_user): runs of "
            f"{principal!r} are kept by their own server"
        )
    return UserKeys(principal)


DURABILITY = {"always": "aof-always", "everysec": "aof-everysec"}


async def check_durable(client: Redis, shown_url: str) -> str:
    """The durability mode of the Redis behind ``client``; refuses one that would lose events."""
    persistence: dict[str, Any] = await client.info("persistence")
    memory: dict[str, Any] = await client.info("memory")
    if str(persistence.get("aof_enabled", "0")) != "1":
        raise StoreMisconfigured(
            f"the Redis at {shown_url} has its append-only file off, so a restart of it would "
            "lose runs; turn it on (`CONFIG SET appendonly yes`, and `appendonly yes` in "
            "redis.conf)"
        )
    policy = str(memory.get("maxmemory_policy", "noeviction"))
    if policy != "noeviction":
        raise StoreMisconfigured(
            f"the Redis at {shown_url} evicts keys when full (maxmemory-policy {policy}), so "
            "it could drop runs; set `CONFIG SET maxmemory-policy noeviction` (and in "
            "redis.conf)"
        )
    try:
        found = await client.config_get("appendfsync")
    except Exception:  # managed services often refuse CONFIG
        return "aof (appendfsync unknown: CONFIG GET is refused)"
    mode = str(found.get("appendfsync", ""))
    return DURABILITY.get(mode, f"aof-{mode or 'unknown'}")
