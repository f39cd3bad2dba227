"""Crews from a notebook's kernel: ``%neta crew run`` and ``neta_jupyter.crew`` with their board."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.kernel.test_embedded import kernel

pytestmark = pytest.mark.timeout(120)

CREW = {
    "name": "files",
    "inputs": ["first"],
    "agents": [{"name": "reader", "role": "You read files."}],
    "tasks": [
        {"id": "one", "agent": "reader", "description": "read {first}"},
        {"id": "two", "agent": "reader", "description": "read data.csv"},
        {
            "id": "summary",
            "agent": "reader",
            "description": "read notes.txt, knowing: {one} {two}",
            "depends_on": ["one", "two"],
        },
    ],
}

REPORT = """
import json
print(json.dumps({"status": c.status, "outputs": c.outputs, "tasks": {
    t: d["status"] for t, d in c.tasks.items()}, "error": c.error}))
"""


def _files(root: Path, **changes: object) -> None:
    (root / "notes.txt").write_text("first note\nsecond note\n")
    (root / "data.csv").write_text("a,b\n1,2\n")
    (root / "crew.yaml").write_text(json.dumps({**CREW, **changes}))


async def test_the_crew_magic_runs_a_crew_file_and_redraws_its_board(tmp_path: Path) -> None:
    _files(tmp_path)
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0"}) as k:
        await k.run("%load_ext neta_jupyter\nimport neta_jupyter")
        own = await k.run("%neta crew run crew.yaml --input first=notes.txt --approve auto")
        [shown] = [m["content"]["data"] for m in own if m["msg_type"] == "display_data"]
        widget = "application/vnd.jupyter.widget-view+json" in shown
        assert widget or "neta-crew" in shown["text/html"]
        await k.run("c = neta_jupyter.last_crew()\nawait c.wait()", timeout=100)
        report = await k.json(REPORT)
        assert report["status"] == "completed", report
        assert report["tasks"] == dict.fromkeys(("one", "two", "summary"), "completed")
        assert "notes.txt" in report["outputs"]["summary"]
        if widget:  # the board's state went to its view as the crew went on
            states = [
                m["content"]["data"]["state"]["board"]["status"]
                for m in k.messages
                if m["msg_type"] == "comm_msg"
                and "board" in (m["content"].get("data", {}).get("state") or {})
            ]
        else:
            states = [
                m["content"]["data"]["text/html"].split("data-status='")[1].split("'")[0]
                for m in k.messages
                if m["msg_type"] == "update_display_data"
            ]
        assert "running" in states and states[-1] == "completed"
        # A task opens into its own run, followed like any run.
        child = await k.json(
            "r = c.run('summary')\nawait r.wait(30)\n"
            "print(json.dumps([r.request_id == c.tasks['summary']['childRequestId'], r.status]))"
        )
        assert child == [True, "completed"]


async def test_a_bad_definition_raises_naming_the_field_and_starts_nothing(
    tmp_path: Path,
) -> None:
    _files(tmp_path)
    code = """
import neta_jupyter, json
from neta_jupyter.crews import CrewDefinitionError
out = []
for definition, inputs in [
    ({**CREW, "tasks": [dict(CREW["tasks"][0], depends_on=["one"])]}, {"first": "x"}),
    ({**CREW, "tasks": [dict(CREW["tasks"][0], agent="nobody")]}, {"first": "x"}),
    (CREW, {}),
]:
    try:
        neta_jupyter.crew(definition, inputs)
    except CrewDefinitionError as exc:
        out.append(exc.field)
print(json.dumps({"fields": out, "crew": repr(neta_jupyter.last_crew())}))
"""
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0"}) as k:
        report = await k.json(f"CREW = {CREW!r}\n{code}")
    assert report == {
        "fields": ["tasks[0].depends_on", "tasks[0].agent", "inputs.first"],
        "crew": "None",
    }


async def test_a_decision_is_answered_from_python_and_the_crew_goes_on(tmp_path: Path) -> None:
    gated = [dict(CREW["tasks"][0], approval="before")]  # type: ignore[index]
    _files(tmp_path, tasks=gated)
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0"}) as k:
        await k.run("import neta_jupyter\nc = neta_jupyter.crew('crew.yaml', {'first': 'a'})")
        await k.run("await c.settled()", timeout=60)
        waiting = await k.json(
            "import json\nprint(json.dumps([c.status, [w['kind'] for w in c.waiting_for]]))"
        )
        assert waiting == ["waiting", ["approval_before"]]
        reply = await k.json(
            "r = await c.decide('one', 'answer', approved=True)\nprint(json.dumps(r['applied']))"
        )
        assert reply is True
        await k.run("await c.wait()", timeout=60)
        report = await k.json(REPORT)
        assert report["status"] == "completed", report


async def test_a_board_view_follows_a_tasks_run_through_the_boards_comm(tmp_path: Path) -> None:
    """Where the page cannot reach the runs itself, an opened task's run comes over the comm."""
    from tests.widgets.test_comm_in_kernel import custom, to_widget

    _files(tmp_path, tasks=[CREW["tasks"][1]])  # type: ignore[index]
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0"}) as k:
        await k.run("%load_ext neta_jupyter\nimport json, neta_jupyter")
        own = await k.run("c = neta_jupyter.crew('crew.yaml', {'first': 'a'}, approve='auto')")
        opened = [
            m
            for m in own
            if m["msg_type"] == "comm_open" and "board" in m["content"]["data"]["state"]
        ]
        if not opened:
            pytest.skip("the board's module is not built (cd js && npm run build)")
        comm_id = opened[0]["content"]["comm_id"]
        assert opened[0]["content"]["data"]["state"]["board"]["mode"] == "embedded"
        await k.run("await c.wait()", timeout=60)
        child = await k.json("print(json.dumps(c.tasks['two']['childRequestId']))")

        def about(after: int, kind: str = "events") -> list[dict[str, Any]]:
            found = [custom(m) or {} for m in k.messages[after:] if m["msg_type"] == "comm_msg"]
            return [c for c in found if c.get("kind") == kind and c.get("requestId") == child]

        mark = len(k.messages)
        to_widget(k, comm_id, {"kind": "replay", "lastSeq": -1, "requestId": child})
        await k.wait_for(
            lambda m: any(
                e["eventType"] == "MESSAGE_COMPLETED" for c in about(mark) for e in c["events"]
            )
        )
        events = [e for c in about(mark) for e in c["events"]]
        assert [e["seq"] for e in events] == list(range(len(events)))
        assert {e["requestId"] for e in events} == {child}
        answer = "".join(
            e["data"].get("text", "") for e in events if e["eventType"].startswith("TEXT_")
        )
        assert "a,b" in answer or "data.csv" in answer, answer

        mark = len(k.messages)
        to_widget(k, comm_id, {"kind": "replay", "lastSeq": -1, "requestId": "r_nobody"})
        to_widget(k, comm_id, {"kind": "unsubscribe", "requestId": child})
        await k.wait_for(
            lambda m: any(
                (custom(x) or {}).get("kind") == "error"
                for x in k.messages[mark:]
                if x["msg_type"] == "comm_msg"
            )
        )
        status = await k.json("print(json.dumps(c.status))")
        assert status == "completed", "the board's comm stays up"
