"""``insert_cell`` and ``edit_cell`` with ``run``: the cell written runs in the notebook's kernel
in the same call, under the permission rules of running a cell as well as those of writing one;
an edit that would change nothing is refused with what would succeed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import PermissionRule
from tests.helpers import ApiClient, script, types
from tests.notebook_room import collaboration_config, saved_cells, write_notebook
from tests.tools.test_notebook_tools import call, edits_of, outputs_of, run_to_end

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def jp_server_config(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    return collaboration_config(jp_root_dir, tmp_path)


async def run_in_kernel(
    api: ApiClient, runtime: Runtime, serverapp: Any, prompt: str, path: str, *turns: ScriptedTurn
) -> list[dict[str, Any]]:
    """The events of a run of ``turns`` on ``path``, in a kernel started for it and shut down."""
    km = serverapp.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        script(runtime, *turns)
        return await run_to_end(api, prompt, path, kernelId=kernel_id)
    finally:
        await km.shutdown_kernel(kernel_id, now=True)


async def test_an_inserted_cell_runs_in_the_same_call_and_keeps_its_outputs(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    write_notebook(jp_root_dir / "add.ipynb", ("code", "x = 1"))
    events = await run_in_kernel(
        api,
        runtime,
        jp_serverapp,
        "add it",
        "add.ipynb",
        call("insert_cell", source="print('answer', 6 * 7)", run=True),
        ScriptedTurn(text="done"),
    )
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    (result,) = outputs_of(events)
    assert "insert of cell" in result and "answer 42" in result
    added = saved_cells(jp_root_dir / "add.ipynb")[-1]
    assert added["source"] == "print('answer', 6 * 7)"
    assert "answer 42" in str([o.get("text") for o in added["outputs"]])
    assert added["execution_count"] is not None


async def test_an_insert_that_runs_is_asked_about_where_running_a_cell_is(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_notebook(jp_root_dir / "ask.ipynb", ("code", "x = 1"))
    rules = [
        PermissionRule(tool="insert_cell", action="allow"),
        PermissionRule(tool="run_cell", action="ask"),
    ]
    monkeypatch.setattr(runtime.config, "permission_rules", rules)
    script(
        runtime,
        call("insert_cell", source="y = 2"),
        call("insert_cell", source="import os", run=True),
    )
    started = await api.start("add two", model="scripted", notebookPath="ask.ipynb")
    events = await api.segment(started["requestId"])
    asks = [e["data"] for e in events if e["eventType"] == "PERMISSION_ASK"]
    assert len(asks) == 1 and asks[0]["toolName"] == "insert_cell", types(events)
    assert '"run": true' in asks[0]["arguments"].replace('"run":true', '"run": true')
    assert [c["source"] for c in saved_cells(jp_root_dir / "ask.ipynb")] == ["x = 1", "y = 2"]


async def test_a_cell_that_fails_says_how_to_fix_it_and_the_inserted_cell_stays(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    (user_cell,) = write_notebook(jp_root_dir / "fail.ipynb", ("code", "1 / 0"))
    events = await run_in_kernel(
        api,
        runtime,
        jp_serverapp,
        "run and add",
        "fail.ipynb",
        call("run_cell", cell_id=user_cell),
        call("insert_cell", source="{}['missing']", run=True),
        ScriptedTurn(text="done"),
    )
    ran, inserted = outputs_of(events)
    assert types(events).count("TOOL_FAILED") == 2
    assert "ZeroDivisionError" in ran and f'edit_cell {{"cell_id": "{user_cell}"' in ran
    assert "insert of cell" in inserted and "It ran and failed with KeyError: 'missing'" in inserted
    assert "Your next reply must be the edit_cell call with cell_id" in inserted
    added = saved_cells(jp_root_dir / "fail.ipynb")[-1]
    assert added["source"] == "{}['missing']" and added["outputs"][0]["ename"] == "KeyError"


async def test_an_edited_cell_runs_in_the_same_call_and_keeps_its_id(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    (cell,) = write_notebook(jp_root_dir / "fix.ipynb", ("code", "print('answer', 6 * 6)"))
    events = await run_in_kernel(
        api,
        runtime,
        jp_serverapp,
        "fix it",
        "fix.ipynb",
        call("edit_cell", cell_id=cell, source="print('answer', 6 * 7)", run=True),
        ScriptedTurn(text="done"),
    )
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    (result,) = outputs_of(events)
    assert f"edit of cell {cell} applied" in result and "It ran; its output" in result
    assert "answer 42" in result and "run_cell" not in result
    (saved,) = saved_cells(jp_root_dir / "fix.ipynb")
    assert saved["id"] == cell and saved["source"] == "print('answer', 6 * 7)"
    assert "answer 42" in str([o.get("text") for o in saved["outputs"]])


async def test_an_edit_that_runs_is_asked_about_where_running_a_cell_is(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell, other = write_notebook(jp_root_dir / "ask.ipynb", ("code", "x = 1"), ("code", "y = 1"))
    rules = [
        PermissionRule(tool="edit_cell", action="allow"),
        PermissionRule(tool="run_cell", action="ask"),
    ]
    monkeypatch.setattr(runtime.config, "permission_rules", rules)
    script(
        runtime,
        call("edit_cell", cell_id=cell, source="x = 2"),
        call("edit_cell", cell_id=other, source="import os", run=True),
    )
    started = await api.start("change two", model="scripted", notebookPath="ask.ipynb")
    events = await api.segment(started["requestId"])
    asks = [e["data"] for e in events if e["eventType"] == "PERMISSION_ASK"]
    assert len(asks) == 1 and asks[0]["toolName"] == "edit_cell", types(events)
    assert "import os" in asks[0]["preview"]["text"]
    assert [c["source"] for c in saved_cells(jp_root_dir / "ask.ipynb")] == ["x = 2", "y = 1"]


async def test_an_edit_that_changes_nothing_is_refused_with_the_cells_error(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    nb = nbformat.v4.new_notebook()
    failing = nbformat.v4.new_code_cell("total = sales['revenu'].sum()")
    failing.outputs = [nbformat.v4.new_output("error", ename="KeyError", evalue="'revenu'")]
    nb.cells.append(failing)
    (jp_root_dir / "same.ipynb").write_text(nbformat.writes(nb))
    script(
        runtime,
        call("edit_cell", cell_id=failing.id, source="total = sales['revenu'].sum()"),
        call("edit_cell", cell_id=failing.id, source="total = sales['revenue'].sum()"),
        call("edit_cell", cell_id=failing.id, source="total = sales['revenue'].sum()"),
        ScriptedTurn(text="done"),
    )
    events = await run_to_end(api, "fix it", "same.ipynb")
    refused, applied, again = outputs_of(events)
    assert "already has this source, so nothing was changed" in refused
    assert "Its last run failed with KeyError: 'revenu'" in refused
    assert f"Your next reply must be the edit_cell call with cell_id {failing.id!r}" in refused
    assert f"edit of cell {failing.id} applied" in applied
    # The same edit once more: the source is the run's own, so the model is told it is done.
    assert f"cell {failing.id} already holds this source: your edit of it was applied" in again
    assert [e["eventType"] for e in events].count("TOOL_FAILED") == 2
    assert len(edits_of(events)) == 1
    (saved,) = saved_cells(jp_root_dir / "same.ipynb")
    assert saved["source"] == "total = sales['revenue'].sum()"
