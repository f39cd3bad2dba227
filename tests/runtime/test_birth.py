"""One birth for every kind of run: the same first event, the prompt as the branch's first entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime, RuntimeConfig
from neta_jupyter.runtime.data.runs import Run
from neta_jupyter.runtime.data.state import McpClient, RunOptions, load_options
from neta_jupyter.store import Store


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    return Runtime(Store.in_memory(), RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path / "data"))


async def events(runtime: Runtime, request_id: str) -> list[dict[str, Any]]:
    rows = await runtime.store.events.read_after(request_id, -1)
    return [json.loads(row.payload) for row in rows]


async def ended(runtime: Runtime, run: Run) -> Run:
    await runtime.wait(run.request_id)
    return await runtime.runs.get(run.request_id)


async def test_a_started_run_is_born_top_level_with_its_prompt_as_the_new_leaf(
    runtime: Runtime,
) -> None:
    runtime.models.register("say", ScriptedModel([ScriptedTurn(text="hi")]))
    run = await ended(runtime, await runtime.start("alice", "hello", model="say"))
    assert run.options.kind == "top"
    first = (await events(runtime, run.request_id))[0]
    assert first["eventType"] == "SESSION_CREATED"
    prompt = await runtime.store.records.get_entry(first["data"]["userMessageId"])
    assert prompt is not None and prompt.message["content"] == "hello"
    assert prompt.request_id == run.request_id


async def test_a_compaction_is_born_without_a_prompt_of_its_own(runtime: Runtime) -> None:
    runtime.models.register("say", ScriptedModel([ScriptedTurn(text="hi"), ScriptedTurn(text="s")]))
    first = await ended(runtime, await runtime.start("alice", "hello", model="say"))
    compaction = await runtime.compact_session("alice", first.session_id, model="say")
    await runtime.wait(compaction.request_id)
    assert compaction.options.kind == "top"
    born = (await events(runtime, compaction.request_id))[0]
    assert born["eventType"] == "SESSION_CREATED"
    assert born["data"].get("userMessageId") is None


async def test_a_sub_agent_is_born_below_its_entry_in_the_parents_tree(runtime: Runtime) -> None:
    call = ScriptedToolCall("delegate", {"tasks": [{"task": "count to three"}]}, id="c1")
    runtime.models.register(
        "lead", ScriptedModel([ScriptedTurn(tool_calls=[call]), ScriptedTurn(text="done")])
    )
    runtime.config.default_model = "lead"
    runtime.models.register("lead-child", ScriptedModel([ScriptedTurn(text="1 2 3")]))
    parent = await runtime.start("alice", "split it", model="lead")
    parent = await ended(runtime, parent)
    [child] = await runtime.subagents.children(parent.request_id)
    assert child.options.kind == "subagent"
    born = (await events(runtime, child.request_id))[0]
    assert born["eventType"] == "SESSION_CREATED"
    prompt = await runtime.store.records.get_entry(born["data"]["userMessageId"])
    assert prompt is not None and prompt.message["content"] == "count to three"
    above = await runtime.store.records.get_entry(prompt.parent_id or "")
    assert above is not None and above.role == "subagent"
    assert above.message["childRequestId"] == child.request_id
    session = await runtime.store.records.get_session(parent.session_id)
    assert session is not None and session.leaf_entry_id != prompt.entry_id


@pytest.mark.parametrize(("call_id", "kind"), [("crew:clean", "crew_task"), ("call_7", "subagent")])
def test_options_stored_before_the_kind_was_kept_are_read_with_it(call_id: str, kind: str) -> None:
    delegated = {
        "parentToolCallId": call_id,
        "batchId": "b",
        "agentId": "a",
        "index": 0,
        "entryId": "e",
    }
    assert load_options({"version": 1, "delegated": delegated}).kind == kind
    assert load_options({"version": 1}).kind == "top"
    assert load_options({"kind": "compact", "instructions": "be brief"}).kind == "top"


def test_an_mcp_run_keeps_its_kind_and_client_and_older_options_have_none() -> None:
    options = RunOptions(kind="mcp", mcp_client=McpClient(name="claude-code", version="2.1.0"))
    stored = load_options(json.loads(json.dumps(options.to_document())))
    assert stored.kind == "mcp"
    assert stored.mcp_client == McpClient(name="claude-code", version="2.1.0")
    assert options.to_document()["mcpClient"] == {"name": "claude-code", "version": "2.1.0"}
    assert load_options({"version": 1, "kind": "top"}).mcp_client is None
