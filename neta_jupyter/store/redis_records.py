"""The records of the Redis backend: hashes, sorted sets and lists under each user's hash tag.

Every write that must be whole (a session created once per name, entries with the leaf they
move, usage added) is one ``MULTI`` or one script in the user's slot. Each write first writes the
events queued before it (:meth:`RedisEvents.now`), so a record is never durable before them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from .contract import SessionChanges
from .health import LeaseLost
from .records import (
    AttachmentRecord,
    Entry,
    RunRecord,
    RunStatus,
    SessionRecord,
    run_matches,
)
from .redis_conn import NOBODY, USERS, UserKeys, served
from .redis_log import RedisEvents
from .redis_scripts import UPDATE_RUN, RunUpdate, script_keys

_RUNS_PER_PAGE = 256
"""Runs read per round trip while looking for the newest that match."""

CREATE_SESSION = """
local found = redis.call('HGET', KEYS[1], ARGV[1])
if found then return found end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], unpack(ARGV, 4))
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
return ARGV[2]
"""
"""``KEYS``: session names, the session, the sessions zset; ``ARGV``: name, id, created, then
the session's fields and values. Replies the id of the session of that name."""

SESSION_FIELDS = (
    "principal", "name", "created", "leaf_entry_id", "input_tokens", "output_tokens",
    "has_unknown_usage", "always_allow", "todo", "thinking_level",
)  # fmt: skip


def dumps(value: Any) -> str:
    """JSON as the records keep it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def run_from(request_id: str, found: dict[str, str]) -> RunRecord | None:
    """A run from its hash."""
    if not found:
        return None
    fixed = json.loads(found["rec"])
    return RunRecord(
        request_id=request_id,
        status=cast(RunStatus, found["status"]),
        state=json.loads(found["state"]),
        **fixed,
    )


def session_from(session_id: str, found: dict[str, str]) -> SessionRecord | None:
    """A session from its hash (each field JSON)."""
    if not found:
        return None
    return SessionRecord(session_id=session_id, **{k: json.loads(v) for k, v in found.items()})


def entry_from(text: str | None) -> Entry | None:
    """An entry from its JSON."""
    return None if text is None else Entry(**json.loads(text))


class RedisRecords:
    """:class:`~neta_jupyter.store.contract.RecordBackend` on Redis."""

    def __init__(self, client: Redis, events: RedisEvents) -> None:
        self._client: Any = client  # replies decoded to str (see RedisEvents)
        self._events = events
        self._create_session = client.register_script(CREATE_SESSION)
        self._update_run = client.register_script(UPDATE_RUN)

    async def _user(self, field: str) -> tuple[str, str]:
        """``(principal, rest)`` of what the owners' hash says of ``field``."""
        found = await self._client.hget(self._events.index, field)
        principal, _, rest = (found or self._events.user or NOBODY).partition(" ")
        return principal, rest

    def _served(self, principal: str) -> UserKeys:
        """The keys of ``principal``, whose records this server may keep."""
        return served(self._events.user, principal)

    async def _claim(self, client: Any, principal: str, owned: dict[str, str]) -> None:
        """Say whose the ids are (and, where users share the index, that the user exists)."""
        await client.hset(self._events.index, mapping=owned)
        if self._events.user is None:
            await client.sadd(USERS, principal)

    # --- runs

    async def insert_run(self, run: RunRecord) -> None:
        """Store a new run (first whose it is, then the run)."""
        user = self._served(run.principal)
        fixed = dataclasses.asdict(run)
        for name in ("request_id", "status", "state"):
            del fixed[name]
        self._events.remember(run.request_id, run.principal)

        async def write(client: Any) -> None:
            await self._claim(client, run.principal, {run.request_id: run.principal})
            pipe = client.pipeline(transaction=True)
            pipe.hset(
                user.run(run.request_id),
                mapping={"rec": dumps(fixed), "status": run.status, "state": dumps(run.state)},
            )
            pipe.zadd(user.runs, {run.request_id: run.created})
            if run.status == "running":
                pipe.zadd(user.running, {run.request_id: 0})
            await pipe.execute()

        await self._events.now(write)

    async def update_run(
        self, request_id: str, status: RunStatus, state: dict[str, Any], *, with_events: bool
    ) -> None:
        """Set a run's status and state (with the events queued before, in one script)."""
        update = RunUpdate(request_id, status, dumps(state))
        if with_events:
            await self._events.join(update)
            return
        keys = script_keys(await self._events.keys(request_id), request_id)

        async def write(client: Any) -> None:
            # Fenced like the run's events: a replica that lost the run cannot move it.
            token = self._events.token(request_id)
            args: list[str | int] = [token, status, update.state, request_id, self._events.keep_s]
            try:
                await self._update_run(keys=keys, args=args, client=client)
            except ResponseError as error:
                if not str(error).startswith("FENCED"):
                    raise
                self._events.fence_out(request_id)
                raise LeaseLost(f"run {request_id} is written by another server") from None

        await self._events.now(write)

    async def get_run(self, request_id: str) -> RunRecord | None:
        """The run, if it exists."""
        user = await self._events.keys(request_id)
        return run_from(request_id, await self._client.hgetall(user.run(request_id)))

    async def find_runs(
        self,
        *,
        principal: str | None,
        session_id: str | None,
        status: RunStatus | None,
        parent_request_id: str | None,
        limit: int,
    ) -> list[RunRecord]:
        """Runs matching every filter given, newest first."""
        filters = functools.partial(
            run_matches,
            principal=principal,
            session_id=session_id,
            status=status,
            parent_request_id=parent_request_id,
        )
        users = [principal] if principal is not None else await self._events.users()
        if self._events.user is not None and principal not in (None, self._events.user):
            return []  # another user's runs are not kept here
        runs: list[RunRecord] = []
        for who in users:
            runs += await self._newest(UserKeys(who), limit, filters)
        # Each user's newest: the newest of them all are among them.
        runs.sort(key=lambda run: run.created, reverse=True)
        return runs[:limit]

    async def _newest(
        self, user: UserKeys, limit: int, wanted: Callable[[RunRecord], bool]
    ) -> list[RunRecord]:
        """The user's newest ``wanted`` runs, at most ``limit``.

        Read a page at a time, newest first (the index is ordered by creation), so a user with
        years of runs costs what the answer needs, not all of them.
        """
        page = max(limit, _RUNS_PER_PAGE)
        found: list[RunRecord] = []
        start = 0
        while len(found) < limit:
            rids = await self._client.zrevrange(user.runs, start, start + page - 1)
            found += [run for run in await self._read_runs(user, rids) if wanted(run)]
            if len(rids) < page:
                break
            start += page
        return found[:limit]

    async def _read_runs(self, user: UserKeys, rids: list[str]) -> list[RunRecord]:
        """The runs named, read in one round trip."""
        pipe = self._client.pipeline(transaction=False)
        for rid in rids:
            pipe.hgetall(user.run(rid))
        found = [
            run_from(rid, fields) for rid, fields in zip(rids, await pipe.execute(), strict=True)
        ]
        return [run for run in found if run is not None]

    # --- sessions

    async def insert_session(self, session: SessionRecord) -> SessionRecord:
        """Store ``session``, unless its principal has one of that name: then that one."""
        user = self._served(session.principal)
        fields = {name: dumps(getattr(session, name)) for name in SESSION_FIELDS}
        flat = [part for pair in fields.items() for part in pair]

        async def write(client: Any) -> str:
            await self._claim(client, session.principal, {session.session_id: session.principal})
            keys = [user.session_names, user.session(session.session_id), user.sessions]
            args: list[str | float] = [session.name, session.session_id, session.created, *flat]
            return str(await self._create_session(keys=keys, args=args, client=client))

        session_id = await self._events.now(write)
        self._events.remember(session_id, session.principal)
        found = await self.get_session(session_id)
        assert found is not None
        return found

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, if it exists."""
        user = await self._events.keys(session_id)
        return session_from(session_id, await self._client.hgetall(user.session(session_id)))

    async def find_sessions(self, principal: str) -> list[SessionRecord]:
        """The principal's sessions, newest first."""
        if self._events.user not in (None, principal):
            return []  # another user's sessions are not kept here
        user = UserKeys(principal)
        found = []
        for sid in await self._client.zrevrange(user.sessions, 0, -1):
            session = session_from(sid, await self._client.hgetall(user.session(sid)))
            if session is not None:
                found.append(session)
        return found

    async def update_session(self, session_id: str, changes: SessionChanges) -> None:
        """Set some of a session's fields (each field its own, so no read is needed)."""
        user = await self._events.keys(session_id)
        mapping = {name: dumps(value) for name, value in changes.items()}

        async def write(client: Any) -> None:
            if mapping and await client.exists(user.session(session_id)):
                await client.hset(user.session(session_id), mapping=mapping)

        await self._events.now(write)

    async def add_usage(
        self, session_id: str, inputs: int, outputs: int, unknown: bool
    ) -> SessionRecord | None:
        """Add a turn's tokens to the session's totals, in one transaction; the session after."""
        user = await self._events.keys(session_id)
        key = user.session(session_id)

        async def write(client: Any) -> None:
            if not await client.exists(key):
                return
            pipe = client.pipeline(transaction=True)
            pipe.hincrby(key, "input_tokens", inputs)
            pipe.hincrby(key, "output_tokens", outputs)
            if unknown:
                pipe.hset(key, "has_unknown_usage", "true")
            await pipe.execute()

        await self._events.now(write)
        return await self.get_session(session_id)

    # --- the tree

    async def insert_entries(
        self, session_id: str, entries: list[Entry], *, move_leaf: bool
    ) -> None:
        """Add entries to the tree (the last one its leaf with ``move_leaf``), together."""
        user = await self._events.keys(session_id)
        owned = {f"e:{e.entry_id}": f"{user.principal} {session_id}" for e in entries}
        texts = {e.entry_id: dumps(dataclasses.asdict(e)) for e in entries}

        async def write(client: Any) -> None:
            await client.hset(self._events.index, mapping=owned)
            pipe = client.pipeline(transaction=True)
            pipe.hset(user.entries(session_id), mapping=texts)
            pipe.rpush(user.entry_order(session_id), *texts)
            if move_leaf:
                pipe.hset(user.session(session_id), "leaf_entry_id", dumps(entries[-1].entry_id))
            await pipe.execute()

        await self._events.now(write)

    async def update_entry(self, entry_id: str, message: dict[str, Any]) -> None:
        """Replace an entry's message."""
        entry = await self.get_entry(entry_id)
        if entry is None:
            return
        entry.message = message
        user = UserKeys((await self._user(f"e:{entry_id}"))[0])
        text = dumps(dataclasses.asdict(entry))

        async def write(client: Any) -> None:
            await client.hset(user.entries(entry.session_id), entry_id, text)

        await self._events.now(write)

    async def get_entry(self, entry_id: str) -> Entry | None:
        """One entry."""
        principal, session_id = await self._user(f"e:{entry_id}")
        if not session_id:
            return None
        return entry_from(
            await self._client.hget(UserKeys(principal).entries(session_id), entry_id)
        )

    async def session_entries(self, session_id: str) -> list[Entry]:
        """Every entry of the session's tree, in the order they were added."""
        user = await self._events.keys(session_id)
        order = await self._client.lrange(user.entry_order(session_id), 0, -1)
        if not order:
            return []
        texts = await self._client.hmget(user.entries(session_id), order)
        return [entry for entry in map(entry_from, texts) if entry is not None]

    # --- supplementary inputs

    async def insert_input(self, input_id: str, request_id: str, content: str) -> None:
        """Queue input for a run."""
        user = await self._events.keys(request_id)

        async def write(client: Any) -> None:
            await client.hset(self._events.index, f"i:{input_id}", user.principal)
            pipe = client.pipeline(transaction=True)
            pipe.hset(user.inputs, input_id, dumps([request_id, content, False]))
            pipe.rpush(user.run_inputs(request_id), input_id)
            await pipe.execute()

        await self._events.now(write)

    async def pending_inputs(self, request_id: str) -> list[tuple[str, str]]:
        """The run's inputs not yet consumed, oldest first."""
        user = await self._events.keys(request_id)
        ids = await self._client.lrange(user.run_inputs(request_id), 0, -1)
        if not ids:
            return []
        found = []
        for input_id, text in zip(ids, await self._client.hmget(user.inputs, ids), strict=True):
            if text is not None and not json.loads(text)[2]:
                found.append((input_id, json.loads(text)[1]))
        return found

    async def consume_input(self, input_id: str) -> None:
        """Mark an input consumed."""
        user = UserKeys((await self._user(f"i:{input_id}"))[0])
        text = await self._client.hget(user.inputs, input_id)
        if text is None:
            return
        request_id, content, _ = json.loads(text)

        async def write(client: Any) -> None:
            await client.hset(user.inputs, input_id, dumps([request_id, content, True]))

        await self._events.now(write)

    # --- attachments (their records; the bytes stay on disk)

    async def put_attachment(self, record: AttachmentRecord) -> None:
        """Store an attachment's record (replacing one at the same virtual path)."""
        user = self._served(record.principal)
        text = dumps(dataclasses.asdict(record))

        async def write(client: Any) -> None:
            await client.hset(self._events.index, f"a:{record.virtual_path}", record.principal)
            await client.hset(user.attachments, record.virtual_path, text)

        await self._events.now(write)

    async def get_attachment(self, virtual_path: str) -> AttachmentRecord | None:
        """The attachment stored at ``virtual_path``."""
        user = UserKeys((await self._user(f"a:{virtual_path}"))[0])
        text = await self._client.hget(user.attachments, virtual_path)
        return None if text is None else AttachmentRecord(**json.loads(text))

    # --- notebook edits (kept under the user of their run)

    async def put_notebook_edit(self, edit_id: str, request_id: str, body: dict[str, Any]) -> None:
        """Store a notebook edit (replacing the one with the same id, keeping its place)."""
        user = UserKeys((await self._user(request_id))[0])

        async def write(client: Any) -> None:
            await client.hset(self._events.index, f"ed:{edit_id}", user.principal)
            if await client.hsetnx(user.notebook_edits, edit_id, dumps(body)):
                await client.rpush(user.run_edits(request_id), edit_id)
            else:
                await client.hset(user.notebook_edits, edit_id, dumps(body))

        await self._events.now(write)

    async def notebook_edits(self, request_id: str) -> list[dict[str, Any]]:
        """The run's notebook edits, oldest first."""
        user = UserKeys((await self._user(request_id))[0])
        ids = await self._client.lrange(user.run_edits(request_id), 0, -1)
        texts = await self._client.hmget(user.notebook_edits, ids) if ids else []
        return [json.loads(t) for t in texts if t is not None]

    async def get_notebook_edit(self, edit_id: str) -> dict[str, Any] | None:
        """One notebook edit."""
        user = UserKeys((await self._user(f"ed:{edit_id}"))[0])
        text = await self._client.hget(user.notebook_edits, edit_id)
        return None if text is None else dict(json.loads(text))
