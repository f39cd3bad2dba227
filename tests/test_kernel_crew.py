"""Crews from a notebook's kernel: ``%neta crew run`` and ``neta_jupyter.crew`` with their board."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_kernel_embedded import kernel

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
