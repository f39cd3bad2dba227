"""A run names its notebook as the kernel knows it: the tools find it under the server root."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, script
from tests.notebook_room import collaboration_config, saved_cells, write_notebook
from tests.tools.test_notebook_revert import BEFORE, edit_run, revert

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def jp_server_config(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    return collaboration_config(jp_root_dir, tmp_path)


async def read_output(api: ApiClient, runtime: Runtime, notebook_path: str) -> str:
    script(
        runtime,
        ScriptedTurn(tool_calls=[ScriptedToolCall("read_notebook", {})]),
        ScriptedTurn(text="done"),
    )
    started = await api.start("read it", model="scripted", notebookPath=notebook_path)
    events = await api.segment(started["requestId"])
    ended = [e for e in events if e["eventType"] in ("TOOL_COMPLETED", "TOOL_FAILED")]
    return str(ended[0]["data"].get("output") or ended[0]["data"].get("errorMessage"))


async def test_an_absolute_path_under_the_root_is_the_notebook_there(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    # A kernel JupyterLab started knows its notebook by its absolute path (its session name).
    (jp_root_dir / "work").mkdir()
    write_notebook(jp_root_dir / "work" / "sales.ipynb", ("code", "units = [3, 5, 7]"))
    output = await read_output(api, runtime, str(jp_root_dir / "work" / "sales.ipynb"))
    assert "units = [3, 5, 7]" in output, output


async def test_a_notebook_path_that_is_no_notebook_under_the_root_is_refused(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    write_notebook(outside / "secret.ipynb", ("code", "password = 1"))
    (jp_root_dir / "notes.txt").write_text("not a notebook")
    cases = {
        str(outside / "secret.ipynb"): "INVALID_NOTEBOOK_PATH",
        "../outside/secret.ipynb": "INVALID_NOTEBOOK_PATH",
        "notes.txt": "INVALID_NOTEBOOK_PATH",
        "missing.ipynb": "NOTEBOOK_NOT_FOUND",
        "nul\x00.ipynb": "INVALID_FIELDS",
    }
    for path, code in cases.items():
        response = await api.post("async", {"content": "read it", "notebookPath": path})
        assert response.status_code == 400, (path, response.text)
        assert response.json()["errCode"] == code, (path, response.text)
        assert "Traceback" not in response.text
    assert await no_runs(api)


async def test_a_kernel_the_server_does_not_run_is_refused(api: ApiClient) -> None:
    for kernel_id, code in {"no-such-kernel": "UNKNOWN_KERNEL", "k\x00": "INVALID_FIELDS"}.items():
        response = await api.post("async", {"content": "hi", "kernelId": kernel_id})
        assert response.status_code == 400, (kernel_id, response.text)
        assert response.json()["errCode"] == code, (kernel_id, response.text)
    assert await no_runs(api)


async def no_runs(api: ApiClient) -> bool:
    """No run was started, not even one that failed at once."""
    response = await api.http.get("neta/api/agent/runs")
    assert response.status_code == 200, response.text
    return response.json()["runs"] == []


async def test_undo_by_the_absolute_path_reverts_the_latest_run_there(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    # %neta undo sends the notebook's path as the kernel knows it.
    path = jp_root_dir / "undo.ipynb"
    (cell,) = write_notebook(path, ("code", BEFORE))
    await edit_run(api, runtime, str(path), cell)
    assert len(saved_cells(path)) == 2
    undone = await revert(api, notebookPath=str(path))
    assert undone.status_code == 200, undone.text
    assert undone.json()["edit"]["kind"] == "insert"
    assert [c["source"] for c in saved_cells(path)] == ["total = 0"]
    outside = await revert(api, notebookPath=str(jp_root_dir.parent / "undo.ipynb"))
    assert outside.status_code == 400 and outside.json()["errCode"] == "INVALID_FIELDS"
