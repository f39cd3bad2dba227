"""The events of the Redis backend: one stream per run, appended by one fenced script.

A stream's entry ids are ``0-(seq+1)`` (Redis refuses ``0-0``), so ``XRANGE`` reads exactly the
events after a seq. One writer task per process sends, per cycle, one call of the append script
(:mod:`.redis_scripts`) per stream holding everything queued since the last cycle (group commit,
like SQLite's): while a cycle is in flight the next one fills. A failed call is sent again as it
was, which the script accepts as a replay where it had been applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError

from .backlog import Backlog
from .contract import DurableListener, EventRow, HealthListener
from .health import Episode, StorageUnavailable
from .redis_conn import NOBODY, OWNERS, USERS, UserKeys
from .redis_scripts import (
    APPEND,
    CHUNK,
    NO_LEASE,
    RunUpdate,
    append_args,
    is_transient,
    script_keys,
)

Op = Callable[[Any], Awaitable[Any]]
"""A record write, given the client (replies decoded to str)."""


@dataclass(slots=True)
class Call:
    """One call of the append script: a stream's batch (or chunk of one), sent until written."""

    stream: str
    rows: list[EventRow]
    keys: list[str]
    args: list[str | int]
    done: bool = False
    releases: bool = False
    """It ends the run's activation (a status other than running): the lease goes with it."""


def resolve(futures: list[asyncio.Future[None]]) -> None:
    """Tell each of ``futures`` (not cancelled meanwhile) that what it waited for happened."""
    for fut in futures:
        if not fut.done():
            fut.set_result(None)


class RedisEvents:
    """:class:`~neta_jupyter.store.contract.EventBackend` on Redis streams."""

    def __init__(
        self,
        client: Redis,
        logger: logging.Logger | None = None,
        *,
        commit_interval: float = 0,
        user: str | None = None,
    ) -> None:
        # redis-py types every reply as bytes | str; this client always decodes them to str.
        self._client: Any = client
        self.user = user
        """The one user whose runs this process keeps (None: every user's)."""
        self.index = OWNERS if user is None else UserKeys(user).owners
        """The hash that says whose each id is: the user's own, or the one every user shares."""
        self._interval = commit_interval
        self.log = logger or logging.getLogger("neta_jupyter")
        self._sha: str | None = None
        self._tokens: dict[str, str] = {}
        """The lease token of each run this process holds (it writes them with it)."""
        self.lease_ms = 15_000
        """How long a lease lasts unless renewed (a write renews it too)."""
        self.keep_s = 0
        """Seconds an ended run's events are kept (0: forever); a live run's always are."""
        self._lost_listeners: list[Callable[[str], None]] = []
        self._owner: dict[str, str] = {}
        self._pending: dict[str, list[EventRow]] = {}
        self._queued = 0
        """Events in ``_pending``: each event's room check asks, and many runs may be pending."""
        self._updates: list[RunUpdate] = []
        self._retry: list[Call] = []
        """Calls of a failed cycle, sent again first and unchanged."""
        self._fenced: set[str] = set()
        """Streams whose batches the store refused (a gap, another writer's lease)."""
        self._waiters: list[asyncio.Future[None]] = []
        self._writable: list[asyncio.Future[None]] = []
        self._joined: list[asyncio.Future[None]] = []
        """Callers of :meth:`join`: told once their update is written or, if writes fail, kept."""
        self._listeners: list[DurableListener] = []
        self._health_listeners: list[HealthListener] = []
        self._lock = asyncio.Lock()
        self._sending = 0
        """Events in the calls of the cycle in flight."""
        self._backlog = Backlog()
        self._retiring: set[asyncio.Task[None]] = set()
        self._writer: asyncio.Task[None] | None = None
        self._episode = Episode()
        self._stopped = False

    # --- whose stream

    def token(self, stream: str) -> str:
        """The token this process writes ``stream`` with (``-``: it holds no lease on it)."""
        return self._tokens.get(stream, NO_LEASE)

    def read_here(self, stream: str, rows: list[EventRow]) -> None:
        """Told that ``rows`` of ``stream`` were written here (no tailer reads them again)."""

    def let_go(self, stream: str) -> None:
        """Told that this process writes ``stream`` no more (another may: a tailer reads it)."""

    def on_lost(self, listener: Callable[[str], None]) -> None:
        """Call ``listener`` with a run whose lease this process lost: it must write no more."""
        self._lost_listeners.append(listener)

    def fence_out(self, stream: str) -> None:
        """The lease on ``stream`` is lost: drop what is queued for it and write it no more."""
        self._fenced.add(stream)
        self._queued -= len(self._pending.pop(stream, ()))
        self._retry = [call for call in self._retry if call.stream != stream]
        self._backlog.moved(self.backlog())
        if self._tokens.pop(stream, None) is not None:
            self.let_go(stream)
            for listener in self._lost_listeners:
                listener(stream)

    def remember(self, stream: str, principal: str) -> None:
        """Say whose ``stream`` (a run's, a session's) is, as its record does."""
        self._owner[stream] = principal

    async def owner(self, stream: str) -> str:
        """The principal whose keys hold ``stream``."""
        found = self._owner.get(stream)
        if found is None and self.user is not None:
            return self.user  # everything this process touches is its user's
        if found is None:
            found = await self._client.hget(OWNERS, stream)
            # Not claimed by a record: its events are nobody's (a record made later still claims
            # it here through remember()).
            found = NOBODY if found is None else found
            self._owner[stream] = found
        return found

    async def keys(self, stream: str) -> UserKeys:
        """The keys of the user whose ``stream`` is."""
        return UserKeys(await self.owner(stream))

    def _owner_now(self, stream: str) -> UserKeys:
        """The keys of ``stream`` as far as this process knows them (no read)."""
        return UserKeys(self._owner.get(stream, self.user or NOBODY))

    async def users(self) -> list[str]:
        """Whose runs this process keeps: its one user's, or those of every user with records."""
        if self.user is not None:
            return [self.user]
        return sorted(await self._client.smembers(USERS))

    # --- reading

    async def last_seq(self, stream: str) -> int:
        """Seq of the stream's last durable event, -1 when it has none."""
        key = (await self.keys(stream)).stream(stream)
        top = await self._client.xrevrange(key, "+", "-", count=1)
        return int(top[0][0].rsplit("-", 1)[1]) - 1 if top else -1

    async def read_after(self, stream: str, after: int, limit: int) -> list[EventRow]:
        """Up to ``limit`` durable events with seq > ``after``, in order."""
        key = (await self.keys(stream)).stream(stream)
        found = await self._client.xrange(key, f"0-{max(after, -1) + 2}", "+", count=limit)
        return [(int(eid.rsplit("-", 1)[1]) - 1, f["t"], f["p"]) for eid, f in found]

    # --- queueing

    def queue(self, stream: str, rows: list[EventRow]) -> None:
        """Hold ``rows`` for the writer's next cycle."""
        if self._stopped:
            raise RuntimeError("the store is closed")
        self._pending.setdefault(stream, []).extend(rows)
        self._queued += len(rows)
        self._schedule()

    def join(self, update: RunUpdate) -> asyncio.Future[None]:
        """Carry ``update`` with the events queued so far; resolves once written or kept."""
        self._updates.append(update)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._episode.reason is not None:
            fut.set_result(None)  # kept: written with the events once writes work
        else:
            self._joined.append(fut)
            self._schedule()
        return fut

    def durable(self) -> asyncio.Future[None]:
        """Resolves once everything queued so far is durable."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not (self._pending or self._updates or self._retry or self._lock.locked()):
            fut.set_result(None)
        else:
            self._waiters.append(fut)
            self._schedule()
        return fut

    def backlog(self) -> int:
        """Events queued here and not yet durable (nor refused)."""
        retried = sum(len(call.rows) for call in self._retry if not call.done)
        return self._queued + self._sending + retried

    def retire(self, stream: str) -> None:
        """The stream expires the retention after what is queued for it is written."""
        if self.keep_s <= 0 or self._stopped:
            return
        with contextlib.suppress(RuntimeError):  # no loop (a last write at close): kept
            task = asyncio.get_running_loop().create_task(self._retire(stream, self.keep_s))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)

    async def _retire(self, stream: str, keep: int) -> None:
        key = (await self.keys(stream)).stream(stream)
        try:
            await self.durable()
            await self.now(lambda client: client.expire(key, keep))
        except (RedisError, StorageUnavailable) as error:
            self.log.warning("neta: the events of %s are kept for good: %s", stream, error)

    def room(self) -> asyncio.Future[None] | None:
        """``None`` while the writer keeps up; else resolves once it has caught up enough.

        A run can produce events far faster than a Redis that fsyncs every write takes them:
        without this wait the difference piles up in this process's memory.
        """
        return self._backlog.room(self.backlog())

    def on_durable(self, listener: DurableListener) -> None:
        """Call ``listener`` with the events each write made durable."""
        self._listeners.append(listener)

    def on_health(self, listener: HealthListener) -> None:
        """Call ``listener`` when writes start failing and when they work again."""
        self._health_listeners.append(listener)

    # --- writing

    def _schedule(self) -> None:
        if self._stopped or (self._writer is not None and not self._writer.done()):
            return
        with contextlib.suppress(RuntimeError):  # no loop: close() writes what is pending
            self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    async def _write_loop(self) -> None:
        if self._interval > 0:
            await asyncio.sleep(self._interval)  # group commit: let a burst gather first
        while not self._stopped and (
            self._pending or self._updates or self._waiters or self._joined or self._retry
        ):
            async with self._lock:
                written = await self._cycle()
            self._backlog.moved(self.backlog())
            if not written:
                await asyncio.sleep(self._episode.delay)

    async def _cycle(self) -> bool:
        """One write of everything pending; whether it worked (what failed is kept).

        Calls that failed are sent again as they were, before anything newer: a batch whose
        reply was lost is then a replay the script accepts, never a batch it refuses.
        """
        retry, self._retry = self._retry, []
        pending, queued = self._pending, self._queued
        self._pending, self._queued = {}, 0
        updates, self._updates = self._updates, []
        waiters, self._waiters = self._waiters, []
        joined, self._joined = self._joined, []
        self._sending = queued + sum(len(call.rows) for call in retry)
        try:
            calls = retry + await self._calls(pending, updates)
            error = await self._send(calls)
        finally:
            self._sending = 0
        for call in calls:
            if call.done and call.rows:
                for listener in self._listeners:
                    listener(call.stream, call.rows)
                self.read_here(call.stream, call.rows)
        if error is not None:
            self._retry = [call for call in calls if not call.done] + self._retry
            self._waiters = waiters + self._waiters
            resolve(joined)  # kept: written with the events once writes work
            self._failed(error)
            return False
        self._recovered()
        resolve(waiters + joined)
        return True

    async def _calls(
        self, pending: dict[str, list[EventRow]], updates: list[RunUpdate]
    ) -> list[Call]:
        """A script call per stream (and chunk), the run update on its last; then the rest."""
        last_update = {u.request_id: u for u in updates}
        calls: list[Call] = []
        for stream, rows in pending.items():
            if stream in self._fenced:
                continue  # refused before: writing on would corrupt the run's log
            keys = script_keys(await self.keys(stream), stream)
            for start in range(0, len(rows), CHUNK):
                chunk = rows[start : start + CHUNK]
                update = last_update.pop(stream, None) if start + CHUNK >= len(rows) else None
                calls.append(self._call(stream, chunk, keys, update))
        for rid, update in last_update.items():
            calls.append(self._call(rid, [], script_keys(await self.keys(rid), rid), update))
        return calls

    def _call(
        self, stream: str, rows: list[EventRow], keys: list[str], update: RunUpdate | None
    ) -> Call:
        args = append_args(self.token(stream), rows, update, self.lease_ms, self.keep_s)
        releases = update is not None and update.status != "running"
        return Call(stream, rows, keys, args, releases=releases)

    def _released(self, call: Call) -> None:
        """A written call that ended its run's activation: the lease it held is gone."""
        if call.releases and self._tokens.get(call.stream) == call.args[0]:
            del self._tokens[call.stream]
            self.let_go(call.stream)

    async def _send(self, calls: list[Call]) -> RedisError | None:
        """Send ``calls`` in one pipeline, marking those written; why the rest failed, if so."""
        if not calls:
            return None
        try:
            if self._sha is None:
                self._sha = str(await self._client.script_load(APPEND))
            pipe = self._client.pipeline(transaction=False)
            for call in calls:
                pipe.evalsha(self._sha, len(call.keys), *call.keys, *call.args)
            replies = await pipe.execute(raise_on_error=False)
        except RedisError as error:
            return error  # no reply known: every call is sent again (a replay where applied)
        failed: RedisError | None = None
        broken: set[str] = set()
        for call, reply in zip(calls, replies, strict=True):
            if call.stream in broken:
                continue  # after a failed chunk of its stream, the next ones are sent again
            if not isinstance(reply, Exception):
                call.done = True
                self._released(call)
            elif is_transient(reply):
                if isinstance(reply, NoScriptError) or str(reply).startswith("NOSCRIPT"):
                    self._sha = None  # the Redis restarted without its scripts
                broken.add(call.stream)
                failed = reply if isinstance(reply, RedisError) else RedisError(str(reply))
            else:
                self._refuse(call, reply)
        return failed

    def _refuse(self, call: Call, error: Exception) -> None:
        """A gap or another writer's lease: this stream is written no more by this process."""
        call.done, call.rows = True, []  # never durable: no follower is told of them
        self.log.error("neta: the store refused the events of %s: %s", call.stream, error)
        if call.args[0] == self.token(call.stream):
            self.fence_out(call.stream)  # else written under a lease since let go of

    def _failed(self, error: Exception) -> None:
        reason = f"the Redis store refuses writes: {error}"
        if self._episode.failed(reason):
            self.log.warning("neta: %s; keeping what is pending", reason)
            for listener in self._health_listeners:
                listener(reason)

    def _recovered(self) -> None:
        lasted = self._episode.recovered()
        if lasted is None:
            return
        self.log.warning("neta: the Redis store takes writes again after %.1f s", lasted)
        for listener in self._health_listeners:
            listener(None)
        writable, self._writable = self._writable, []
        resolve(writable)

    async def now(self, op: Op) -> Any:
        """Write what is pending, then ``op``: in that order, refused while writes fail."""
        if self._stopped:
            raise RuntimeError("the store is closed")
        self.refuse_while_failing()
        async with self._lock:
            if self._pending or self._updates or self._retry:
                written = await self._cycle()
                self._backlog.moved(self.backlog())
                if not written:
                    self.refuse_while_failing()
            try:
                return await op(self._client)
            except RedisError as error:
                if not is_transient(error):
                    raise  # a refusal: the store itself is fine
                self._failed(error)
                self.refuse_while_failing()
                raise

    def refuse_while_failing(self) -> None:
        """Raise :class:`StorageUnavailable` while writes fail."""
        reason = self._episode.reason
        if reason is not None:
            raise StorageUnavailable(
                f"the server cannot save anything now: {reason}; try again once it can",
                reason=reason,
            )

    @property
    def unavailable(self) -> str | None:
        """Why writes fail, while they do."""
        return self._episode.reason

    def writable(self) -> asyncio.Future[None]:
        """Resolves once writes work (at once when they do)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._episode.reason is None:
            fut.set_result(None)
        else:
            self._writable.append(fut)
        return fut

    def commit(self) -> None:
        """Start writing what is pending (no waiting)."""
        self._schedule()

    def pending_calls(self) -> list[tuple[list[str], list[str | int]]]:
        """The script calls that would write what is pending, for a last write at close."""
        calls = [(call.keys, call.args) for call in self._retry if not call.done]
        last_update = {u.request_id: u for u in self._updates}
        for stream, rows in self._pending.items():
            if stream in self._fenced:
                continue
            keys = script_keys(self._owner_now(stream), stream)
            update = last_update.pop(stream, None)
            args = append_args(self.token(stream), rows, update, self.lease_ms, self.keep_s)
            calls.append((keys, args))
        for rid, update in last_update.items():
            keys = script_keys(self._owner_now(rid), rid)
            args = append_args(self.token(rid), [], update, self.lease_ms, self.keep_s)
            calls.append((keys, args))
        return calls

    def stop(self) -> None:
        """Write nothing more: what is pending is dropped (a crash) unless written before."""
        self._stopped = True
        if self._writer is not None:
            self._writer.cancel()
        self._pending, self._updates, self._retry, self._queued = {}, [], [], 0
        self._backlog.stop()
        for fut in self._waiters + self._writable + self._joined:
            fut.cancel()
