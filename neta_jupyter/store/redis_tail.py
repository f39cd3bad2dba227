"""Following runs another server writes: one blocked ``XREAD`` per user per server.

A follower here of a run written elsewhere gets its events from this tailer: for each user with
streams followed here, one task reads every such stream in one ``XREAD BLOCK`` from where this
server has them, and hands what it reads to the same in-process fan-out local writes feed
(:class:`~neta_jupyter.store.fanout.Fanout`). So one read per batch per server serves every
follower, and slow followers behave as with local runs. A stream followed anew is added by
waking the blocked read (``XADD`` to this server's wake stream of that user), never by a second
read. A stream this server holds the lease of is written here alone, and local writes feed the
fan-out already: it is left out of the read (reading back each event written would cost as much
again) until the server lets it go (:meth:`RedisTail.let_go`), and the read goes on from the last
event written here. One taken while the read is blocked may still reach the fan-out twice; it
keeps the first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from redis.exceptions import RedisError

from .contract import EventRow
from .health import FIRST_RETRY, LAST_RETRY
from .redis_conn import UserKeys
from .redis_log import RedisEvents

BLOCK_MS = 5000
"""Longest wait of one read: it is issued again after (and whenever a stream is added)."""
COUNT = 2048
"""Events per stream per read."""
WAKE_LEN = 100
"""Entries a wake stream keeps (they are signals, never state)."""

RemoteListener = Callable[[str, list[EventRow]], None]


def seq_of(entry_id: str) -> int:
    """The seq of the event of stream entry ``entry_id`` (``0-(seq+1)``)."""
    return int(entry_id.rsplit("-", 1)[1]) - 1


class RedisTail(RedisEvents):
    """The tailers of one server: a task per user whose streams are followed here."""

    replica: str

    def init_tail(self) -> None:
        """No stream followed yet."""
        self._watched: dict[str, dict[str, int]] = {}
        """Per principal: stream → seq of the last event read of it."""
        self._tailers: dict[str, asyncio.Task[None]] = {}
        self._remote: list[RemoteListener] = []
        self._waking: set[asyncio.Task[str]] = set()

    def on_remote(self, listener: RemoteListener) -> None:
        """Call ``listener`` with the events read of each followed stream (maybe seen before)."""
        self._remote.append(listener)

    async def watch(self, stream: str, after: int) -> None:
        """Read ``stream``'s events after seq ``after`` as they become durable, wherever written."""
        user = await self.keys(stream)
        watched = self._watched.setdefault(user.principal, {})
        known = watched.get(stream)
        watched[stream] = after if known is None else max(known, after)
        tailer = self._tailers.get(user.principal)
        if tailer is None or tailer.done():
            self._tailers[user.principal] = asyncio.get_running_loop().create_task(
                self._tail(user), name=f"neta-tail-{user.principal}"
            )
        elif known is None:
            await self._wake(user)

    def unwatch(self, stream: str) -> None:
        """Read ``stream`` no more (no follower here needs it)."""
        for watched in self._watched.values():
            watched.pop(stream, None)

    def let_go(self, stream: str) -> None:
        """Told that this server writes ``stream`` no more: its tailer reads it again."""
        principal = self._owner.get(stream)
        if principal is None or stream not in self._watched.get(principal, {}):
            return
        tailer = self._tailers.get(principal)
        if tailer is not None and not tailer.done():
            task = asyncio.get_running_loop().create_task(self._wake(UserKeys(principal)))
            self._waking.add(task)
            task.add_done_callback(self._waking.discard)

    def read_here(self, stream: str, rows: list[EventRow]) -> None:
        """Told that ``rows`` of ``stream`` were written here: the tailer skips them."""
        principal = self._owner.get(stream)
        watched = self._watched.get(principal) if principal is not None else None
        if watched is not None and stream in watched:
            watched[stream] = max(watched[stream], rows[-1][0])

    async def _wake(self, user: UserKeys) -> str:
        found = await self._client.xadd(
            user.wake(self.replica), {"w": "1"}, maxlen=WAKE_LEN, approximate=True
        )
        return str(found)

    async def _tail(self, user: UserKeys) -> None:
        """Read the user's followed streams until none is left (then the task ends)."""
        watched = self._watched[user.principal]
        wake_key, wake_id, delay = user.wake(self.replica), "", FIRST_RETRY
        prefix = user.stream("")
        while watched and not self._stopped:
            try:
                if not wake_id:
                    wake_id = await self._wake(user)
                ids = {wake_key: wake_id}
                ids.update(
                    {
                        user.stream(s): f"0-{seq + 1}"
                        for s, seq in watched.items()
                        if s not in self._tokens
                    }
                )
                replies = await self._client.xread(ids, count=COUNT, block=BLOCK_MS)
                delay = FIRST_RETRY
            except RedisError as error:
                self.log.warning("neta: following runs of %s in Redis: %s", user.principal, error)
                await asyncio.sleep(delay)
                delay = min(2 * delay, LAST_RETRY)
                continue
            for key, entries in replies or []:
                if key == wake_key:
                    wake_id = entries[-1][0]
                    continue
                stream = key[len(prefix) :]
                if stream not in watched or not entries:
                    continue
                rows = [(seq_of(eid), f["t"], f["p"]) for eid, f in entries]
                watched[stream] = max(watched[stream], rows[-1][0])
                for listener in self._remote:
                    listener(stream, rows)
        self._tailers.pop(user.principal, None)

    def stop_tails(self) -> None:
        """Follow nothing more (the server stops)."""
        for tailer in self._tailers.values():
            tailer.cancel()
        self._tailers.clear()
