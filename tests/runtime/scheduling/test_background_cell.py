"""A notebook cell run in the background: its outputs land in the cell while the run waits
(ASYNC_TOOL_PENDING), and the run goes on by itself with them when the cell ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, script, types
from tests.notebook_room import collaboration_config, saved_cells, until, write_notebook
from tests.runtime.scheduling.test_background import GATED, until_status

pytestmark = pytest.mark.timeout(120)


def printed(path: Path, text: str) -> bool:
    """Whether the notebook's saved cell shows ``text`` in its outputs (a file being written
    does not)."""
    try:
        (cell,) = saved_cells(path)
    except ValueError:
        return False
    return text in "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))


@pytest.fixture
def jp_server_config(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    return collaboration_config(jp_root_dir, tmp_path)


async def test_a_cell_run_in_the_background_fills_in_and_the_run_completes_on_its_own(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, jp_serverapp: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    (training,) = write_notebook(
        jp_root_dir / "train.ipynb", ("code", GATED.format(gate=str(gate)))
    )
    call = ScriptedToolCall("run_cell", {"cell_id": training, "background": True})
    model = script(runtime, ScriptedTurn(tool_calls=[call]), ScriptedTurn(text="trained"))
    km = jp_serverapp.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        started = await api.start(
            "train",
            model="scripted",
            notebookPath="train.ipynb",
            kernelId=kernel_id,
            approve="auto",
        )
        rid = started["requestId"]
        first = await api.segment(rid)
        assert first[-1]["data"]["suspendReason"]["type"] == "ASYNC_TOOL_PENDING", types(first)
        # While the run waits, the cell shows what it printed so far.
        await until(lambda: printed(jp_root_dir / "train.ipynb", "training"), "the first output")
        gate.touch()
        await until_status(api, rid, "completed")
    finally:
        await km.shutdown_kernel(kernel_id, now=True)
    rest = await api.segment(rid, first[-1]["seq"])
    ended = [e["data"] for e in rest if e["eventType"] in ("TOOL_COMPLETED", "TOOL_FAILED")]
    assert [e.get("errorMessage") for e in ended] == [None], types(rest)
    done = ended[0]
    assert "accuracy 0.93" in done["output"]
    assert "accuracy 0.93" in str([m.content for m in model.requests[-1].messages])
    await until(lambda: printed(jp_root_dir / "train.ipynb", "accuracy 0.93"), "the last output")
