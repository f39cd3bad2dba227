"""The demo model comments a cell; a change of the cell while it asks makes the edit stale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.helpers import ApiClient, types
from tests.notebook_room import collaboration_config, saved_cells, write_notebook

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
    assert calls == ["read_notebook", "edit_cell", "read_notebook", "edit_cell"]
    answer = "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")
    assert "refused" in answer and "your version" in answer, answer
    (saved,) = saved_cells(path)
    assert saved["source"] == "# monthly totals\ntotal = sum(units)\nprint(total)"
    assert saved["metadata"]["neta"]["requestId"] == rid
