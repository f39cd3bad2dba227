"""Budget control plane, compaction and the usage ledger (seed 004), through the real server."""

from __future__ import annotations

import json
from typing import Any

import websockets

from neta_jupyter.providers import ContextTooLong, ScriptedModel, ScriptedTurn, UsagePart
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, assert_in_order, types


def of(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["eventType"] == name]


async def fill_session(api: ApiClient, runtime: Runtime, session: str, turns: int) -> None:
    model = ScriptedModel([ScriptedTurn(text="A long answer. " * 40) for _ in range(turns)])
    runtime.models.register("filler", model)
    for i in range(turns):
        rid = (
            await api.start(f"question {i} " + "details " * 40, model="filler", sessionName=session)
        )["requestId"]
        await api.segment(rid)


async def test_a_long_session_compacts_and_carries_on(api: ApiClient, runtime: Runtime) -> None:
    await fill_session(api, runtime, "long", 4)
    runtime.config.prompt_budget = 600
    model = ScriptedModel(
        [
            ScriptedTurn(text="Users asked four questions; answers were long."),
            ScriptedTurn(text="Here is the next answer."),
        ]
    )
    runtime.models.register("s", model)
    # One tool only, so the estimate does not move when more tools are added to the product.
    events = await api.segment(
        (await api.start("and now?", model="s", sessionName="long", tools=["read_file"]))[
            "requestId"
        ]
    )
    names = types(events)
    assert_in_order(
        names,
        [
            "BUDGET_CHECKED",
            "COMPACTION_START",
            "AGENT_STATUS",
            "COMPACTION_APPLIED",
            "BUDGET_CHECKED",
            "TEXT_START",
            "LEDGER_RECONCILED",
            "TOKEN_USAGE",
            "MESSAGE_COMPLETED",
        ],
    )
    first, second = of(events, "BUDGET_CHECKED")
    assert first["action"] == "compact" and first["reason"] == "exceeds_budget"
    assert first["estimateSource"] == "heuristic" and first["estimateGatePolicy"] == "advisory"
    assert first["estimatedInputTokens"] > 600 and first["promptBudget"] == 600
    assert second["action"] == "allow" and second["reason"] == "within_budget", (
        first,
        second,
        of(events, "COMPACTION_APPLIED"),
        of(events, "COMPACTION_ERROR"),
    )
    assert second["attemptSeq"] == first["attemptSeq"] + 1
    [compacting] = of(events, "AGENT_STATUS")
    assert (
        compacting["code"] == "CONTEXT_COMPACTING"
        and compacting["attributes"]["scope"] == "in-loop"
    )
    assert compacting["attributes"]["maxInput"] == 600
    applied = of(events, "COMPACTION_APPLIED")[0]
    assert applied["tokensAfter"] < applied["tokensBefore"]
    answer_request = model.requests[1].messages
    assert answer_request[0].content.startswith("Summary of the earlier conversation:")
    assert "Users asked four questions" in answer_request[0].content
    assert [m.content for m in answer_request[1:]] == ["and now?"]
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
    # The next prompt in the session builds on the compacted transcript.
    model2 = ScriptedModel([ScriptedTurn(text="ok")])
    runtime.models.register("s2", model2)
    runtime.config.prompt_budget = 100_000
    await api.segment((await api.start("follow-up", model="s2", sessionName="long"))["requestId"])
    contents = [m.content for m in model2.requests[0].messages]
    assert contents[0].startswith("Summary of") and contents[-1] == "follow-up"
    assert len(contents) == 4


async def test_gateable_estimate_over_budget_after_compaction_stops(
    api: ApiClient, runtime: Runtime
) -> None:
    await fill_session(api, runtime, "big", 2)
    runtime.config.prompt_budget = 1000
    model = ScriptedModel([ScriptedTurn(text="summary")], count_tokens=lambda request: 5000)
    runtime.models.register("counted", model)
    events = await api.segment(
        (await api.start("more", model="counted", sessionName="big"))["requestId"]
    )
    checks = of(events, "BUDGET_CHECKED")
    assert [c["action"] for c in checks] == ["compact", "stop"]
    assert checks[1]["reason"] == "exceeds_budget_after_compact_stop"
    assert (
        checks[1]["estimateSource"] == "tokenizer" and checks[1]["estimateGatePolicy"] == "gateable"
    )
    failed = events[-1]["data"]
    assert events[-1]["eventType"] == "MESSAGE_FAILED"
    assert failed["errorCode"] == "LLM_INVALID_REQUEST" and failed["recoverable"] is False
    assert "budget" in failed["errorMessage"]
    model.assert_complete()


async def test_heuristic_estimate_over_budget_after_compaction_is_allowed(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.config.prompt_budget = 10
    model = ScriptedModel([ScriptedTurn(text="answer anyway")])
    runtime.models.register("h", model)
    events = await api.segment(
        (await api.start("a first question that is long enough", model="h"))["requestId"]
    )
    checks = of(events, "BUDGET_CHECKED")
    assert [c["action"] for c in checks] == ["compact", "allow"]
    assert checks[1]["reason"] == "exceeds_budget_after_compact_allow_advisory"
    assert of(events, "COMPACTION_ERROR")[0]["errorMessage"].startswith(
        "nothing before the current turn"
    )
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"


async def test_context_too_long_compacts_reactively_once(api: ApiClient, runtime: Runtime) -> None:
    await fill_session(api, runtime, "r", 2)
    model = ScriptedModel(
        [
            ScriptedTurn(error=ContextTooLong("maximum context length exceeded")),
            ScriptedTurn(text="short summary"),
            ScriptedTurn(text="fits now"),
        ]
    )
    runtime.models.register("ctx", model)
    events = await api.segment((await api.start("q", model="ctx", sessionName="r"))["requestId"])
    assert of(events, "COMPACTION_START")[0]["scope"] == "reactive"
    assert "".join(e["text"] for e in of(events, "TEXT_DELTA")) == "fits now"
    again = ScriptedModel(
        [
            ScriptedTurn(error=ContextTooLong("too long")),
            ScriptedTurn(text="s"),
            ScriptedTurn(error=ContextTooLong("still too long")),
        ]
    )
    runtime.models.register("ctx2", again)
    events = await api.segment((await api.start("q2", model="ctx2", sessionName="r"))["requestId"])
    assert events[-1]["data"]["errorCode"] == "LLM_INVALID_REQUEST"


async def test_ledger_sources_and_session_unknown_usage(api: ApiClient, runtime: Runtime) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(
                text="observed", usage=UsagePart(120, 30, cached_tokens=100, reasoning_tokens=10)
            ),
            ScriptedTurn(text="no usage reported"),
            ScriptedTurn(text="observed again", usage=UsagePart(50, 5)),
        ]
    )
    runtime.models.register("u", model)
    one = await api.segment((await api.start("a", model="u", sessionName="ledger"))["requestId"])
    [ledger] = of(one, "LEDGER_RECONCILED")
    assert (ledger["inputSource"], ledger["outputSource"], ledger["hasUnknownUsage"]) == (
        "observed",
        "observed",
        False,
    )
    assert (ledger["inputTokens"], ledger["outputTokens"]) == (120, 30)
    usage = one[-1]["data"]["usage"]
    assert usage == {
        "promptTokens": 120,
        "completionTokens": 30,
        "cachedTokens": 100,
        "reasoningTokens": 10,
        "totalTokens": 150,
    }
    assert one[-1]["totalTokens"] == 150
    two = await api.segment((await api.start("b", model="u", sessionName="ledger"))["requestId"])
    [ledger] = of(two, "LEDGER_RECONCILED")
    assert (ledger["inputSource"], ledger["outputSource"]) == ("estimated", "unknown")
    assert ledger["outputTokens"] == 0 and ledger["hasUnknownUsage"] is True
    three = await api.segment((await api.start("c", model="u", sessionName="ledger"))["requestId"])
    [usage_event] = of(three, "TOKEN_USAGE")
    assert usage_event["hasUnknownUsage"] is True, "unknown usage is remembered for the session"
    assert usage_event["sessionOutputTokens"] == 35
    assert (
        usage_event["sessionInputTokens"]
        == 120 + of(two, "LEDGER_RECONCILED")[0]["inputTokens"] + 50
    )


async def test_manual_compact_over_websocket(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    await fill_session(api, runtime, "manual", 3)
    runtime.models.register("summ", ScriptedModel([ScriptedTurn(text="three questions so far")]))
    runtime.config.default_model = "summ"
    session_id = (await api.http.get("neta/api/sessions")).json()["sessions"][0]["sessionId"]
    url = server_url.replace("http://", "ws://") + "neta/ws"
    async with websockets.connect(url, additional_headers=jp_auth_header) as ws:
        await ws.send(
            json.dumps({"type": "compact", "sessionId": session_id, "instructions": "be brief"})
        )
        events: list[dict[str, Any]] = []
        while not events or events[-1]["eventType"] != "MESSAGE_COMPLETED":
            frame = json.loads(await ws.recv())
            if isinstance(frame, list):
                events += frame
            else:
                assert frame["type"] in ("subscribed", "started"), frame
    assert_in_order(types(events), ["COMPACTION_START", "COMPACTION_APPLIED", "MESSAGE_COMPLETED"])
    assert of(events, "COMPACTION_START")[0]["scope"] == "manual"
    tree = (await api.http.get("neta/api/sessions/tree", params={"sessionId": session_id})).json()
    active = [e for e in tree["entries"] if e["entryId"] in tree["activePath"]]
    assert (
        active[0]["role"] == "summary"
        and "three questions so far" in active[0]["message"]["content"]
    )
    assert len(active) == 3, "summary + the last question and its answer"
