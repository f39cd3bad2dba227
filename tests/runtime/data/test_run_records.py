"""Stored runs: a run saved in an earlier release's shape loads, answers its status and resumes."""

from __future__ import annotations

import json
from typing import Any

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.providers.base import ToolCall
from neta_jupyter.runtime import Runtime
from neta_jupyter.runtime.data.state import STATE_VERSION, load_options, load_state
from neta_jupyter.runtime.data.steps import Answer, Approval, RunTools
from neta_jupyter.tools import ToolContext, tool
from tests.helpers import ApiClient

NOTES: list[str] = []


@tool(name="write_note")
async def write_note(ctx: ToolContext, text: str) -> str:
    """Write a note (changes things, so it needs permission)."""
    NOTES.append(text)
    return f"noted: {text}"


async def first_shape(runtime: Runtime, request_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The options and state documents the first release stored for this suspended run.

    Built from the run as stored now, key by key in the first release's names: plain dicts, no
    ``version``, a camelCase ask and usage, ``guard`` and ``shown_of_step``.
    """
    record = await runtime.store.records.get_run(request_id)
    assert record is not None
    run = await runtime.get_run(record.principal, request_id)
    state, ask, usage = run.state, run.state.ask, run.state.usage
    assert ask is not None and state.repeat is not None
    options = {
        "virtualTools": [],
        "tools": None,
        "maxSteps": None,
        "approve": "ask",
        "kernelId": None,
        "notebookPath": None,
        "thinkingLevel": None,
        "kernelVariables": None,
    }
    old_state = {
        "step": state.step,
        "phase": "tools",
        "decisions": {},
        "usage": {
            "promptTokens": usage.prompt_tokens,
            "completionTokens": usage.completion_tokens,
            "cachedTokens": 0,
            "reasoningTokens": 0,
            "totalTokens": usage.total_tokens,
        },
        "assistant_message_id": state.assistant_message_id,
        "assistant_used": True,
        "leaf": state.leaf,
        "last_assistant": state.last_assistant,
        "attempt_seq": state.attempt_seq,
        "failed_tool_steps": 0,
        "repeat": {"signature": state.repeat.signature, "count": 1},
        "guard": {
            "step": state.step,
            "refused": {},
            "repeats": 1,
            "remind": False,
            "stop": False,
            "calls": "write_note",
        },
        "ask": {
            "kind": "permission",
            "askId": ask.ask_id,
            "toolCallId": ask.tool_call_id,
            "toolName": ask.tool_name,
        },
    }
    return options, old_state


async def test_a_run_stored_in_the_first_shape_resumes(api: ApiClient, runtime: Runtime) -> None:
    runtime.tools.register(write_note)
    runtime.models.register(
        "notes",
        ScriptedModel(
            [
                ScriptedTurn(tool_calls=[ScriptedToolCall("write_note", {"text": "hello"})]),
                ScriptedTurn(text="Noted."),
            ]
        ),
    )
    rid = (await api.start("note hello", model="notes"))["requestId"]
    first = await api.segment(rid)
    assert first[-1]["eventType"] == "MESSAGE_SUSPENDED"
    options, state = await first_shape(runtime, rid)
    runtime.store.db.execute(
        "UPDATE runs SET options = ?, state = ? WHERE request_id = ?",
        (json.dumps(options), json.dumps(state), rid),
    )

    status = await api.status(rid)
    assert status["pendingAsk"] == {
        "kind": "permission",
        "askId": state["ask"]["askId"],
        "toolCallId": state["ask"]["toolCallId"],
        "toolName": "write_note",
    }
    assert status["step"] == 1 and status["usage"]["totalTokens"] == state["usage"]["totalTokens"]
    ok = await api.resume(rid, approved=True, askId=state["ask"]["askId"])
    assert ok.status_code == 200, ok.text
    second = await api.segment(rid, first[-1]["seq"])
    [done] = [e["data"] for e in second if e["eventType"] == "TOOL_COMPLETED"]
    assert done["output"] == "noted: hello" and NOTES == ["hello"]
    assert second[-1]["eventType"] == "MESSAGE_COMPLETED"
    stored = await runtime.store.records.get_run(rid)
    assert stored is not None and stored.state["version"] == STATE_VERSION


def no_calls(reply_id: str, leaf: str | None) -> tuple[list[ToolCall], set[str]]:
    raise AssertionError("a run that was not among its tool calls needs none")


def test_every_key_of_the_first_shape_is_read() -> None:
    state = load_state(
        {
            "step": 2,
            "phase": "model",
            "usage": {"promptTokens": 7, "completionTokens": 3, "totalTokens": 10},
            "leaf": "e_leaf",
            "last_assistant": "e_reply",
            "assistant_message_id": "e_reply",
            "assistant_used": True,
            "recoverable": True,
            "remind": "do not repeat",
            "shown_of_step": {
                "step": 3,
                "text": "half an ans",
                "reasoning": "hmm",
                "toolCalls": [{"id": "c1", "name": "read_file", "arguments": '{"pa'}],
            },
            "ask": None,
            "decisions": {"c0": False},
            "answers": {"c9": "qty"},
        },
        no_calls,
    )
    assert (state.step, state.leaf, state.last_assistant, state.recoverable) == (
        2,
        "e_leaf",
        "e_reply",
        True,
    )
    assert state.usage.prompt_tokens == 7 and state.usage.total_tokens == 10
    assert state.remind == "do not repeat"
    kept = state.kept_reply
    assert kept is not None and kept.step == 3 and kept.text == "half an ans"
    assert kept.tool_calls[0].id == "c1" and kept.tool_calls[0].arguments == '{"pa'
    assert state.next.kind == "build_request"
    assert load_options({"kind": "compact", "instructions": "be brief"}).tools is None
    chart = load_options(
        {
            "virtualTools": [{"name": "chart", "mockResponse": "drawn"}],
            "maxSteps": 4,
            "kernelVariables": ["df: DataFrame"],
        }
    )
    assert chart.virtual_tools[0].mock_response == "drawn" and chart.max_steps == 4
    assert chart.kernel_variables == ["df: DataFrame"]


CALLS = [ToolCall("c0", "read_file", "{}"), ToolCall("c1", "write_note", '{"text": "x"}')]


def test_a_decision_kept_by_call_id_becomes_the_decision_of_the_kept_step() -> None:
    """Version 1 kept every decision by call id; a run stopped after an approval, before the
    approved call ran (a shutdown), goes on with that call approved, not asked again."""

    def calls_of(reply_id: str, leaf: str | None) -> tuple[list[ToolCall], set[str]]:
        assert (reply_id, leaf) == ("e_reply", "e_result0")
        return CALLS, {"c0"}

    doc = {
        "version": 1,
        "step": 1,
        "phase": "tools",
        "leaf": "e_result0",
        "last_assistant": "e_reply",
        "decisions": {"c_earlier_step": True, "c1": True},
        "answers": {},
        "verdict": {"step": 1, "refused": {}, "repeats": 1, "calls": "read_file, write_note"},
    }
    step = load_state(doc, calls_of).next
    assert isinstance(step, RunTools)
    assert (step.reply_id, step.calls) == ("e_reply", CALLS)
    assert step.resumed == Approval(tool_call_id="c1", approved=True) and step.waiting is None
    assert step.verdict is not None and step.verdict.calls == "read_file, write_note"
    asked = {
        **doc,
        "decisions": {},
        "ask": {"kind": "clarify", "ask_id": "clr_1", "tool_call_id": "c1", "tool_name": "ask"},
    }
    waiting = load_state(asked, calls_of)
    assert waiting.ask is not None and waiting.ask.to_wire().kind == "clarify"
    assert isinstance(waiting.next, RunTools) and waiting.next.waiting == "c1"
    answered = {**doc, "decisions": {}, "answers": {"c1": "yes"}}
    step = load_state(answered, calls_of).next
    assert isinstance(step, RunTools) and step.resumed == Answer(tool_call_id="c1", text="yes")
