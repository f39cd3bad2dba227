"""Which server hosts which kernel, and control messages to the server that hosts a run's kernel.

A notebook's kernel lives in one server's process: a run bound to it has kernel tools only
there. Each server registers, per user, the kernels its runs are bound to (``kernel:<id>`` →
the server's name, expiring unless renewed by the heartbeat that renews leases, and removed
once the kernel is gone). A resume or retry that reaches another server is handed to the
hosting one: a message on that server's control stream of the user (``ctl:<server>``, small and
trimmed), which the host reads with one blocked read per user, carries out as if asked
directly, and answers on a reply stream the asking server waits on for a bounded time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

from redis.exceptions import RedisError

from .health import FIRST_RETRY, LAST_RETRY, StorageUnavailable
from .leases import ControlHandler
from .redis_conn import UserKeys
from .redis_lease import RedisLeases

CTL_LEN = 1000
"""Entries a control stream keeps (messages are read within seconds, then only noise)."""
CTL_KEEP_MS = 86_400_000
"""A control stream nobody writes to any more (its server is gone) expires after a day."""
REPLY_KEEP_MS = 60_000
"""A reply nobody waits for any more expires after a minute."""
BLOCK_MS = 5000
"""Longest wait of one read of the control stream (it is issued again after)."""

DROP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""
"""``KEYS``: kernel; ``ARGV``: server. A kernel's registration goes only if it is this server's."""


@contextlib.contextmanager
def unreachable() -> Iterator[None]:
    """A Redis that cannot be reached is the store's outage (503), not a server error."""
    try:
        yield
    except RedisError as error:
        raise StorageUnavailable(
            f"the Redis store cannot be reached: {error}", reason=str(error)
        ) from None


def kernel_key(user: UserKeys, kernel_id: str) -> str:
    """Which server hosts the kernel, for this user's runs."""
    return f"{user.prefix}kernel:{kernel_id}"


def control_key(user: UserKeys, replica: str) -> str:
    """The server's control stream for this user's runs."""
    return f"{user.prefix}ctl:{replica}"


class RedisKernels(RedisLeases):
    """The kernels this server hosts, and the hand-offs between servers, on the store's Redis."""

    def init_kernels(self) -> None:
        """No kernel hosted yet, nobody to hand control messages to."""
        self._hosted: set[tuple[str, str]] = set()
        """(principal, kernel id) registered by this server."""
        self._alive: Callable[[str], bool] = lambda kernel_id: True
        self._control: ControlHandler | None = None
        self._readers: dict[str, asyncio.Task[None]] = {}
        self._read_up_to: dict[str, str] = {}
        """Per principal, the id of the last control message read (a reader started again
        after its user's kernels were all gone must not act on those again)."""
        self._handling: set[asyncio.Task[None]] = set()

    def kernels_alive(self, check: Callable[[str], bool]) -> None:
        """Ask ``check`` whether a kernel still runs here at each renewal (False: unregister)."""
        self._alive = check

    def on_control(self, handler: ControlHandler) -> None:
        """Carry out control messages other servers send this one with ``handler``."""
        self._control = handler

    async def host_kernel(self, principal: str, kernel_id: str) -> None:
        """Say that this server hosts ``kernel_id`` for ``principal``'s runs (renewed from now)."""
        user = UserKeys(principal)
        await self._client.set(kernel_key(user, kernel_id), self.replica, px=self.lease_ms)
        self._hosted.add((principal, kernel_id))
        self._start_heartbeat()
        reader = self._readers.get(principal)
        if reader is None or reader.done():
            self._readers[principal] = asyncio.get_running_loop().create_task(
                self._read_control(user), name=f"neta-ctl-{principal}"
            )

    async def drop_kernel(self, kernel_id: str) -> None:
        """The kernel is gone from this server: it hosts it no more, for anyone."""
        gone = [hosted for hosted in self._hosted if hosted[1] == kernel_id]
        for principal, _ in gone:
            self._hosted.discard((principal, kernel_id))
            await self._client.eval(
                DROP, 1, kernel_key(UserKeys(principal), kernel_id), self.replica
            )

    async def kernel_host(self, principal: str, kernel_id: str) -> str | None:
        """The server hosting ``kernel_id`` for ``principal``'s runs (None: no live server)."""
        with unreachable():
            found = await self._client.get(kernel_key(UserKeys(principal), kernel_id))
        return None if found is None else str(found)

    async def _renew(self) -> None:
        await super()._renew()
        gone = [h for h in self._hosted if not self._alive(h[1])]
        for _, kernel_id in gone:
            await self.drop_kernel(kernel_id)
        hosted = list(self._hosted)
        if hosted:
            pipe = self._client.pipeline(transaction=False)
            for principal, kernel_id in hosted:
                key = kernel_key(UserKeys(principal), kernel_id)
                pipe.set(key, self.replica, px=self.lease_ms)
            await pipe.execute()

    # --- hand-offs

    async def send_control(
        self, principal: str, replica: str, message: dict[str, Any], timeout: float
    ) -> dict[str, Any] | None:
        """Hand ``message`` to server ``replica`` and wait for its answer (None: none in time).

        The message carries its deadline: a server that reads it later (it was paused) drops it
        rather than act on a request whose caller was told it failed.
        """
        user = UserKeys(principal)
        reply = f"{user.prefix}ctl-reply:{secrets.token_hex(8)}"
        sent = {**message, "reply": reply, "deadline": time.time() + timeout}
        key = control_key(user, replica)
        pipe = self._client.pipeline(transaction=False)
        pipe.xadd(key, {"m": json.dumps(sent)}, maxlen=CTL_LEN, approximate=True)
        pipe.pexpire(key, CTL_KEEP_MS)
        with unreachable():
            await pipe.execute()
        try:
            found = await self._client.xread(
                {reply: "0-0"}, count=1, block=max(1, round(timeout * 1000))
            )
        finally:
            with contextlib.suppress(RedisError):
                await self._client.delete(reply)
        if not found:
            return None
        answer: dict[str, Any] = json.loads(found[0][1][0][1]["a"])
        return answer

    async def _read_control(self, user: UserKeys) -> None:
        """Read this server's control stream of ``user`` while it hosts kernels for them."""
        key, delay = control_key(user, self.replica), FIRST_RETRY
        last = self._read_up_to.get(user.principal, "0-0")
        while not self._stopped and any(p == user.principal for p, _ in self._hosted):
            try:
                replies = await self._client.xread({key: last}, count=100, block=BLOCK_MS)
                delay = FIRST_RETRY
            except RedisError as error:
                self.log.warning(
                    "neta: reading hand-offs of %s in Redis: %s", user.principal, error
                )
                await asyncio.sleep(delay)
                delay = min(2 * delay, LAST_RETRY)
                continue
            for _, entries in replies or []:
                for entry_id, fields in entries:
                    last = self._read_up_to[user.principal] = entry_id
                    try:
                        message = dict(json.loads(fields["m"]))
                    except (KeyError, ValueError, TypeError):
                        self.log.warning("neta: an unreadable hand-off was dropped")
                        continue
                    self._handle(user.principal, message)
        self._readers.pop(user.principal, None)

    def _handle(self, principal: str, message: dict[str, Any]) -> None:
        if self._control is None or float(message.get("deadline", 0)) < time.time():
            return  # its caller no longer waits: it was told the host did not answer
        task = asyncio.get_running_loop().create_task(self._answer(principal, message))
        self._handling.add(task)
        task.add_done_callback(self._handling.discard)

    async def _answer(self, principal: str, message: dict[str, Any]) -> None:
        assert self._control is not None
        answer = await self._control(principal, message)
        pipe = self._client.pipeline(transaction=False)
        pipe.xadd(str(message["reply"]), {"a": json.dumps(answer)})
        pipe.pexpire(str(message["reply"]), REPLY_KEEP_MS)
        try:
            await pipe.execute()
        except RedisError as error:
            self.log.warning("neta: a hand-off's answer could not be sent: %s", error)

    def stop_kernels(self) -> list[str]:
        """Read no more control messages (the server stops); the kernel keys to remove."""
        for reader in self._readers.values():
            reader.cancel()
        self._readers.clear()
        hosted, self._hosted = self._hosted, set()
        return [kernel_key(UserKeys(principal), kernel_id) for principal, kernel_id in hosted]
