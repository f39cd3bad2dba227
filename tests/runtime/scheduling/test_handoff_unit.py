"""Hand-off on small hosts: a kernel-bound run's resume or retry goes to the kernel's server.

Two servers share one in-memory store; their leases (:class:`FakeLeases`) say which server hosts
which kernel and carry control messages between them. The handing off and the carrying out are
the real :class:`Handoff` on each side; each host records the resume or retry it was asked for.
The same over a real Redis with real servers is in ``tests/redis``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neta_jupyter.runtime.config import RuntimeConfig
from neta_jupyter.runtime.data.runs import Run
from neta_jupyter.runtime.data.state import RunOptions
from neta_jupyter.runtime.errors import RunConflict
from neta_jupyter.runtime.fake_host import FakeHost, FakeLeases
from neta_jupyter.runtime.scheduling.handoff import Handoff, HostRefused, HostUnreachable
from neta_jupyter.store import MemoryData, Store
from neta_jupyter.tools.values import ToolResult
from tests.host_helpers import host_on


class Kernel:
    """A kernel this server hosts (nothing here executes code in it)."""

    async def execute(self, code: str, **_: object) -> ToolResult:
        raise AssertionError("no code runs in a hand-off")


def hosting(kernel_id: str) -> object:
    """The kernels of a server that hosts ``kernel_id``."""
    kernel = Kernel()
    return lambda run: kernel if run.options.kernel_id == kernel_id else None


class Servers:
    """Server ``here`` where the request arrives, and server ``there`` hosting kernel ``k1``."""

    def __init__(self, tmp_path: Path) -> None:
        data = MemoryData()  # the store both servers use
        config = RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path)
        self.here = FakeHost(config, Store.in_memory(data))
        self.there = FakeHost(config, Store.in_memory(data))
        self.leases, self.there_leases = FakeLeases("here"), FakeLeases("there")
        self.here.store.leases, self.there.store.leases = self.leases, self.there_leases
        self.leases.peers["there"] = self.there_leases
        self.there_leases.peers["here"] = self.leases
        self.there.kernels = hosting("k1")  # type: ignore[assignment]
        self.handoff = Handoff(self.here)
        self.host_side = Handoff(self.there)

    async def kernel_run(self, kernel_id: str = "k1") -> Run:
        """A suspended run bound to the kernel, its kernel registered by the server hosting it."""
        run = await self.here.add_run("suspended", options=RunOptions(kernel_id=kernel_id))
        await self.host_side.bound(run)
        return run


async def test_a_resume_reaches_the_kernels_server_which_carries_it_out(tmp_path: Path) -> None:
    servers = Servers(tmp_path)
    run = await servers.kernel_run()
    assert servers.leases.kernel_hosts[("alice", "k1")] == "there", "its host said so"
    answered = await servers.handoff.elsewhere(
        "alice", run.request_id, "resume", {"approved": True, "ask_id": "ask-1"}
    )
    assert answered is not None and answered.request_id == run.request_id
    assert answered.status == "running", "the status the host answered"
    [call] = servers.there.calls
    assert (call.op, call.principal, call.request_id) == ("resume", "alice", run.request_id)
    assert call.args["approved"] is True and call.args["ask_id"] == "ask-1"
    assert servers.here.calls == [], "not carried out where it was asked"

    assert await servers.handoff.elsewhere("alice", run.request_id, "retry", {}) is not None
    assert [c.op for c in servers.there.calls] == ["resume", "retry"]


async def test_the_hosts_refusal_is_the_callers_with_its_status_and_code(tmp_path: Path) -> None:
    servers = Servers(tmp_path)
    run = await servers.kernel_run()
    servers.there.refusal = RunConflict("run is completed", code="RUN_NOT_SUSPENDED")
    with pytest.raises(HostRefused) as refused:
        await servers.handoff.elsewhere("alice", run.request_id, "resume", {})
    assert (refused.value.status, refused.value.code) == (409, "RUN_NOT_SUSPENDED")
    assert refused.value.message == "run is completed"


async def test_a_kernel_host_that_does_not_answer_is_503(tmp_path: Path) -> None:
    servers = Servers(tmp_path)
    run = await servers.kernel_run()
    del servers.leases.peers["there"]  # registered, but its messages go nowhere
    with pytest.raises(HostUnreachable) as unreachable:
        await servers.handoff.elsewhere("alice", run.request_id, "resume", {})
    assert unreachable.value.status == 503
    assert unreachable.value.code == "KERNEL_HOST_UNREACHABLE"
    assert servers.there.calls == []


async def test_runs_the_kernels_server_need_not_carry_out_go_on_where_asked(
    tmp_path: Path,
) -> None:
    servers = Servers(tmp_path)
    no_kernel = await servers.here.add_run("suspended")
    nobody_hosts = await servers.here.add_run("suspended", options=RunOptions(kernel_id="k2"))
    for run in (no_kernel, nobody_hosts):
        assert await servers.handoff.elsewhere("alice", run.request_id, "resume", {}) is None
    assert servers.there.calls == []


async def test_a_kernel_this_server_hosts_or_hosted_is_not_handed_to_itself(
    tmp_path: Path,
) -> None:
    servers = Servers(tmp_path)
    run = await servers.kernel_run()  # the registry names the other server
    servers.here.kernels = hosting("k1")  # type: ignore[assignment]
    assert await servers.handoff.elsewhere("alice", run.request_id, "resume", {}) is None
    gone = await servers.here.add_run("suspended", options=RunOptions(kernel_id="k4"))
    servers.here.kernels = hosting("k4")  # type: ignore[assignment]
    await servers.handoff.bound(gone)
    servers.here.kernels = None  # its kernel stopped; the registry has not caught up yet
    assert await servers.handoff.elsewhere("alice", gone.request_id, "resume", {}) is None
    assert servers.there.calls == []


async def test_a_store_no_other_server_uses_hands_nothing_off(tmp_path: Path) -> None:
    host = host_on(tmp_path)
    run = await host.add_run("suspended", options=RunOptions(kernel_id="k1"))
    assert await Handoff(host).elsewhere("alice", run.request_id, "resume", {}) is None


async def test_only_the_server_hosting_a_kernel_registers_it(tmp_path: Path) -> None:
    servers = Servers(tmp_path)
    run = await servers.here.add_run("running", options=RunOptions(kernel_id="k1"))
    await servers.handoff.bound(run)  # not hosted here: another server's kernel
    assert servers.leases.kernel_hosts == {}
    await servers.host_side.bound(run)
    assert servers.leases.kernel_hosts == {("alice", "k1"): "there"}


async def test_another_users_run_is_not_found_through_a_hand_off(tmp_path: Path) -> None:
    servers = Servers(tmp_path)
    run = await servers.kernel_run()
    answer = await servers.host_side._carry_out(
        "mallory", {"op": "resume", "requestId": run.request_id, "args": {}}
    )
    assert answer == {
        "ok": False,
        "status": 404,
        "code": "RUN_NOT_FOUND",
        "message": answer["message"],
    }
    bad = await servers.host_side._carry_out("alice", {"op": "delete", "requestId": "r"})
    assert (bad["ok"], bad["status"], bad["code"]) == (False, 400, "BAD_REQUEST")
