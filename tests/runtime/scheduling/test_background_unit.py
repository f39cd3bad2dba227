"""Background work on a small host: a run goes on by itself when its work ends, once.

The work is a coroutine the test finishes; the host records the continue the runtime would
start. The same behaviour with a real kernel over a real server is in ``test_background.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from neta_jupyter.runtime.data.runs import Run
from neta_jupyter.runtime.fake_host import FakeHost
from neta_jupyter.runtime.scheduling.background import LOST, BackgroundJobs
from neta_jupyter.tools.values import ToolError, ToolResult
from tests.host_helpers import host_on, shared_host, until


class Gate:
    """Work that ends when the test says, with a result or a failure."""

    def __init__(self) -> None:
        self.outcome: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
        self.limits: list[float | None] = []
        self.started = asyncio.Event()
        self.cancelled = False

    async def __call__(self, limit: float | None) -> ToolResult:
        self.limits.append(limit)
        self.started.set()
        try:
            return await self.outcome
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def waiting_run(host: FakeHost, jobs: BackgroundJobs, gate: Gate, call: str) -> Run:
    """A run whose activation here started ``gate`` for ``call`` and then suspended."""
    run = await host.add_run()
    host.active.add(run.request_id)
    jobs.start(run, call, gate, 30.0)
    await gate.started.wait()
    run.status = "suspended"  # as the activation ends with ASYNC_TOOL_PENDING
    await host.runs.save(run)
    return run


async def test_a_run_goes_on_by_itself_once_its_work_and_activation_have_ended(
    tmp_path: Path,
) -> None:
    host = host_on(tmp_path)
    jobs = BackgroundJobs(host)
    gate = Gate()
    run = await waiting_run(host, jobs, gate, "call-1")
    assert gate.limits == [30.0], "the work gets its time limit"
    assert run.state.background == "call-1" and jobs.waits(run.request_id)
    gate.outcome.set_result(ToolResult(output="42"))
    await asyncio.sleep(0.05)
    assert host.continued == [], "not while the activation that started the work goes on"
    host.end_activation(run.request_id)
    await until(lambda: host.continued, "the run was not continued")
    assert host.continued == [run.request_id]
    assert host.takeover.taken == [run.request_id], "its lease is taken first"
    assert host.waiting.claimed == [run.request_id], "not resumed or reclaimed meanwhile"

    result = await jobs.result(run, "call-1")
    assert result.output == "42", "the call that runs again takes the work's result"
    assert run.state.background is None and not jobs.waits(run.request_id)
    with pytest.raises(ToolError, match="result was lost"):
        await jobs.result(run, "call-1")  # once: it is forgotten after


async def test_the_works_failure_is_the_calls(tmp_path: Path) -> None:
    host = host_on(tmp_path)
    jobs = BackgroundJobs(host)
    gate = Gate()
    run = await waiting_run(host, jobs, gate, "call-1")
    gate.outcome.set_exception(ToolError("NameError: name 'x' is not defined"))
    with pytest.raises(ToolError, match="NameError"):
        await jobs.result(run, "call-1")
    assert run.state.background is None
    await jobs.close()


async def test_a_run_resumed_or_stopped_meanwhile_is_not_continued_again(tmp_path: Path) -> None:
    host = host_on(tmp_path)
    jobs = BackgroundJobs(host)
    stopped, resumed, busy = Gate(), Gate(), Gate()
    first = await waiting_run(host, jobs, stopped, "call-1")
    second = await waiting_run(host, jobs, resumed, "call-2")
    third = await waiting_run(host, jobs, busy, "call-3")
    first.status = "failed"  # the user stopped it
    await host.runs.save(first)
    second.state.background = None  # resumed by hand: the call took the result
    await host.runs.save(second)
    host.waiting.held.add(third.request_id)  # a resume holds it right now
    for gate in (stopped, resumed, busy):
        gate.outcome.set_result(ToolResult(output="done"))
    for run in (first, second, third):
        host.end_activation(run.request_id)
    await asyncio.sleep(0.1)
    assert host.continued == []


async def test_stopping_a_run_stops_its_work(tmp_path: Path) -> None:
    host = host_on(tmp_path)
    jobs = BackgroundJobs(host)
    gate, other = Gate(), Gate()
    run = await waiting_run(host, jobs, gate, "call-1")
    kept = await waiting_run(host, jobs, other, "call-2")
    await jobs.cancel(run.request_id)
    assert gate.cancelled and not jobs.waits(run.request_id)
    assert not other.cancelled and jobs.waits(kept.request_id), "another run's work goes on"
    host.end_activation(run.request_id)
    await asyncio.sleep(0.05)
    assert host.continued == [], "a stopped run does not go on"
    await jobs.close()
    assert other.cancelled, "a shutdown stops all work"


async def test_work_lost_with_a_restart_is_reported_lost(tmp_path: Path) -> None:
    host = host_on(tmp_path)
    gate = Gate()
    first = BackgroundJobs(host)
    run = await waiting_run(host, first, gate, "call-1")
    await first.close()  # the process stops; the next one has none of its work
    restarted = BackgroundJobs(host)
    stored = await host.runs.get(run.request_id)
    assert stored is not None and restarted.lost(stored, "call-1")
    assert not restarted.lost(stored, "call-2"), "only the call the run waited for"
    with pytest.raises(ToolError) as lost:
        await restarted.result(stored, "call-1")
    assert str(lost.value) == LOST
    assert stored.state.background is None


async def test_at_start_up_runs_that_waited_for_work_go_on_and_hear_it_was_lost(
    tmp_path: Path,
) -> None:
    host = host_on(tmp_path)
    first = BackgroundJobs(host)
    waited = await waiting_run(host, first, Gate(), "call-1")
    await first.close()  # the process stops while the run waits
    await host.add_run("suspended")  # waits for a person, not for work
    host.active.clear()
    restarted = BackgroundJobs(host)
    assert await restarted.recover() == 1
    restarted.resume_stored()
    await until(lambda: host.continued, "the run was not continued")
    assert host.continued == [waited.request_id]


async def test_on_a_shared_store_a_waiting_run_waits_for_a_resume(tmp_path: Path) -> None:
    host, _ = shared_host(tmp_path)
    first = BackgroundJobs(host)
    await waiting_run(host, first, Gate(), "call-1")
    await first.close()  # the process stops while the run waits
    host.active.clear()
    restarted = BackgroundJobs(host)
    assert await restarted.recover() == 0, "another server may still run the work"
    restarted.resume_stored()
    await asyncio.sleep(0.05)
    assert host.continued == []


async def test_work_that_ends_while_the_server_shuts_down_does_not_start_the_run(
    tmp_path: Path,
) -> None:
    host = host_on(tmp_path)
    jobs = BackgroundJobs(host)
    gate = Gate()
    run = await waiting_run(host, jobs, gate, "call-1")
    host.stopping = True
    gate.outcome.set_result(ToolResult(output="done"))
    host.end_activation(run.request_id)
    await asyncio.sleep(0.1)
    assert host.continued == [], "the run stays suspended for the next start"
    stored = await host.runs.get(run.request_id)
    assert stored is not None and stored.state.background == "call-1"
