"""The notebook tools on a real server with the collaboration extension, driven by scripted runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools.notebook_doc import source_hash
from tests.helpers import ApiClient, script, types
from tests.notebook_room import (
    cell_by_id,
    collaboration_config,
    joined,
    saved_cells,
    until,
    write_notebook,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def jp_server_config(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    return collaboration_config(jp_root_dir, tmp_path)


def call(name: str, **arguments: Any) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedToolCall(name, arguments)])


def edits_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["data"]["payload"]
        for e in events
        if e["eventType"] == "TOOL_EVENT" and e["data"].get("category") == "notebook_edit"
    ]


def outputs_of(events: list[dict[str, Any]]) -> list[str]:
    """What each tool call gave the model (its output or its error)."""
    return [
        e["data"].get("output") or e["data"].get("errorMessage") or ""
        for e in events
        if e["eventType"] in ("TOOL_COMPLETED", "TOOL_FAILED")
    ]


async def run_to_end(api: ApiClient, prompt: str, path: str, **fields: Any) -> list[dict[str, Any]]:
    started = await api.start(prompt, model="scripted", notebookPath=path, approve="auto", **fields)
    return await api.segment(started["requestId"])


async def test_no_room_the_file_is_changed_and_saved_with_provenance(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    first, second = write_notebook(
        jp_root_dir / "plain.ipynb", ("markdown", "# Sales"), ("code", "x = 1")
    )
    script(
        runtime,
        call("read_notebook"),
        call("insert_cell", source="print(x + 1)", after_cell_id=first),
        call("edit_cell", cell_id=second, source="x = 2", source_hash=source_hash("x = 1")),
        ScriptedTurn(text="done"),
    )
    events = await run_to_end(api, "add a cell\nthat prints x", "plain.ipynb")
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    read, inserted, edited = outputs_of(events)
    assert f"id {first} · markdown · hash {source_hash('# Sales')}" in read
    assert "x = 1" in read
    assert "the file was saved" in inserted and "the file was saved" in edited
    cells = saved_cells(jp_root_dir / "plain.ipynb")
    assert [c["source"] for c in cells] == ["# Sales", "print(x + 1)", "x = 2"]
    neta = cells[1]["metadata"]["neta"]
    assert neta["requestId"] == events[0]["requestId"] and neta["prompt"] == "add a cell"
    assert neta["toolCallId"]
    kinds = [(e["kind"], e["via"]) for e in edits_of(events)]
    assert kinds == [("insert", "file"), ("edit", "file")]
    assert "-x = 1\n+x = 2\n" in edits_of(events)[1]["diff"]


async def test_edits_merge_with_the_user_typing_in_the_shared_document(
    api: ApiClient,
    runtime: Runtime,
    jp_root_dir: Path,
    server_url: str,
    jp_auth_header: dict[str, str],
) -> None:
    user_cell, agent_cell = write_notebook(
        jp_root_dir / "live.ipynb", ("code", "a = 1"), ("code", "b = 1")
    )
    async with joined(api.http, server_url, jp_auth_header, "live.ipynb") as notebook:
        index = next(i for i in range(2) if notebook.ycells[i]["id"] == user_cell)
        script(
            runtime,
            call("read_notebook"),
            call("edit_cell", cell_id=agent_cell, source="b = 2", source_hash=source_hash("b = 1")),
            call("insert_cell", source="c = a + b", position="end"),
            ScriptedTurn(text="done"),
        )
        started = await api.start(
            "change b", model="scripted", notebookPath="live.ipynb", approve="auto"
        )
        typed = notebook.ycells[index]["source"]
        typed += "  # typed by the user"  # while the run works
        events = await api.segment(started["requestId"])
        assert types(events)[-1] == "MESSAGE_COMPLETED"
        await until(lambda: notebook.cell_number == 3, "the inserted cell never arrived")
        assert cell_by_id(notebook, agent_cell)["source"] == "b = 2"  # type: ignore[index]
        assert cell_by_id(notebook, user_cell)["source"] == "a = 1  # typed by the user"  # type: ignore[index]
        assert [e["via"] for e in edits_of(events)] == ["shared", "shared"]

        def saved() -> bool:
            sources = [c["source"] for c in saved_cells(jp_root_dir / "live.ipynb")]
            return sources == ["a = 1  # typed by the user", "b = 2", "c = a + b"]

        await until(saved, "the room never saved both changes")
    cells = saved_cells(jp_root_dir / "live.ipynb")
    assert cells[1]["metadata"]["neta"]["requestId"] == started["requestId"]
    assert cells[2]["metadata"]["neta"]["prompt"] == "change b"
