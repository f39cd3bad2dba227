"""The workspace notebook runs cell by cell (nbclient) in the kernel a real Jupyter server started
for it, as JupyterLab's kernel would be: the notebook tools need that server. Nobody has the
notebook open in a collaboration room, so the agent's changes land in its file, which the test
reads; after each prompt the test waits for the run to end, as a reader would.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from tests.server_process import ServerProcess

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
NAME = "workspace.ipynb"
ALLOW_NOTEBOOK_CHANGES = [{"tool": t, "action": "allow"} for t in ("insert_cell", "run_cell")]
"""A headless run approves what a reader of the notebook would approve in the widget."""


class SessionKernel(KernelManager):
    """The kernel the server started for the notebook's session: nbclient runs cells in it and
    leaves it to the server (it neither starts nor stops it)."""

    @property
    def has_kernel(self) -> bool:
        """Always: the server owns the kernel process."""
        return True


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path, {"permission_rules": ALLOW_NOTEBOOK_CHANGES})
    process.start()
    yield process
    process.stop()


def session_kernel(server: ServerProcess, name: str) -> SessionKernel:
    """The kernel of a new session for notebook ``name``, as JupyterLab opens one."""
    session = {"path": name, "name": name, "type": "notebook", "kernel": {"name": "python3"}}
    with server.client() as http:
        started = http.post("api/sessions", json=session).json()
    connection = server.workdir / "runtime" / f"kernel-{started['kernel']['id']}.json"
    kernel = SessionKernel(connection_file=str(connection), owns_kernel=False)
    kernel.load_connection_file()
    return kernel


def new_run(server: ServerProcess, known: list[str]) -> str:
    """The requestId of the run the cell just sent, once it has started: a prompt (or an undo)
    after one the kernel has not yet seen finish waits for it, so its run may start a moment
    after its cell returned."""
    deadline = time.monotonic() + 60
    while True:
        with server.client() as http:
            found = http.get("neta/api/agent/runs").json()["runs"]  # the newest first
        if found and found[0]["requestId"] not in known:
            return str(found[0]["requestId"])
        assert time.monotonic() < deadline, "the prompt's run never started"
        time.sleep(0.1)


def execute(server: ServerProcess) -> tuple[Any, list[str]]:
    """The executed notebook, and the requestId of each prompt's run (in order)."""
    shutil.copy(NOTEBOOKS / NAME, server.root / NAME)
    nb = nbformat.read(server.root / NAME, as_version=4)
    client = NotebookClient(nb, km=session_kernel(server, NAME), timeout=240)
    runs: list[str] = []
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
            if cell.id == "stale":
                runs.append(change_while_asked(server, new_run(server, runs)))
            elif cell.id == "background":
                runs.append(new_run(server, runs))
                wait_for_background(server, runs[-1])
            elif (
                cell.cell_type == "code" and cell.source.startswith("%neta ") and cell.id != "undo"
            ):
                runs.append(new_run(server, runs))
                server.read(runs[-1])  # until the run's terminal event
    return nb, runs


USER_LINE = 'print(sales["units"].sum())'


def change_while_asked(server: ServerProcess, rid: str) -> str:
    """What the notebook asks of its reader at the comment prompt: change the cell the agent
    asks to change, then approve; approve the agent's second try too. The run's requestId."""
    ask = asked(server, rid, None)
    nb = nbformat.read(server.root / NAME, as_version=4)
    cell = next(c for c in nb.cells if c.id == ask["preview"]["cellId"])
    cell.source += "\n" + USER_LINE
    nbformat.write(nb, server.root / NAME)  # as saving it from an editor does
    for _ in range(2):
        with server.client() as http:
            body = {"requestId": rid, "approved": True, "askId": ask["askId"]}
            assert http.post("neta/api/agent/run/resumeTask", json=body).status_code == 200
        ask = asked(server, rid, ask)
    assert ask.get("end") == "MESSAGE_COMPLETED", ask
    return rid


def wait_for_background(server: ServerProcess, rid: str) -> None:
    """The run suspends while the cell runs in the background, then ends by itself."""
    first = server.read(rid)
    assert first[-1]["data"]["suspendReason"]["type"] == "ASYNC_TOOL_PENDING", first[-1]
    deadline = time.monotonic() + 120
    while status(server, rid) != "completed":
        assert time.monotonic() < deadline, status(server, rid)
        time.sleep(0.2)


def status(server: ServerProcess, rid: str) -> str:
    with server.client() as http:
        found = http.get("neta/api/agent/run/status", params={"requestId": rid}).json()
    return str(found["status"])


def asked(server: ServerProcess, rid: str, last: dict[str, Any] | None) -> dict[str, Any]:
    """The permission ask the run waits at after ``last`` (``end``: how it ended, if it did)."""
    events = server.read(rid, last["after"] if last else None)
    asks = [e["data"] for e in events if e["eventType"] == "PERMISSION_ASK"]
    found = asks[-1] if asks and events[-1]["eventType"] == "MESSAGE_SUSPENDED" else {}
    return found | {"after": events[-1]["seq"], "end": events[-1]["eventType"]}


def file_cells(server: ServerProcess) -> list[Any]:
    return list(nbformat.read(server.root / NAME, as_version=4).cells)


def printed(nb: Any, cell_id: str) -> str:
    cell = next(c for c in nb.cells if c.get("id") == cell_id)
    return "".join(
        o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.outputs
    )


def answer(events: list[dict[str, Any]]) -> str:
    return "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")


def edits(server: ServerProcess, rid: str) -> list[dict[str, Any]]:
    with server.client() as http:
        found = http.get("neta/api/notebook/edits", params={"requestId": rid}).json()
    return list(found["edits"])


def test_the_agent_builds_the_analysis_in_the_notebook_and_undo_takes_a_cell_back(
    server: ServerProcess,
) -> None:
    nb, (stats_run, comment_run, plot_run, background_run) = execute(server)
    stats, plot = server.read(stats_run), server.read(plot_run)
    assert [stats[-1]["eventType"], plot[-1]["eventType"]] == ["MESSAGE_COMPLETED"] * 2

    # Each prompt added a cell at the end of the notebook and ran it; the plot's answer tells of
    # the picture the cell drew.
    stats_edit, plot_edit = edits(server, stats_run) + edits(server, plot_run)
    assert stats_edit["kind"] == plot_edit["kind"] == "insert"
    assert "+print(sales.describe())" in stats_edit["diff"]
    assert "mean" in answer(stats) and "190" in answer(stats)  # units' max, from the cell
    assert "picture" in answer(plot) and "PNG" in answer(plot), answer(plot)

    # The comment came after the reader changed the cell: refused, read again, put on top of
    # the reader's version.
    (comment,) = edits(server, comment_run)
    assert comment["kind"] == "edit" and comment["cellId"] == stats_edit["cellId"]
    assert "+# summary statistics of the monthly sales\n" in comment["diff"]
    assert f" {USER_LINE}" in comment["diff"]  # an unchanged line of the diff: the reader's

    # %neta undo took the plot cell back; the statistics cell stays with its provenance and
    # output, after the notebook's own cells.
    assert "reverted the insert of cell " + plot_edit["cellId"] in printed(nb, "undo")
    assert [e["reverted"] for e in edits(server, plot_run)] == [True]
    cells = file_cells(server)
    assert [c.id for c in cells] == [c.id for c in nb.cells] + [stats_edit["cellId"]]
    written = cells[-1]
    assert written.source == (
        f"# summary statistics of the monthly sales\nprint(sales.describe())\n{USER_LINE}"
    )
    assert written.metadata["neta"]["requestId"] == comment_run  # the last run that wrote it

    output = "".join(o.get("text", "") for o in written.outputs)
    assert "mean" in output and "190" in output, written.outputs

    # The forecast cell ran in the background: the run suspended, then answered from its output,
    # which is in the cell too.
    first = server.read(background_run)
    rest = server.read(background_run, first[-1]["seq"])
    assert rest[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert "forecast for July: 183 units" in answer(rest), answer(rest)
    forecast = next(c for c in file_cells(server) if c.id == "forecast")
    assert "forecast for July: 183 units" in "".join(o.get("text", "") for o in forecast.outputs)
