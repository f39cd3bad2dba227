"""The demo model in the notebook: it comments a cell (an edit made stale by the user's change is
refused and redone) and runs a cell in the background."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.helpers import ApiClient, types
from tests.notebook_room import collaboration_config, saved_cells, write_notebook
from tests.runtime.scheduling.test_background import until_status

pytestmark = pytest.mark.timeout(120)

PROMPT = "comment the last cell: monthly totals"


@pytest.fixture
def jp_server_config(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    return collaboration_config(jp_root_dir, tmp_path)


async def ask_of(api: ApiClient, rid: str, seen: list[dict[str, Any]]) -> dict[str, Any]:
    """The permission ask the run waits at next (the events up to it join ``seen``)."""
    events = await api.segment(rid, int(seen[-1]["seq"]) if seen else None)
    seen += events
    asks = [e["data"] for e in events if e["eventType"] == "PERMISSION_ASK"]
    assert asks and asks[-1]["toolName"] == "edit_cell", types(events)
    return asks[-1]


def change_on_disk(path: Path, cell_id: str, source: str) -> None:
    """What saving the notebook from an editor does to the file."""
    nb = nbformat.read(path, as_version=4)
    next(c for c in nb.cells if c.id == cell_id).source = source
    nbformat.write(nb, path)


async def test_an_edit_stale_by_the_users_change_is_refused_and_redone_on_it(
    api: ApiClient, jp_root_dir: Path
) -> None:
    path = jp_root_dir / "totals.ipynb"
    (cell,) = write_notebook(path, ("code", "total = sum(units)"))
    started = await api.start(PROMPT, model="demo", notebookPath="totals.ipynb")
    rid = started["requestId"]
    events: list[dict[str, Any]] = []
    ask = await ask_of(api, rid, events)
    assert "+# monthly totals\n" in ask["preview"]["text"]
    # While the agent asks, the user changes the cell; then approves the agent's change.
    change_on_disk(path, cell, "total = sum(units)\nprint(total)")
    assert (await api.resume(rid, approved=True, askId=ask["askId"])).status_code == 200
    ask = await ask_of(api, rid, events)
    assert (
        "+# monthly totals\n" in ask["preview"]["text"] and "print(total)" in ask["preview"]["text"]
    )
    assert (await api.resume(rid, approved=True, askId=ask["askId"])).status_code == 200
    events += await api.segment(rid, int(events[-1]["seq"]))
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    failed = [e["data"] for e in events if e["eventType"] == "TOOL_FAILED"]
    assert len(failed) == 1 and "cell changed since you read it" in failed[0]["errorMessage"]
    assert "print(total)" in failed[0]["errorMessage"]  # the current source comes with it
    calls = [e["data"]["toolName"] for e in events if e["eventType"] == "TOOL_START"]
    assert calls == ["read_notebook", "edit_cell", "edit_cell"]  # redone on the refusal's source
    edits = [e["data"]["arguments"] for e in events if e["eventType"] == "TOOL_START"][1:]
    assert not [a for a in edits if "source_hash" in a]
    answer = "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")
    assert "refused" in answer and "your version" in answer, answer
    (saved,) = saved_cells(path)
    assert saved["source"] == "# monthly totals\ntotal = sum(units)\nprint(total)"
    assert saved["metadata"]["neta"]["requestId"] == rid


SLOW = "import time\ntime.sleep(1)\nprint('forecast ready')"


async def test_a_cell_run_in_the_background_suspends_the_run_until_it_ends(
    api: ApiClient, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    path = jp_root_dir / "slow.ipynb"
    _, slow, _ = write_notebook(path, ("code", "x = 1"), ("code", SLOW), ("code", "y = 2"))
    kernel_id = await jp_serverapp.kernel_manager.start_kernel()
    try:
        started = await api.start(
            f"run cell {slow} in the background", model="demo", notebookPath="slow.ipynb",
            kernelId=kernel_id, approve="auto",
        )  # fmt: skip
        rid = started["requestId"]
        first = await api.segment(rid)
        assert first[-1]["eventType"] == "MESSAGE_SUSPENDED", types(first)
        assert first[-1]["data"]["suspendReason"]["type"] == "ASYNC_TOOL_PENDING"
        await until_status(api, rid, "completed")  # by itself, once the cell ended
        rest = await api.segment(rid, int(first[-1]["seq"]))
        assert types(rest)[-1] == "MESSAGE_COMPLETED"
    finally:
        await jp_serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)
    calls = [e["data"] for e in first if e["eventType"] == "TOOL_START"]
    assert [c["toolName"] for c in calls] == ["read_notebook", "run_cell"]
    assert (
        f'"cell_id": "{slow}"' in calls[1]["arguments"]
        and '"background": true' in calls[1]["arguments"]
    )
    answer = "".join(e["data"]["text"] for e in rest if e["eventType"] == "TEXT_DELTA")
    assert "forecast ready" in answer, answer
    cell = next(c for c in saved_cells(path) if c["id"] == slow)
    assert "forecast ready" in "".join("".join(o.get("text", "")) for o in cell["outputs"])
