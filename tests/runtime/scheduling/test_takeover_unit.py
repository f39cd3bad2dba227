"""Takeover on a small host: lost runs stop writing, a dead server's runs end once as crashed.

The leases of a store several servers share are laid out by the test (:class:`FakeLeases`);
the takeover code and the store it writes are real. The same behaviour over a real Redis with
real servers is in ``tests/redis``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from neta_jupyter.runtime.errors import RunConflict
from neta_jupyter.runtime.scheduling.takeover import Takeover
from tests.host_helpers import shared_host, terminal_events, until


async def test_a_run_whose_lease_is_lost_is_cancelled_as_fenced(tmp_path: Path) -> None:
    host, leases = shared_host(tmp_path)
    Takeover(host)
    run = await host.add_run()
    host.active.add(run.request_id)
    leases.lose(run.request_id)
    await until(lambda: host.cancelled, "the activation was not cancelled")
    assert host.cancelled == [(run.request_id, "fenced")], "stopped writing nothing"
    leases.lose("r-not-here")  # a run with no activation here: nothing to cancel
    await asyncio.sleep(0)
    assert host.cancelled == [(run.request_id, "fenced")]


async def test_a_stop_asked_by_another_server_cancels_the_run_as_the_user(tmp_path: Path) -> None:
    host, leases = shared_host(tmp_path)
    Takeover(host)
    run = await host.add_run()
    host.active.add(run.request_id)
    leases.ask_stop(run.request_id)
    await until(lambda: host.cancelled, "the activation was not cancelled")
    assert host.cancelled == [(run.request_id, "user")]


async def test_a_dead_servers_run_is_ended_as_crashed_with_one_terminal_event(
    tmp_path: Path,
) -> None:
    host, leases = shared_host(tmp_path)
    takeover = Takeover(host)
    run = await host.add_run()
    leases.expired_runs.append(run.request_id)  # its server stopped renewing its lease
    assert await takeover.sweep() == 1
    ended = await host.runs.get(run.request_id)
    assert ended is not None and ended.status == "failed"
    terminal = await terminal_events(host, run)
    assert [e["eventType"] for e in terminal] == ["MESSAGE_FAILED"]
    data = terminal[0]["data"]
    assert data["errorCode"] == "SYSTEM_CRASH" and data["recoverable"] is True
    assert leases.holders[run.request_id] == "here", "this server holds it now"
    assert await takeover.sweep() == 0, "once: the next sweep finds nothing"
    assert len(await terminal_events(host, run)) == 1


async def test_a_sweep_leaves_runs_it_may_not_end(tmp_path: Path) -> None:
    host, leases = shared_host(tmp_path)
    takeover = Takeover(host)
    active, faster, done = (
        await host.add_run(),
        await host.add_run(),
        await host.add_run("completed"),
    )
    host.active.add(active.request_id)  # being stopped here: swept next time
    leases.holders[faster.request_id] = "another"  # another server took it first
    leases.expired_runs += [active.request_id, faster.request_id, done.request_id]
    assert await takeover.sweep() == 0
    for run in (active, faster, done):
        assert await terminal_events(host, run) == []
    assert done.request_id not in leases.holders, "a run that ended is let go of"
    host.active.clear()
    host.stopping = True  # shutting down: nothing is taken over
    assert await takeover.sweep() == 0
    assert await terminal_events(host, active) == []


async def test_taking_a_run_another_server_holds_is_refused_with_the_code_given(
    tmp_path: Path,
) -> None:
    host, leases = shared_host(tmp_path)
    takeover = Takeover(host)
    run = await host.add_run("suspended")
    leases.holders[run.request_id] = "another"
    with pytest.raises(RunConflict) as refused:
        await takeover.take(run.request_id, "RUN_NOT_SUSPENDED", "the run cannot be resumed")
    assert refused.value.code == "RUN_NOT_SUSPENDED"
    assert "another server" in refused.value.message


async def test_a_lease_taken_for_a_start_that_fails_is_let_go(tmp_path: Path) -> None:
    host, leases = shared_host(tmp_path)
    takeover = Takeover(host)
    run = await host.add_run("suspended")
    await takeover.take(run.request_id, "RUN_NOT_SUSPENDED", "refused")
    with pytest.raises(RuntimeError):
        async with takeover.releasing(run.request_id):
            raise RuntimeError("the resume failed before the run started")
    assert run.request_id not in leases.holders
    await takeover.take(run.request_id, "RUN_NOT_SUSPENDED", "refused")
    host.active.add(run.request_id)  # it started: the lease is its activation's
    with pytest.raises(RuntimeError):
        async with takeover.releasing(run.request_id):
            raise RuntimeError("a failure after the start")
    assert leases.holders[run.request_id] == "here"


async def test_start_up_recovery_leaves_runs_whose_tree_another_server_runs(
    tmp_path: Path,
) -> None:
    host, leases = shared_host(tmp_path)
    takeover = Takeover(host)
    parent = await host.add_run()
    child = await host.add_run(parent=parent)
    orphan = await host.add_run()
    leases.holders[parent.request_id] = "another"
    assert not await takeover.may_recover(child), "its parent is alive elsewhere"
    assert not await takeover.may_recover(parent), "held by another server"
    assert await takeover.may_recover(orphan)
    assert leases.holders[orphan.request_id] == "here"


async def test_a_terminate_asks_the_server_that_runs_it_and_waits_for_the_end(
    tmp_path: Path,
) -> None:
    host, leases = shared_host(tmp_path)
    takeover = Takeover(host)
    run = await host.add_run()
    assert not await takeover.stop_elsewhere(run), "no server holds it"
    leases.holders[run.request_id] = "another"
    stopping = asyncio.create_task(takeover.stop_elsewhere(run))
    await until(lambda: len(leases.stops_asked) == 2, "the owner was not asked")
    assert not stopping.done(), "it waits for the other server to end the run"
    run.status = "failed"
    await host.runs.save(run)
    assert await stopping
