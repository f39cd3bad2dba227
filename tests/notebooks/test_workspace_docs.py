"""The docs render the workspace notebook from a real run: ``docs/_ext/run_workspace.py`` runs
it on a Jupyter server it starts, in the kernel that server started for the notebook, answers
the approvals through the run API, and gives the page the server's copy of the notebook (with
the cell the agent wrote) and the kernel's outputs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import nbformat
import pytest

ROOT = Path(__file__).parents[2]
SOURCE = ROOT / "notebooks" / "workspace.ipynb"
USER_LINE = 'print(sales["units"].sum())'


@pytest.fixture
def docs_ext(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """``docs/_ext/run_workspace.py``, imported as Sphinx imports it (``_ext`` on the path)."""
    monkeypatch.syspath_prepend(str(ROOT / "docs" / "_ext"))
    import run_workspace

    yield run_workspace
    for name in ("run_workspace", "docs_server"):
        sys.modules.pop(name, None)


def outputs_text(cell: Any, mime: str = "text/plain") -> str:
    return "".join(o.get("text", "") + o.get("data", {}).get(mime, "") for o in cell.outputs)


def answered_asks(server: Any, rid: str) -> list[str]:
    """The tools of the permission asks of the run that were answered."""
    events = server.read(rid)
    while events[-1]["eventType"] != "MESSAGE_COMPLETED":
        events += server.read(rid, events[-1]["seq"])
    return [e["data"]["toolName"] for e in events if e["eventType"] == "PERMISSION_ASK"]


def test_the_rendered_workspace_notebook_is_the_servers_copy_after_a_real_run(
    docs_ext: ModuleType, tmp_path: Path
) -> None:
    from docs_server import jupyter_server

    with jupyter_server(tmp_path) as server:
        rendered = docs_ext.run_on_server(server, SOURCE)
        with server.client() as http:
            runs = [r["requestId"] for r in http.get("neta/api/agent/runs").json()["runs"]]
        asked = {rid: answered_asks(server, rid) for rid in runs}
    with pytest.raises(httpx.TransportError):
        httpx.get(server.url + "api/status", timeout=5, trust_env=False)  # stopped

    # Nothing was approved by a setting: every change asked first, and was approved.
    assert len(runs) == 4, runs
    assert sorted(t for tools in asked.values() for t in tools).count("insert_cell") == 2, asked

    source = nbformat.read(SOURCE, as_version=4)
    cells = {c.id: c for c in rendered.cells}
    # Every code cell of the notebook ran and shows its output; %neta cells the run's transcript.
    for cell in source.cells:
        if cell.cell_type == "code":
            assert cells[cell.id].outputs, f"cell {cell.id} has no output"
    for cell_id in ("stats", "stale", "plot", "background"):
        transcript = outputs_text(cells[cell_id], "text/markdown")
        assert "completed" in transcript.rsplit("\n\n", 2)[-1], transcript
    assert "forecast for July: 183 units" in outputs_text(cells["background"], "text/markdown")

    # The cell the agent added stays (the plot cell it added was undone), with its provenance,
    # the reader's line added before the approval, the agent's comment on top, and its output.
    added = [c for c in rendered.cells if c.id not in {s.id for s in source.cells}]
    assert len(added) == 1, [c.source for c in added]
    (written,) = added
    assert written.metadata["neta"]["requestId"] in runs
    assert written.source.startswith("# summary statistics of the monthly sales\n")
    assert written.source.endswith(USER_LINE)
    assert "mean" in outputs_text(written)
    stale = outputs_text(cells["stale"], "text/markdown")
    assert stale.count("`edit_cell`") == 2 and "\u2717" in stale, stale  # refused, then done
    assert "reverted the insert of cell" in outputs_text(cells["undo"])
    assert str(tmp_path) not in outputs_text(cells["undo"])

    # The widget is not drawn from saved state: the page shows the transcripts.
    assert "widgets" not in rendered.metadata


def test_outputs_of_code_the_agent_wrote_keep_only_text_and_pictures(
    docs_ext: ModuleType, tmp_path: Path
) -> None:
    saved = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("display(HTML(...))", id="agent")
    cell.metadata["neta"] = {"requestId": "r_1"}
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"text/html": "<script>alert(1)</script>", "text/plain": "<HTML object>"},
        ),
        nbformat.v4.new_output("display_data", data={"application/javascript": "alert(1)"}),
        nbformat.v4.new_output("stream", text=f"saved to {tmp_path}/out.csv\n"),
    ]
    saved.cells.append(cell)
    merged = docs_ext.merged(saved, nbformat.v4.new_notebook(), tmp_path)
    assert [dict(o.get("data", {})) for o in merged.cells[0].outputs] == [
        {"text/plain": "<HTML object>"},
        {},
    ]
    assert merged.cells[0].outputs[1].text == "saved to out.csv\n"


def test_the_docs_server_is_stopped_when_the_rendering_fails(
    docs_ext: ModuleType, tmp_path: Path
) -> None:
    from docs_server import DocsServer, jupyter_server

    started: list[DocsServer] = []

    def render_that_fails() -> None:
        with jupyter_server(tmp_path) as server:
            started.append(server)
            with server.client() as http:
                assert http.get("neta/api/agent/runs").status_code == 200
            raise ValueError("a cell failed")

    with pytest.raises(ValueError, match="a cell failed") as failed:
        render_that_fails()
    with pytest.raises(httpx.TransportError):
        httpx.get(started[0].url + "api/status", timeout=5, trust_env=False)
    # What went wrong comes with the end of the server's log.
    assert "neta_jupyter" in "\n".join(failed.value.__notes__)
