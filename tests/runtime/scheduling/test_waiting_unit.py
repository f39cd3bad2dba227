"""Waiting on a small host: pauses, claims on a run, and runs reclaimed past their deadline.

The activations are the runtime's own (:class:`Activations`) driving a real loop with a scripted
model and a tool the test lets finish; the host records the children a reclaimed run stops.
The same over a real server is in ``test_suspend.py``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime.activation.loop import RunLoop
from neta_jupyter.runtime.data.runs import Run
from neta_jupyter.runtime.data.state import RunOptions, RunState
from neta_jupyter.runtime.errors import RunConflict
from neta_jupyter.runtime.fake_host import FakeHost
from neta_jupyter.runtime.log.emitter import RunEmitter
from neta_jupyter.runtime.scheduling.activations import Activations
from neta_jupyter.runtime.scheduling.waiting import Waiting
from neta_jupyter.tools import ToolContext, tool
from tests.host_helpers import events_of, host_on, terminal_events, until


class Scheduling:
    """The host, its activations and their waiting, wired as the runtime wires them."""

    def __init__(self, tmp_path: Path, **config: object) -> None:
        self.host = host_on(tmp_path, **config)
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.model = ScriptedModel(
            [
                ScriptedTurn(tool_calls=[ScriptedToolCall("wait_for_gate", {})]),
                ScriptedTurn(text="The gate opened."),
            ]
        )
        self.active = Activations(
            self.host.store,
            self.host.runs,
            self.host.config,
            self._loop,
            self.host.log,
            lambda run: self.waiting.watch(run),
        )
        self.waiting = Waiting(self.host, self.active)

    def _loop(self, run: Run, emitter: RunEmitter) -> RunLoop:
        @tool(readonly=True)
        async def wait_for_gate(ctx: ToolContext) -> str:
            """Wait until the test opens the gate."""
            self.started.set()
            await self.gate.wait()
            return "open"

        host = self.host
        return RunLoop(
            run,
            store=host.store,
            config=host.config,
            model=self.model,
            runs=host.runs,
            tools=[wait_for_gate],
            kernel=None,
            emitter=emitter,
        )

    async def working(self) -> Run:
        """A run whose activation is in its tool call."""
        run = await self.host.add_run()
        self.active.launch(run, run.state.next)
        await self.started.wait()
        return run

    async def close(self) -> None:
        await self.waiting.close()
        await self.active.shutdown()


async def stored(host: FakeHost, run: Run) -> Run:
    found = await host.runs.get(run.request_id)
    assert found is not None
    return found


async def deadline_timer(run: Run) -> asyncio.Task[object]:
    """The task that reclaims the run at its deadline."""
    [timer] = [t for t in asyncio.all_tasks() if t.get_name() == f"neta-deadline-{run.request_id}"]
    return timer


async def test_a_pause_suspends_the_run_after_its_running_step(tmp_path: Path) -> None:
    scheduling = Scheduling(tmp_path)
    host = scheduling.host
    run = await scheduling.working()
    paused = await scheduling.waiting.pause("alice", run.request_id)
    assert paused.status == "running", "it goes on to its next step boundary"
    scheduling.gate.set()
    await scheduling.active.wait(run.request_id)
    names = [e["eventType"] for e in await events_of(host, run)]
    assert names.index("TOOL_COMPLETED") < names.index("MESSAGE_SUSPENDED"), "the tool finished"
    [ending] = await terminal_events(host, run)
    assert ending["data"]["suspendReason"]["type"] == "MANUAL_SUSPEND"
    assert scheduling.model.remaining == 1, "the model was not asked again"
    after = await stored(host, run)
    assert after.status == "suspended"
    assert after.state.suspend_deadline is not None, "a paused run waits for a person"
    await scheduling.close()


async def test_a_pause_of_a_run_not_running_here_is_refused(tmp_path: Path) -> None:
    scheduling = Scheduling(tmp_path)
    host = scheduling.host
    suspended = await host.add_run("suspended")
    completed = await host.add_run("completed")
    queued = await host.add_run("running")  # a sub-agent waiting for a slot: no activation
    for run in (suspended, completed, queued):
        with pytest.raises(RunConflict) as refused:
            await scheduling.waiting.pause("alice", run.request_id)
        assert refused.value.code == "RUN_NOT_RUNNING"
        assert (await stored(host, run)).status == run.status
    await scheduling.close()


async def test_a_second_claim_on_a_run_is_refused_while_the_first_holds_it(
    tmp_path: Path,
) -> None:
    waiting = Scheduling(tmp_path).waiting
    with waiting.claim("r1"):
        with pytest.raises(RunConflict) as busy, waiting.claim("r1"):
            pass
        assert busy.value.code == "RUN_BUSY"
        with waiting.claim("r2"):  # another run is not held
            pass
    with waiting.claim("r1"):  # let go of: it can be claimed again
        pass


async def test_a_paused_run_nobody_resumes_is_reclaimed_at_its_deadline(tmp_path: Path) -> None:
    scheduling = Scheduling(tmp_path, suspend_timeout=0.2)
    host = scheduling.host
    run = await scheduling.working()
    await scheduling.waiting.pause("alice", run.request_id)
    scheduling.gate.set()
    await until(lambda: host.subagents.stopped, "the run was not reclaimed")
    assert host.subagents.stopped == [(run.request_id, "user")], "its children stop too"
    ended = await stored(host, run)
    assert ended.status == "failed" and ended.state.suspend_deadline is None
    endings = await terminal_events(host, run)
    assert [e["eventType"] for e in endings] == ["MESSAGE_SUSPENDED", "MESSAGE_FAILED"]
    failed = endings[-1]["data"]
    assert failed["errorCode"] == "USER_NO_RESPONSE" and failed["recoverable"] is False
    assert "0.2 s" in failed["errorMessage"], "the message says which timeout passed"
    await scheduling.close()


async def suspended_until(host: FakeHost, deadline: float, timeout: float | None = None) -> Run:
    """A run that waits for a person until ``deadline``."""
    return await host.add_run(
        "suspended",
        options=RunOptions(suspend_timeout=timeout),
        state=RunState(suspend_deadline=deadline),
    )


async def test_a_run_resumed_before_its_deadline_is_not_reclaimed(tmp_path: Path) -> None:
    scheduling = Scheduling(tmp_path)
    host, waiting = scheduling.host, scheduling.waiting
    forgotten = await suspended_until(host, time.time() + 0.2)
    waiting.watch(forgotten)
    timer = await deadline_timer(forgotten)
    waiting.forget(forgotten.request_id)  # resumed: its timer goes
    await asyncio.gather(timer, return_exceptions=True)

    active = await suspended_until(host, time.time())
    host.active.add(active.request_id)  # resumed, its activation not yet stored as running
    waiting.watch(active)
    await asyncio.gather(await deadline_timer(active), return_exceptions=True)

    for run in (forgotten, active):
        assert (await stored(host, run)).status == "suspended"
        assert await terminal_events(host, run) == []
    assert host.subagents.stopped == []
    await scheduling.close()


async def test_a_deadline_that_comes_while_a_resume_holds_the_run_waits_for_it(
    tmp_path: Path,
) -> None:
    scheduling = Scheduling(tmp_path)
    host, waiting = scheduling.host, scheduling.waiting
    resumed = await suspended_until(host, time.time())
    asks_again = await suspended_until(host, time.time())
    timers = []
    for run in (resumed, asks_again):
        with waiting.claim(run.request_id):  # a resume is under way
            waiting.watch(run)
            timers.append(await deadline_timer(run))
            await asyncio.sleep(0.05)
            assert (await stored(host, run)).status == "suspended", "not reclaimed meanwhile"
            if run is resumed:
                run.status = "running"  # the deadline stays stored until it waits again
            else:  # it went on and waits for a person again, until a later deadline
                run.state.suspend_deadline = time.time() + 3600
            await host.runs.save(run)
    await asyncio.gather(*timers)
    assert (await stored(host, resumed)).status == "running"
    assert (await stored(host, asks_again)).status == "suspended"
    for run in (resumed, asks_again):
        assert await terminal_events(host, run) == []
    await scheduling.close()


async def test_at_start_up_runs_past_their_deadline_are_reclaimed_and_others_watched(
    tmp_path: Path,
) -> None:
    scheduling = Scheduling(tmp_path)
    host, waiting = scheduling.host, scheduling.waiting
    overdue = await suspended_until(host, time.time() - 60, timeout=30)
    later = await suspended_until(host, time.time() + 0.3)
    shutdown = await host.add_run("suspended")  # waits for no person: no deadline
    assert await waiting.recover() == 1
    assert (await stored(host, overdue)).status == "failed"
    [failed] = await terminal_events(host, overdue)
    assert failed["data"]["errorCode"] == "USER_NO_RESPONSE"
    assert "30 s" in failed["data"]["errorMessage"], "the run's own suspend timeout"
    assert (await stored(host, later)).status == "suspended"
    waiting.watch_stored()
    await until(lambda: len(host.subagents.stopped) == 2, "the later run was not reclaimed")
    assert (await stored(host, later)).status == "failed"
    assert (await stored(host, shutdown)).status == "suspended"
    await scheduling.close()
