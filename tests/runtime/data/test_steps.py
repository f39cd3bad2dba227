"""Single steps of a run's loop, each carried out alone from the data it carries."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.events import FinishReason, SuspendType
from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.providers.base import Message, ModelRequest, ToolCall
from neta_jupyter.runtime import Runtime, RuntimeConfig
from neta_jupyter.runtime.data.runs import Run
from neta_jupyter.runtime.data.state import RunState
from neta_jupyter.runtime.data.steps import (
    Answer,
    Approval,
    BuildRequest,
    CallModel,
    Compact,
    Finish,
    RunTools,
    Suspend,
)
from neta_jupyter.runtime.data.values import Estimate
from neta_jupyter.store import Store, new_id
from neta_jupyter.tools import RunScope, ToolContext, tool

WRITTEN: list[str] = []


@tool(name="write_note")
async def write_note(ctx: ToolContext, text: str) -> str:
    """Write a note (it changes things, so it needs permission)."""
    WRITTEN.append(text)
    return f"noted: {text}"


@tool(readonly=True, name="pick_colour")
async def pick_colour(ctx: ToolContext, scope: RunScope, among: list[str]) -> str:
    """Ask the user to pick a colour."""
    return f"picked {await scope.ask('Which colour?', among)}"


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    rt = Runtime(Store.in_memory(), RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path / "data"))
    rt.tools.register(write_note)
    rt.tools.register(pick_colour)
    WRITTEN.clear()
    return rt


async def new_run(runtime: Runtime, model: ScriptedModel, prompt: str = "hello") -> Run:
    runtime.models.register("steps", model)
    session = await runtime.store.records.get_or_create_session("alice", new_id("s"))
    run = Run(
        request_id=new_id("r"),
        principal="alice",
        session_id=session.session_id,
        status="running",
        model="steps",
        created=time.time(),
        prompt=prompt,
        state=RunState(assistant_message_id=new_id("e")),
    )
    await runtime.runs.create(run)
    user = await runtime.tree.add(
        session.session_id,
        "user",
        {"role": "user", "content": prompt},
        request_id=run.request_id,
        parent_id=None,
    )
    run.state.leaf = user.entry_id
    return run


async def with_reply(runtime: Runtime, run: Run, *calls: ToolCall) -> RunTools:
    """The run after the model asked for ``calls``: its reply in the tree, the step to run."""
    reply = await runtime.tree.add(
        run.session_id,
        "assistant",
        Message("assistant", "", tool_calls=list(calls)).to_json(),
        request_id=run.request_id,
        parent_id=run.state.leaf,
    )
    run.state.leaf = run.state.last_assistant = reply.entry_id
    run.state.step = 1
    return RunTools(reply_id=reply.entry_id, calls=list(calls))


async def events(runtime: Runtime, run: Run) -> list[str]:
    runtime.store.commit()
    return [e.event_type for e in await runtime.store.events.read_after(run.request_id, -1)]


async def result_of(runtime: Runtime, run: Run, call_id: str) -> str:
    path = await runtime.store.records.path(run.session_id, run.state.leaf)
    [content] = [e.message["content"] for e in path if e.message.get("tool_call_id") == call_id]
    return str(content)


async def test_call_model_sends_its_request_and_returns_the_calls_to_run(
    runtime: Runtime,
) -> None:
    model = ScriptedModel(
        [ScriptedTurn(text="Let me look.", tool_calls=[ScriptedToolCall("list_files", id="c1")])]
    )
    run = await new_run(runtime, model)
    request = ModelRequest(system="be brief", messages=[Message("user", "hello")], tools=[])
    after = await (await runtime.loop(run)).step(CallModel(request, Estimate(12, "heuristic")))
    assert model.requests == [request], "the step sends the request it carries, as it is"
    assert isinstance(after, RunTools)
    assert [(c.id, c.name) for c in after.calls] == [("c1", "list_files")]
    reply = await runtime.store.records.get_entry(after.reply_id)
    assert reply is not None and reply.message["content"] == "Let me look."
    assert run.state.step == 1 and run.state.next == after, "kept for the next activation"
    stored = await runtime.runs.get(run.request_id)
    assert stored is not None and stored.state.next == after


async def test_call_model_without_calls_finishes(runtime: Runtime) -> None:
    run = await new_run(runtime, ScriptedModel([ScriptedTurn(text="Hi.")]))
    request = ModelRequest(system="", messages=[Message("user", "hello")], tools=[])
    after = await (await runtime.loop(run)).step(CallModel(request, Estimate(3, "heuristic")))
    assert after == Finish(FinishReason.STOP)


async def test_run_tools_asks_permission_and_keeps_itself_for_the_decision(
    runtime: Runtime,
) -> None:
    run = await new_run(runtime, ScriptedModel([]))
    step = await with_reply(runtime, run, ToolCall("c1", "write_note", '{"text": "hi"}'))
    after = await (await runtime.loop(run)).step(step)
    assert isinstance(after, Suspend) and after.reason.type == SuspendType.PERMISSION_ASK
    assert run.state.ask is not None and run.state.ask.tool_call_id == "c1"
    kept = run.state.next
    assert isinstance(kept, RunTools) and kept.verdict is not None, "decided once, kept"
    assert kept.model_copy(update={"verdict": None}) == step, "the step waits for the decision"
    assert WRITTEN == [] and "PERMISSION_ASK" in await events(runtime, run)


async def test_run_tools_resumed_with_an_approval_runs_the_call_without_asking(
    runtime: Runtime,
) -> None:
    run = await new_run(runtime, ScriptedModel([]))
    step = await with_reply(runtime, run, ToolCall("c1", "write_note", '{"text": "hi"}'))
    approved = step.model_copy(update={"resumed": Approval(tool_call_id="c1", approved=True)})
    after = await (await runtime.loop(run)).step(approved)
    assert after == BuildRequest() and run.state.next == BuildRequest()
    assert WRITTEN == ["hi"] and await result_of(runtime, run, "c1") == "noted: hi"
    assert "PERMISSION_ASK" not in await events(runtime, run)


async def test_run_tools_resumed_with_a_refusal_tells_the_model(runtime: Runtime) -> None:
    run = await new_run(runtime, ScriptedModel([]))
    step = await with_reply(runtime, run, ToolCall("c1", "write_note", '{"text": "hi"}'))
    denied = step.model_copy(update={"resumed": Approval(tool_call_id="c1", approved=False)})
    assert await (await runtime.loop(run)).step(denied) == BuildRequest()
    assert WRITTEN == [] and "denied permission" in await result_of(runtime, run, "c1")


async def test_a_tool_asking_through_its_scope_suspends_then_gets_the_answer(
    runtime: Runtime,
) -> None:
    run = await new_run(runtime, ScriptedModel([]))
    step = await with_reply(
        runtime, run, ToolCall("c1", "pick_colour", '{"among": ["red", "blue"]}')
    )
    after = await (await runtime.loop(run)).step(step)
    assert isinstance(after, Suspend) and after.reason.type == SuspendType.CLARIFY_REQUEST
    kept = run.state.next
    assert isinstance(kept, RunTools) and kept.waiting == "c1"
    assert run.state.ask is not None and run.state.ask.to_wire().kind == "clarify"
    answered = kept.model_copy(update={"resumed": Answer(tool_call_id="c1", text="blue")})
    assert await (await runtime.loop(run)).step(answered) == BuildRequest()
    assert await result_of(runtime, run, "c1") == "picked blue"
    kinds = await events(runtime, run)
    assert kinds.count("TOOL_START") == 1, "the call goes on in the card it opened"
    assert kinds.count("CLARIFY_REQUEST") == 1 and kinds.count("TOOL_COMPLETED") == 1


async def test_build_request_over_the_step_limit_finishes(runtime: Runtime) -> None:
    run = await new_run(runtime, ScriptedModel([]))
    run.state.step = runtime.config.max_steps
    after = await (await runtime.loop(run)).step(BuildRequest())
    assert isinstance(after, Finish) and after.reason == FinishReason.MAX_STEPS


async def test_build_request_over_budget_compacts_first_then_stops(runtime: Runtime) -> None:
    run = await new_run(runtime, ScriptedModel([]), prompt="x" * 4000)
    runtime.config.prompt_budget = 100
    after = await (await runtime.loop(run)).step(BuildRequest())
    assert isinstance(after, Compact) and after.scope == "in-loop"
    assert after.then == BuildRequest(compacted=True)
    assert run.state.next == after


async def test_build_request_within_budget_returns_the_request_to_send(runtime: Runtime) -> None:
    run = await new_run(runtime, ScriptedModel([]), prompt="what is in data.csv?")
    after = await (await runtime.loop(run)).step(BuildRequest())
    assert isinstance(after, CallModel)
    assert after.request.messages[-1].content == "what is in data.csv?"
    assert {"write_note", "pick_colour"} <= {t.name for t in after.request.tools}
    assert run.state.next == BuildRequest(), "a request is built again, never stored"


async def test_compact_alone_ends_a_manual_compaction(runtime: Runtime) -> None:
    run = await new_run(runtime, ScriptedModel([ScriptedTurn(text="the gist")]))
    await with_reply(runtime, run)  # a first turn to summarise, then the current one
    second = await runtime.tree.add(
        run.session_id,
        "user",
        {"role": "user", "content": "and now?"},
        request_id=run.request_id,
        parent_id=run.state.leaf,
    )
    run.state.leaf = second.entry_id
    after = await (await runtime.loop(run)).step(
        Compact(scope="manual", instructions="keep numbers")
    )
    assert after == Finish(FinishReason.STOP, "compacted the conversation")
    path = await runtime.store.records.path(run.session_id, run.state.leaf)
    assert path[0].role == "summary" and "the gist" in path[0].message["content"]


def test_every_stored_step_survives_the_store() -> None:
    steps: list[Any] = [
        BuildRequest(compacted=True),
        RunTools(
            reply_id="e1",
            calls=[ToolCall("c1", "python", '{"code": "1"}')],
            resumed=Answer(tool_call_id="c1", text="yes"),
            waiting="c1",
        ),
        Compact(scope="reactive", tokens_before=900, then=BuildRequest(reactive_compacted=True)),
    ]
    for step in steps:
        state = RunState(next=step)
        again = RunState.model_validate_json(state.model_dump_json())
        assert again.next == step
