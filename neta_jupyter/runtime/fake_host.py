"""A small :class:`~.host.RunHost` for unit tests of the helpers that work for the runtime.

Waiting, takeover, hand-off, background work and sub-agents are real code typed against the host
protocol; :class:`FakeHost` is the host they are tested on, without a server, a kernel or a model.
Its storage is real (the in-memory store, typed :class:`~.data.runs.Runs`, real emitters), so
what a helper writes is read back as the runtime would read it. What the runtime would do for the
helper (cancel an activation, continue a run, answer a resume) is recorded instead, and the test
says which runs have an activation here and whether the process is stopping.

:class:`FakeLeases` stands in for the leases of a store several servers share (Redis keeps them
in production): the test says which runs other servers hold or left expired, and servers given
each other as ``peers`` hand control messages to one another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..providers import ModelRegistry
from ..store import EventRow, Push, RunStatus, Store, new_id
from ..store.leases import ControlHandler
from ..tools import ToolRegistry
from .config import RuntimeConfig
from .data.runs import Run, Runs
from .data.state import RunOptions, RunState
from .errors import RunApiError, RunConflict, RunNotFound
from .host import CancelReason, KernelFactory, RunHost
from .log.emitter import RunEmitter


class FakeClaims:
    """Claims on runs: each one recorded, refused (RUN_BUSY) while the same run is held."""

    def __init__(self) -> None:
        self.held: set[str] = set()
        """Runs claimed now (a test may add one: it is being resumed elsewhere in the code)."""
        self.claimed: list[str] = []
        """Every claim granted, in order."""

    @contextlib.contextmanager
    def claim(self, request_id: str) -> Iterator[None]:
        """Hold the run, or RUN_BUSY while it is held."""
        if request_id in self.held:
            raise RunConflict(f"run {request_id} is being resumed or stopped", code="RUN_BUSY")
        self.held.add(request_id)
        self.claimed.append(request_id)
        try:
            yield
        finally:
            self.held.discard(request_id)


class FakeTakeover:
    """Leases taken through the host: granted unless the test says another server holds them."""

    def __init__(self) -> None:
        self.elsewhere: set[str] = set()
        """Runs another server holds: taking them is refused."""
        self.taken: list[str] = []
        self.released: list[str] = []

    async def take(self, request_id: str, code: str, refused: str) -> None:
        """Take the lease, or refuse with ``code`` when another server holds the run."""
        if request_id in self.elsewhere:
            raise RunConflict(f"{refused} (another server runs it)", code=code)
        self.taken.append(request_id)

    @contextlib.asynccontextmanager
    async def releasing(self, request_id: str) -> AsyncIterator[None]:
        """Record the lease let go when the block fails."""
        try:
            yield
        except BaseException:
            self.released.append(request_id)
            raise


class FakeChildren:
    """Child runs: every stop asked of them recorded as ``(request_id, how)``."""

    def __init__(self) -> None:
        self.stopped: list[tuple[str, CancelReason]] = []

    async def stop_children(self, run: Run, how: CancelReason) -> None:
        """Record the stop."""
        self.stopped.append((run.request_id, how))


@dataclass
class Call:
    """A resume or retry the host was asked for."""

    op: str
    principal: str
    request_id: str
    args: dict[str, Any] = field(default_factory=dict)


class FakeHost:
    """A :class:`~.host.RunHost` on an in-memory store that records what its helpers ask."""

    def __init__(self, config: RuntimeConfig, store: Store | None = None) -> None:
        self.store = store if store is not None else Store.in_memory()
        self.runs = Runs(self.store.records)
        self.config = config
        self.log = logging.getLogger("neta_jupyter.tests")
        self.models = ModelRegistry()
        self.tools = ToolRegistry()
        self.kernels: KernelFactory | None = None
        self.stopping = False
        """The test says the process shuts down."""
        self.waiting: FakeClaims = FakeClaims()
        self.takeover: FakeTakeover = FakeTakeover()
        self.subagents: FakeChildren = FakeChildren()
        self.active: set[str] = set()
        """Runs with an activation in this process (the test sets them)."""
        self.cancelled: list[tuple[str, CancelReason]] = []
        self.continued: list[str] = []
        self.waited: list[str] = []
        """Runs whose activation's end a helper waited for."""
        self.calls: list[Call] = []
        """Resumes and retries, in order."""
        self.refusal: RunApiError | None = None
        """Raised by the next resume or retry (the runtime refused it)."""
        self._ended: dict[str, asyncio.Event] = {}

    async def add_run(
        self,
        status: RunStatus = "running",
        *,
        principal: str = "alice",
        parent: Run | None = None,
        options: RunOptions | None = None,
        state: RunState | None = None,
    ) -> Run:
        """A run stored as standing in ``status``: where a test starts (not how runs are born)."""
        if parent is not None:
            session_id = parent.session_id
        else:
            records = self.store.records
            session_id = (await records.get_or_create_session(principal, new_id("s"))).session_id
        run = Run(
            request_id=new_id("r"),
            principal=principal,
            session_id=session_id,
            status=status,
            model="demo",
            created=time.time(),
            prompt="a task",
            options=options or RunOptions(),
            state=state or RunState(),
            parent_request_id=parent.request_id if parent is not None else None,
        )
        await self.runs.create(run)
        return run

    def end_activation(self, request_id: str) -> None:
        """The run's activation here has ended: whoever waits for it goes on."""
        self.active.discard(request_id)
        self._ended.pop(request_id, asyncio.Event()).set()

    def is_active(self, request_id: str) -> bool:
        """Whether the test made the run active here."""
        return request_id in self.active

    def cancel_reason(self, request_id: str) -> CancelReason:
        """The reason of the run's last cancel (none: its time ran out)."""
        reasons = [how for rid, how in self.cancelled if rid == request_id]
        return reasons[-1] if reasons else "timeout"

    async def cancel(self, request_id: str, reason: CancelReason) -> None:
        """Record the cancel; the activation ends at once."""
        self.cancelled.append((request_id, reason))
        self.end_activation(request_id)

    async def wait(self, request_id: str) -> None:
        """Until the test ends the run's activation (at once when it has none); recorded."""
        self.waited.append(request_id)
        if request_id in self.active:
            await self._ended.setdefault(request_id, asyncio.Event()).wait()

    def follow(
        self,
        request_id: str,
        after: int,
        *,
        heartbeat: float | None = None,
        push: Push | None = None,
    ) -> AsyncIterator[list[EventRow]]:
        """The run's stored events, as the store's log follows them."""
        return self.store.events.follow(request_id, after, heartbeat=heartbeat, push=push)

    async def continue_run(self, run: Run) -> None:
        """Record the run that would be continued."""
        self.continued.append(run.request_id)

    async def emitter(self, run: Run) -> RunEmitter:
        """A real emitter on the store, numbered on from the run's state."""
        await self.store.events.open(run.request_id)
        emitter = RunEmitter(self.store.events, run.request_id)
        emitter.step = run.state.step or None
        emitter.total_tokens = run.state.usage.total_tokens or None
        return emitter

    async def get_run(self, principal: str, request_id: str) -> Run:
        """The principal's stored run (``RunNotFound`` for another's)."""
        run = await self.runs.get(request_id)
        if run is None or run.principal != principal:
            raise RunNotFound(f"no run with requestId {request_id!r}")
        return run

    async def resume(
        self,
        principal: str,
        request_id: str,
        *,
        approved: bool | None = None,
        ask_id: str | None = None,
        always: bool = False,
        answer: str | None = None,
        digest: str | None = None,
    ) -> Run:
        """Record the resume; the run as the runtime would answer (or :attr:`refusal`)."""
        args = {"approved": approved, "ask_id": ask_id, "always": always, "answer": answer}
        return await self._answer(Call("resume", principal, request_id, {**args, "digest": digest}))

    async def retry(self, principal: str, request_id: str) -> Run:
        """Record the retry; as :meth:`resume` answers."""
        return await self._answer(Call("retry", principal, request_id))

    async def _answer(self, call: Call) -> Run:
        self.calls.append(call)
        if self.refusal is not None:
            refusal, self.refusal = self.refusal, None
            raise refusal
        run = await self.get_run(call.principal, call.request_id)
        run.status = "running"
        return run


class FakeLeases:
    """The leases of a store other servers share, as the test lays them out."""

    shared = True

    def __init__(self, replica: str) -> None:
        self.replica = replica
        self.holders: dict[str, str] = {}
        """``request_id → replica`` holding its lease."""
        self.expired_runs: list[str] = []
        """Runs whose owner's lease expired (a server that stopped)."""
        self.kernel_hosts: dict[tuple[str, str], str] = {}
        """``(principal, kernel_id) → replica`` hosting the kernel."""
        self.peers: dict[str, FakeLeases] = {}
        """The other servers' leases, by replica: control messages reach them."""
        self.stops_asked: list[str] = []
        self._lost: list[Callable[[str], None]] = []
        self._stop: list[Callable[[str], None]] = []
        self._control: ControlHandler | None = None

    async def acquire(self, request_id: str) -> bool:
        """Take the run unless another server holds it (an expired run's lease included)."""
        if self.holders.get(request_id, self.replica) != self.replica:
            return False
        self.holders[request_id] = self.replica
        if request_id in self.expired_runs:
            self.expired_runs.remove(request_id)
        return True

    async def release(self, request_id: str) -> None:
        """Let go of the run if this server holds it."""
        if self.holders.get(request_id) == self.replica:
            del self.holders[request_id]

    async def held_elsewhere(self, request_id: str) -> bool:
        """Whether another server holds the run."""
        return self.holders.get(request_id, self.replica) != self.replica

    async def request_stop(self, request_id: str) -> bool:
        """Record the request; whether any server holds the run."""
        self.stops_asked.append(request_id)
        return request_id in self.holders

    async def expired(self) -> list[str]:
        """The runs the test left expired."""
        return list(self.expired_runs)

    def on_lost(self, listener: Callable[[str], None]) -> None:
        """Called by :meth:`lose`."""
        self._lost.append(listener)

    def on_stop(self, listener: Callable[[str], None]) -> None:
        """Called by :meth:`ask_stop`."""
        self._stop.append(listener)

    def lose(self, request_id: str) -> None:
        """Another server took the run over."""
        self.holders.pop(request_id, None)
        for listener in self._lost:
            listener(request_id)

    def ask_stop(self, request_id: str) -> None:
        """Another server was asked to terminate this server's run."""
        for listener in self._stop:
            listener(request_id)

    async def host_kernel(self, principal: str, kernel_id: str) -> None:
        """Host the kernel here, as the peers see too."""
        self.kernel_hosts[(principal, kernel_id)] = self.replica
        for peer in self.peers.values():
            peer.kernel_hosts[(principal, kernel_id)] = self.replica

    async def drop_kernel(self, kernel_id: str) -> None:
        """Host the kernel here no more."""
        for key, host in list(self.kernel_hosts.items()):
            if key[1] == kernel_id and host == self.replica:
                del self.kernel_hosts[key]

    async def kernel_host(self, principal: str, kernel_id: str) -> str | None:
        """The server hosting the kernel, if any."""
        return self.kernel_hosts.get((principal, kernel_id))

    def kernels_alive(self, check: Callable[[str], bool]) -> None:
        """Nothing is renewed here."""

    def on_control(self, handler: ControlHandler) -> None:
        """What carries out control messages peers send here."""
        self._control = handler

    async def send_control(
        self, principal: str, replica: str, message: dict[str, Any], timeout: float
    ) -> dict[str, Any] | None:
        """The peer's answer, or None when it has no handler or does not answer in time."""
        peer = self.peers.get(replica)
        if peer is None or peer._control is None:
            return None
        try:
            return await asyncio.wait_for(peer._control(principal, message), timeout)
        except TimeoutError:
            return None


def _satisfies(host: FakeHost) -> RunHost:
    """Where the type checker holds :class:`FakeHost` to the protocol."""
    return host
