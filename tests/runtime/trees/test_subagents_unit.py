"""Sub-agents on a small host: stopping a tree of runs, a child's status, a crash left behind.

Trees of runs are stored as sub-agents store them (``delegated`` options, ``parentRequestId``);
the host says which runs have an activation here and records what is cancelled. The same
behaviour over a real server is in ``test_subagents.py`` and ``test_suspended_trees.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.events import EventType, FinishReason, TextData
from neta_jupyter.runtime.activation.endings import end_run
from neta_jupyter.runtime.data.runs import Run
from neta_jupyter.runtime.data.state import Delegated, RunOptions
from neta_jupyter.runtime.data.steps import Finish, Suspend
from neta_jupyter.runtime.fake_host import FakeHost
from neta_jupyter.runtime.scheduling.pauses import PAUSED
from neta_jupyter.runtime.trees.subagent_batch import Batch
from neta_jupyter.runtime.trees.subagents import Subagents
from neta_jupyter.store import RunStatus
from neta_jupyter.tools import ToolRegistry, builtin_tools
from neta_jupyter.tools.values import SubTask, ToolError
from tests.host_helpers import events_of, host_on, terminal_events, until


async def child_of(
    host: FakeHost, parent: Run, run_status: RunStatus = "running", index: int = 0
) -> Run:
    """A child of ``parent``'s call ``call-1``, as a ``delegate`` call stores it."""
    depth = parent.options.delegated.depth + 1 if parent.options.delegated else 1
    delegated = Delegated(
        parent_tool_call_id="call-1",
        batch_id="batch-1",
        agent_id=f"sub-agent {index + 1}",
        index=index,
        entry_id=f"e-{parent.request_id}-{index}",
        depth=depth,
    )
    return await host.add_run(run_status, parent=parent, options=RunOptions(delegated=delegated))


async def status_of(host: FakeHost, run: Run) -> str:
    found = await host.runs.get(run.request_id)
    assert found is not None
    return found.status


async def ending(host: FakeHost, run: Run) -> dict[str, object]:
    [event] = await terminal_events(host, run)
    data = event["data"]
    assert isinstance(data, dict)
    return {**data, "event": event["eventType"]}


@pytest.mark.parametrize(("how", "code"), [("user", "USER_CANCELLED"), ("timeout", "TASK_TIMEOUT")])
async def test_stopping_a_runs_children_stops_every_one_below_it(
    tmp_path: Path, how: str, code: str
) -> None:
    host = host_on(tmp_path)
    subagents = Subagents(host)
    parent = await host.add_run()
    queued = await child_of(host, parent, index=0)
    waiting = await child_of(host, parent, "suspended", index=1)
    done = await child_of(host, parent, "completed", index=2)
    grandchild = await child_of(host, waiting)
    stranger = await child_of(host, await host.add_run())
    await subagents.stop_children(parent, how)  # type: ignore[arg-type]
    for run in (queued, waiting, grandchild):
        assert await status_of(host, run) == "failed"
        end = await ending(host, run)
        assert end["event"] == "MESSAGE_FAILED"
        assert end["errorCode"] == code and end["recoverable"] is False
    assert await status_of(host, done) == "completed" and await terminal_events(host, done) == []
    assert await status_of(host, stranger) == "running", "another run's child goes on"
    assert await status_of(host, parent) == "running", "the run itself is its caller's"
    assert host.cancelled == []


async def test_a_child_with_an_activation_here_is_cancelled_with_the_reason_given(
    tmp_path: Path,
) -> None:
    host = host_on(tmp_path)
    subagents = Subagents(host)
    parent = await host.add_run()
    working = await child_of(host, parent)
    host.active.add(working.request_id)
    await subagents.stop_children(parent, "timeout")
    assert host.cancelled == [(working.request_id, "timeout")]
    assert not host.is_active(working.request_id), "stopping waits for its end"
    assert await terminal_events(host, working) == [], "its activation writes its end"


async def test_children_of_a_run_another_server_took_are_left_alone(tmp_path: Path) -> None:
    host = host_on(tmp_path)
    subagents = Subagents(host)
    parent = await host.add_run()
    working, queued = await child_of(host, parent), await child_of(host, parent, index=1)
    host.active.add(working.request_id)
    await subagents.stop_children(parent, "fenced")
    assert host.cancelled == [(working.request_id, "fenced")], "it writes nothing more here"
    assert await status_of(host, queued) == "running"
    assert await terminal_events(host, queued) == []


async def test_at_a_shutdown_children_that_had_not_started_are_suspended_to_go_on_later(
    tmp_path: Path,
) -> None:
    host = host_on(tmp_path)
    subagents = Subagents(host)
    parent = await host.add_run()
    queued = await child_of(host, parent)
    asks = await child_of(host, parent, "suspended", index=1)
    working = await child_of(host, parent, index=2)
    host.active.add(working.request_id)
    stopping = asyncio.create_task(subagents.stop_children(parent, "shutdown"))
    await until(lambda: working.request_id in host.waited, "the working child was not awaited")
    assert not stopping.done(), "it waits for the working child's end"
    host.end_activation(working.request_id)  # the shutdown itself ends every activation
    await stopping
    assert await status_of(host, queued) == "suspended"
    end = await ending(host, queued)
    assert end["event"] == "MESSAGE_SUSPENDED"
    assert end["suspendReason"]["type"] == "SHUTDOWN_INTERRUPT"  # type: ignore[index]
    assert await status_of(host, asks) == "suspended" and await terminal_events(host, asks) == []
    assert host.cancelled == [], "a shutdown cancels every activation itself"


async def test_a_childs_status_says_whether_its_batch_or_a_person_is_to_go_on(
    tmp_path: Path,
) -> None:
    host = host_on(tmp_path)
    subagents = Subagents(host)
    parent = await host.add_run()
    queued = await child_of(host, parent)
    running = await child_of(host, parent, index=1)
    host.active.add(running.request_id)
    interrupted = await child_of(host, parent, "suspended", index=2)
    paused = await child_of(host, parent, "suspended", index=3)
    paused.state.suspend_deadline = 1e12
    failed = await child_of(host, parent, "failed", index=4)
    seen = [subagents.status_of(r) for r in (queued, running, interrupted, paused, failed)]
    assert seen == ["queued", "running", "queued", "suspended", "failed"]


async def test_after_a_crash_a_child_that_had_not_got_going_is_suspended_not_failed(
    tmp_path: Path,
) -> None:
    host = host_on(tmp_path)
    subagents = Subagents(host)
    parent = await host.add_run("suspended")
    untouched = await child_of(host, parent)
    streaming = await child_of(host, parent, index=1)
    emitter = await host.emitter(streaming)
    emitter.emit(EventType.TEXT_START, TextData(text="The answer"))  # a client saw part of it
    await emitter.flush()
    taken_elsewhere = await child_of(host, parent, index=2)
    resumed = await child_of(host, parent, index=3)  # it streamed before, then was suspended
    emitter = await host.emitter(resumed)
    emitter.emit(EventType.TEXT_START, TextData(text="Half an answer"))
    await end_run(host.runs, resumed, emitter, Suspend(PAUSED))
    resumed.status = "running"  # resumed: nothing streamed since
    await host.runs.save(resumed)

    async def take(run: Run) -> bool:
        return run.request_id != taken_elsewhere.request_id

    assert await subagents.recover(take) == 2
    assert await status_of(host, untouched) == "suspended"
    assert await status_of(host, resumed) == "suspended"
    assert (await ending(host, untouched))["event"] == "MESSAGE_SUSPENDED"
    assert await status_of(host, streaming) == "running", "ended as crashed by the caller"
    assert await status_of(host, taken_elsewhere) == "running"


async def test_a_run_delegates_only_as_deep_as_configured_and_no_wider_than_itself(
    tmp_path: Path,
) -> None:
    host = host_on(tmp_path, subagent_depth=2)
    subagents = Subagents(host)
    top = await host.add_run(options=RunOptions(tools=["read_file"]))
    child = await child_of(host, top)
    grandchild = await child_of(host, child)
    assert [subagents.may_delegate(r) for r in (top, child, grandchild)] == [True, True, False]
    emitter = await host.emitter(top)
    host.tools = ToolRegistry(builtin_tools())
    wider = [SubTask(task="look around", tools=["read_file", "list_files"])]
    with pytest.raises(ToolError, match="only tools this run may use"):
        await subagents.delegate(top, emitter, "call-9", wider)
    assert await subagents.children(top.request_id, "call-9") == [], "no child was made"


async def finish(host: FakeHost, run: Run) -> None:
    """The child's activation completes (as its loop would end it)."""
    found = await host.runs.get(run.request_id)
    assert found is not None
    await end_run(host.runs, found, await host.emitter(found), Finish(FinishReason.STOP))


async def parent_events(host: FakeHost, parent: Run, event_type: str) -> list[dict[str, Any]]:
    return [e["data"] for e in await events_of(host, parent) if e["eventType"] == event_type]


async def test_a_batch_starts_children_as_slots_free_up_and_ends_with_all_of_them(
    tmp_path: Path,
) -> None:
    host = host_on(tmp_path, subagent_concurrency=1)
    subagents = Subagents(host)
    parent = await host.add_run()
    first, second = await child_of(host, parent), await child_of(host, parent, index=1)
    emitter = await host.emitter(parent)
    batch = Batch(subagents, parent, emitter, "call-1")
    running = asyncio.create_task(batch.run([first, second], fresh=True))
    await until(lambda: host.continued, "no child was started")
    assert host.continued == [first.request_id], "one slot: one child at a time"
    await finish(host, first)
    await until(lambda: len(host.continued) == 2, "the second child did not start")
    assert host.continued == [first.request_id, second.request_id]
    assert not running.done(), "the batch waits for every child"
    await finish(host, second)
    result = await asyncio.wait_for(running, 30)
    assert result.output
    await emitter.flush()
    [started] = await parent_events(host, parent, "SUBAGENT_RUN_STARTED")
    assert [c["requestId"] for c in started["children"]] == [first.request_id, second.request_id]
    [completed] = await parent_events(host, parent, "SUBAGENT_RUN_COMPLETED")
    assert completed["status"] == "completed" and completed["message"] == "2 of 2 completed"


async def test_a_batch_whose_parent_is_cancelled_stops_its_children(tmp_path: Path) -> None:
    host = host_on(tmp_path, subagent_concurrency=1)
    subagents = Subagents(host)
    parent = await host.add_run()
    first, second = await child_of(host, parent), await child_of(host, parent, index=1)
    emitter = await host.emitter(parent)
    running = asyncio.create_task(
        Batch(subagents, parent, emitter, "call-1").run([first, second], fresh=True)
    )
    await until(lambda: host.continued, "no child was started")
    host.active.add(first.request_id)  # its activation runs here
    host.cancelled.append((parent.request_id, "user"))  # the user stops the parent
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert (first.request_id, "user") in host.cancelled, "the running child is cancelled"
    assert await status_of(host, second) == "failed", "the queued one ends without starting"
    assert (await ending(host, second))["errorCode"] == "USER_CANCELLED"
    await emitter.flush()
    [stopped] = await parent_events(host, parent, "SUBAGENT_RUN_COMPLETED")
    assert stopped["status"] == "cancelled"
