"""Run trees in one process: a tree suspended by a shutdown is stopped, superseded or resumed
whole, and a sub-agent's question is answered through the run that delegated."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime, RuntimeConfig
from neta_jupyter.store import Store

TERMINAL = ("MESSAGE_COMPLETED", "MESSAGE_SUSPENDED", "MESSAGE_FAILED")
OWNER = "owner"


async def log(runtime: Runtime, rid: str) -> list[dict[str, Any]]:
    stored = await runtime.store.events.read_after(rid, -1, 100_000)
    return [json.loads(e.payload) for e in stored]


async def terminals(runtime: Runtime, rid: str) -> list[str]:
    return [e["eventType"] for e in await log(runtime, rid) if e["eventType"] in TERMINAL]


async def status(runtime: Runtime, rid: str) -> str:
    return (await runtime.get_run(OWNER, rid)).status


async def ended(runtime: Runtime, rid: str) -> bool:
    return await status(runtime, rid) != "running"


def delegating(runtime: Runtime, tasks: list[dict[str, Any]]) -> None:
    call = ScriptedToolCall("delegate", {"tasks": tasks}, id="call_delegate")
    runtime.models.register(
        "boss", ScriptedModel([ScriptedTurn(tool_calls=[call]), ScriptedTurn(text="all done")])
    )


@asynccontextmanager
async def a_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    store = Store(tmp_path / "db")
    config = RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path, subagent_concurrency=2)
    rt = Runtime(store, config)
    try:
        yield rt
    finally:
        await rt.shutdown()
        store.close()


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 60.0) -> None:
    """Wait for ``await check()``, giving up after a generous ``timeout``."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "gave up waiting"
        await asyncio.sleep(0.01)


async def suspended_tree(runtime: Runtime) -> tuple[Runtime, str, list[str]]:
    """A parent with three children (two writing, one waiting for a slot), shut down; the
    runtime of the next start, on the same store."""
    runtime.models.register(
        "slow", lambda: ScriptedModel([ScriptedTurn(text=["w "] * 400, delay=0.005)])
    )
    delegating(runtime, [{"task": f"part {i}", "model": "slow"} for i in range(3)])
    rid = (await runtime.start(OWNER, "do three parts", model="boss")).request_id

    async def writing() -> bool:
        lines = [e["data"].get("message") for e in await log(runtime, rid)]
        return lines.count("Writing its answer") >= 2

    await until(writing)
    children = [c.request_id for c in await runtime.subagents.children(rid)]
    await runtime.shutdown()
    after = Runtime(runtime.store, runtime.config, models=runtime.models, tools=runtime.tools)
    assert await after.recover() == 0, "a shutdown leaves nothing running"
    for request_id in [rid, *children]:
        assert await status(after, request_id) == "suspended"
    return after, rid, children


async def test_terminating_a_suspended_parent_ends_its_suspended_children(tmp_path: Path) -> None:
    async with a_runtime(tmp_path) as runtime:
        after, rid, children = await suspended_tree(runtime)
        await after.terminate(OWNER, rid)
        for request_id in [rid, *children]:
            assert await status(after, request_id) == "failed"
            assert await terminals(after, request_id) == ["MESSAGE_SUSPENDED", "MESSAGE_FAILED"]
            assert (await log(after, request_id))[-1]["data"]["errorCode"] == "USER_CANCELLED"


async def test_a_new_prompt_supersedes_a_suspended_tree_whole(tmp_path: Path) -> None:
    async with a_runtime(tmp_path) as runtime:
        after, rid, children = await suspended_tree(runtime)
        session = (await after.get_run(OWNER, rid)).session_id
        after.models.register("plain", ScriptedModel([ScriptedTurn(text="fresh start")]))
        new = await after.start(OWNER, "something else", session_id=session, model="plain")
        await after.wait(new.request_id)
        assert await status(after, new.request_id) == "completed"
        for request_id in [rid, *children]:
            assert await terminals(after, request_id) == ["MESSAGE_SUSPENDED", "MESSAGE_FAILED"]
        await after.shutdown()


async def test_a_resumed_parent_resumes_its_interrupted_children(tmp_path: Path) -> None:
    async with a_runtime(tmp_path) as runtime:
        after, rid, children = await suspended_tree(runtime)
        await after.resume(OWNER, rid)
        await until(lambda: ended(after, rid))
        assert await status(after, rid) == "completed"
        for request_id in children:
            assert await status(after, request_id) == "completed"
            assert await terminals(after, request_id) == ["MESSAGE_SUSPENDED", "MESSAGE_COMPLETED"]
        events = await log(after, rid)
        result = next(e for e in reversed(events) if e["eventType"] == "TOOL_COMPLETED")
        assert "3 of 3 completed" in result["data"]["output"]
        await after.shutdown()


async def test_a_childs_question_is_answered_through_the_parent(tmp_path: Path) -> None:
    async with a_runtime(tmp_path) as runtime:
        question = ScriptedToolCall("clarify", {"question": "Which colour?", "options": ["red"]})
        runtime.models.register(
            "curious",
            ScriptedModel([ScriptedTurn(tool_calls=[question]), ScriptedTurn(text="blue it is")]),
        )
        delegating(runtime, [{"task": "pick a colour", "model": "curious"}])
        rid = (await runtime.start(OWNER, "pick for me", model="boss")).request_id

        async def asking() -> list[dict[str, Any]]:
            return [
                e["data"]
                for e in await log(runtime, rid)
                if e["eventType"] == "SUBAGENT_EVENT" and e["data"]["status"] == "suspended"
            ]

        async def asked() -> bool:
            return bool(await asking())

        await until(asked)
        [waiting] = await asking()
        assert waiting["status"] == "suspended"
        assert waiting["ask"]["type"] == "clarify" and waiting["ask"]["question"] == "Which colour?"
        child = waiting["childRequestId"]
        await runtime.resume(OWNER, child, ask_id=waiting["ask"]["clarifyId"], answer="blue")
        await until(lambda: ended(runtime, rid))
        assert await status(runtime, rid) == "completed"
        events = await log(runtime, rid)
        final = [e["data"] for e in events if e["eventType"] == "SUBAGENT_EVENT"][-1]
        assert final["status"] == "completed" and final["answerPreview"] == "blue it is"


async def test_a_resumed_parent_makes_the_children_a_stop_left_unmade(tmp_path: Path) -> None:
    async with a_runtime(tmp_path) as runtime:
        after, rid, children = await suspended_tree(runtime)
        # As if the process had stopped after making two of the three children.
        after.store.db.execute("DELETE FROM runs WHERE request_id = ?", (children[2],))
        await after.resume(OWNER, rid)
        await until(lambda: ended(after, rid))
        made = [c.request_id for c in await after.subagents.children(rid)]
        assert made[:2] == children[:2] and made[2] not in children
        assert [await status(after, c) for c in made] == ["completed"] * 3
        events = await log(after, rid)
        result = next(e for e in reversed(events) if e["eventType"] == "TOOL_COMPLETED")
        assert "3 of 3 completed" in result["data"]["output"]
        await after.shutdown()
