"""What a notebook-bound run knows of its notebook without copying hashes: the map in its context
(the notebook as it was when the prompt was sent) and the versions of cells it read or wrote,
against which an edit that names no hash is checked. On a real server, driven by scripted runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest

from neta_jupyter.providers import ModelProfile, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.runtime.config import COMPACT_NOTEBOOK_PROMPT, COMPACT_SYSTEM_PROMPT
from tests.helpers import ApiClient, script, types
from tests.notebook_room import collaboration_config, saved_cells, write_notebook
from tests.tools.test_notebook_tools import call, edits_of, outputs_of, run_to_end

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def jp_server_config(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    return collaboration_config(jp_root_dir, tmp_path)


def change_on_disk(path: Path, cell_id: str, source: str) -> None:
    """What saving the notebook from an editor does to the file."""
    nb = nbformat.read(path, as_version=4)
    next(c for c in nb.cells if c.id == cell_id).source = source
    nbformat.write(nb, path)


async def next_ask(api: ApiClient, rid: str, seen: list[dict[str, Any]]) -> dict[str, Any]:
    """The permission ask the run waits at next (the events up to it join ``seen``)."""
    events = await api.segment(rid, int(seen[-1]["seq"]) if seen else None)
    seen += events
    asks = [e["data"] for e in events if e["eventType"] == "PERMISSION_ASK"]
    assert asks, types(events)
    return asks[-1]


async def test_an_edit_without_a_hash_of_a_cell_the_user_changed_since_is_refused_then_lands(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    path = jp_root_dir / "rate.ipynb"
    (cell,) = write_notebook(path, ("code", "rate = 0.1"))
    script(
        runtime,
        call("edit_cell", cell_id=cell, source="rate = 0.2"),
        call("edit_cell", cell_id=cell, source="rate = 0.25 * 2  # doubled"),
        ScriptedTurn(text="done"),
    )
    started = await api.start("double the rate", model="scripted", notebookPath="rate.ipynb")
    rid, events = started["requestId"], []
    ask = await next_ask(api, rid, events)
    # While the agent asks, the user changes the cell the prompt showed; then approves.
    change_on_disk(path, cell, "rate = 0.25  # the user's value")
    assert (await api.resume(rid, approved=True, askId=ask["askId"])).status_code == 200
    ask = await next_ask(api, rid, events)
    assert (await api.resume(rid, approved=True, askId=ask["askId"])).status_code == 200
    events += await api.segment(rid, int(events[-1]["seq"]))
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    refused, landed = outputs_of(events)
    assert "cell changed since you read it" in refused
    assert "rate = 0.25  # the user's value" in refused
    assert "next reply must be the edit_cell call" in refused and "no source_hash needed" in refused
    assert "applied" in landed
    failed = [e for e in events if e["eventType"] == "TOOL_FAILED"]
    assert len(failed) == 1 and len(edits_of(events)) == 1
    assert saved_cells(path)[0]["source"] == "rate = 0.25 * 2  # doubled"


async def test_edits_without_a_hash_of_cells_the_run_saw_or_wrote_are_applied(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    path = jp_root_dir / "seen.ipynb"
    first, second = write_notebook(path, ("code", "a = 1"), ("code", "b = 1"))
    script(
        runtime,
        call("edit_cell", cell_id=first, source="a = 2"),  # as the prompt's notebook showed it
        call("read_notebook", cell_id=second),
        call("edit_cell", cell_id=second, source="b = 2"),  # as read
        call("insert_cell", source="c = 1"),
        ScriptedTurn(text="inserted"),
    )
    events = await run_to_end(api, "change a and b", "seen.ipynb")
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    inserted = next(e["cellId"] for e in edits_of(events) if e["kind"] == "insert")
    script(
        runtime,
        call("edit_cell", cell_id=inserted, source="c = 2"),  # as written by the last run
        call("delete_cell", cell_id=first),
        ScriptedTurn(text="done"),
    )
    events = await run_to_end(api, "change c, drop a", "seen.ipynb")
    assert not [e for e in events if e["eventType"] == "TOOL_FAILED"], outputs_of(events)
    assert [c["source"] for c in saved_cells(path)] == ["b = 2", "c = 2"]


async def test_an_edit_without_a_hash_of_a_cell_added_during_the_run_is_refused(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    path = jp_root_dir / "unseen.ipynb"
    write_notebook(path, ("code", "x = 1"))
    added = nbformat.v4.new_code_cell("secret = 'typed by the user'")
    script(
        runtime,
        call("insert_cell", source="y = 2"),
        call("edit_cell", cell_id=added.id, source="secret = None"),
        ScriptedTurn(text="done"),
    )
    started = await api.start("add y", model="scripted", notebookPath="unseen.ipynb")
    rid, events = started["requestId"], []
    ask = await next_ask(api, rid, events)
    # While the agent asks, the user adds a cell of their own.
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(added)
    nbformat.write(nb, path)
    assert (await api.resume(rid, approved=True, askId=ask["askId"])).status_code == 200
    ask = await next_ask(api, rid, events)
    assert ask["toolName"] == "edit_cell"
    assert (await api.resume(rid, approved=True, askId=ask["askId"])).status_code == 200
    events += await api.segment(rid, int(events[-1]["seq"]))
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    _, refused = outputs_of(events)
    assert f"you have not seen cell {added.id} as it is now" in refused
    assert "secret = 'typed by the user'" in refused
    kept = next(c for c in saved_cells(path) if c["id"] == added.id)
    assert kept["source"] == "secret = 'typed by the user'"


def notebook_with_a_failed_cell(path: Path) -> list[str]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Sales by region"),
        nbformat.v4.new_code_cell("import pandas as pd\nsales = pd.read_csv('sales.csv')"),
        nbformat.v4.new_code_cell("sales['revenu'].sum()"),
    ]
    nb.cells[1].execution_count = 1
    nb.cells[2].execution_count = 2
    nb.cells[2].outputs = [
        nbformat.v4.new_output("error", ename="KeyError", evalue="'revenu'", traceback=[])
    ]
    nbformat.write(nb, path)
    return [c.id for c in nb.cells]


async def test_a_notebook_bound_run_has_the_map_of_its_notebook_in_its_context(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    intro, load, failing = notebook_with_a_failed_cell(jp_root_dir / "map.ipynb")
    model = script(runtime, ScriptedTurn(text="seen"), ScriptedTurn(text="no notebook"))
    events = await run_to_end(api, "what fails?", "map.ipynb")
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    started = await api.start("what fails?", model="scripted", approve="auto")
    assert types(await api.segment(started["requestId"]))[-1] == "MESSAGE_COMPLETED"
    bound, unbound = (r.system for r in model.requests)
    assert "## The user's notebook\nmap.ipynb: 3 cells, in order" in bound
    assert f"- {intro} · markdown · # Sales by region" in bound
    load_shown = f"- {load} · code, ran:\n    import pandas as pd\n    sales = pd.read_csv("
    assert load_shown in bound, "a short cell is shown whole"
    assert f"- {failing} · code, failed: KeyError: 'revenu' · sales['revenu'].sum()" in bound
    assert "## The user's notebook" not in unbound and intro not in unbound


async def test_a_compact_endpoints_run_in_a_notebook_writes_code_into_cells(
    api: ApiClient,
    runtime: Runtime,
    jp_root_dir: Path,
    jp_serverapp: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bound to a notebook: the notebook tools, no python, and a prompt with notebook examples."""
    write_notebook(jp_root_dir / "small.ipynb", ("code", "x = 1"))
    kernel_id = await jp_serverapp.kernel_manager.start_kernel()
    monkeypatch.setattr(runtime.models, "profile", lambda _spec: ModelProfile(compact=True))
    model = script(runtime, ScriptedTurn(text="bound"), ScriptedTurn(text="unbound"))
    try:
        events = await run_to_end(api, "look", "small.ipynb", kernelId=kernel_id)
        assert types(events)[-1] == "MESSAGE_COMPLETED"
        started = await api.start("look", model="scripted", approve="auto", kernelId=kernel_id)
        assert types(await api.segment(started["requestId"]))[-1] == "MESSAGE_COMPLETED"
    finally:
        await jp_serverapp.kernel_manager.shutdown_kernel(kernel_id)
    bound, unbound = ([t.name for t in r.tools] for r in model.requests)
    notebook = ["read_notebook", "insert_cell", "edit_cell", "delete_cell", "move_cell", "run_cell"]
    reading = ["list_files", "read_file", "list_variables", "inspect_variable"]
    assert bound == [*reading, *notebook]
    assert unbound == [*reading, "python"]
    assert model.requests[0].system.startswith(COMPACT_NOTEBOOK_PROMPT)
    assert model.requests[1].system.startswith(COMPACT_SYSTEM_PROMPT)
