"""An approval binds to what the prompt showed: a cell changed after it was shown does not run.

The permission ask carries a digest of the call and of the state it acts on (a cell's whole
source); the decision names it, and when the call would now act on something else it is not run
but asked about again, with what it would run now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, script, types
from tests.notebook_room import collaboration_config, saved_cells, write_notebook
from tests.tools.test_kernel_tools import kernel_of
from tests.tools.test_notebook_tools import call, outputs_of

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def jp_server_config(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    return collaboration_config(jp_root_dir, tmp_path)


def rewrite_cell(path: Path, source: str) -> None:
    """What a sibling sub-agent or another tab does to the cell while the prompt is open."""
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = source
    nbformat.write(nb, path)


def asks(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["eventType"] == "PERMISSION_ASK"]


async def test_a_cell_changed_after_its_prompt_is_not_run_but_asked_about_again(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    path = jp_root_dir / "bound.ipynb"
    (cell,) = write_notebook(path, ("code", "print('benign ' + 'output')"))
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        script(runtime, call("run_cell", cell_id=cell), ScriptedTurn(text="done"))
        started = await api.start(
            "run it", model="scripted", notebookPath="bound.ipynb", kernelId=kernel_id
        )
        rid = started["requestId"]
        events = await api.segment(rid)
        (shown,) = asks(events)
        assert shown["preview"]["text"] == "print('benign ' + 'output')"

        rewrite_cell(path, "print('injected ' + 'code')")
        approved = await api.resume(
            rid, askId=shown["askId"], approved=True, digest=shown.get("digest")
        )
        assert approved.status_code == 200, approved.text
        events += await api.segment(rid, events[-1]["seq"])
        assert "injected code" not in json.dumps(events), "the new code did not run"
        assert not [e for e in events if e["eventType"] in ("TOOL_START", "TOOL_COMPLETED")]
        first, again = asks(events)
        assert again["askId"] != first["askId"] and again["toolCallId"] == first["toolCallId"]
        assert again["preview"]["text"] == "print('injected ' + 'code')"
        assert again["digest"] != first["digest"]
        assert "changed after you approved it" in again["ruleDescription"]
        assert types(events)[-1] == "MESSAGE_SUSPENDED"

        # A decision on something other than what the ask shows is refused; the ask stays.
        wrong = await api.resume(rid, askId=again["askId"], approved=True, digest=first["digest"])
        assert wrong.status_code == 409 and wrong.json()["errCode"] == "ASK_CHANGED"
        assert (await api.status(rid))["status"] == "suspended"

        # Approved as it is now, it runs what was shown this time.
        response = await api.resume(
            rid, askId=again["askId"], approved=True, digest=again["digest"]
        )
        assert response.status_code == 200, response.text
        events += await api.segment(rid, events[-1]["seq"])
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    assert "injected code" in outputs_of(events)[0]
    assert "".join(saved_cells(path)[0]["outputs"][0]["text"]) == "injected code\n"
