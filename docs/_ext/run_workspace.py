"""Run ``notebooks/workspace.ipynb`` for the docs on a real Jupyter server, as a reader would.

Its cells run one by one in the kernel the server started for the notebook; after each prompt
the reader's part is played through the run API: every approval the widget asks for is given
(``resumeTask``, what the widget's Approve button sends), and at the cell the notebook asks it
of the reader, the cell the agent wants to change is first changed in the file, as saving it
from an editor does. What the page shows is the server's copy of the notebook — with the cells
the agent wrote and their provenance (``metadata.neta``) — and, for the notebook's own cells,
the outputs the kernel sent.

Outputs the server wrote into its copy came from code the agent ran: only their text and
pictures are kept, so nothing of them is drawn as HTML. The widget's state is not saved: the
page shows each run's transcript, in which nothing from the run can run or load.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
from docs_server import DocsServer, jupyter_server, session_kernel
from nbclient import NotebookClient

READER_EDITS = {"stale": 'print(sales["units"].sum())'}
"""At these cells the notebook asks its reader to change the cell the agent is about to change
(before approving): the line the reader adds."""
WAIT_FOR_RUNS = """\
import asyncio
import neta_jupyter.kernel as _neta
await asyncio.gather(*(h.wait(120) for h in _neta.current_context().launched))
"""
"""A cell run after each prompt's run ended, not shown: the kernel, which follows the run on its
own, has seen it end, and sends the run's output once more as of its end (a cell that came
before, such as ``%neta undo``, would otherwise find the run still going)."""
HOW_IT_RAN = """\
*On this page: the notebook as it ran on a Jupyter server while these pages were built. Nothing
was approved automatically: each approval the widget asked for was given through the run API, as
its Approve button does, and before the comment was approved its cell was changed as described
below. See [the demo notebooks](index.md).*
"""
"""What the page says of its run, after the notebook's introduction."""
SAFE_DATA = ("text/plain", "image/png", "image/jpeg")
RUN_SECONDS = 180.0
"""Only catches a hang (of one prompt's run)."""


def render_workspace(source: Path, target: Path) -> None:
    """Run ``source`` on a scratch server and write what the page shows to ``target``."""
    with (
        tempfile.TemporaryDirectory(prefix="neta-docs-server-") as workdir,
        jupyter_server(Path(workdir)) as server,
    ):
        nb = run_on_server(server, source)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(HOW_IT_RAN, id="neta-docs-how-it-ran"))
    target.write_text(nbformat.writes(nb))


def run_on_server(server: DocsServer, source: Path) -> Any:
    """The notebook as the server keeps it after its cells ran, with the kernel's outputs."""
    name = source.name
    with server.client() as http:
        if http.get("neta/api/agent/runs").status_code != 200:
            raise RuntimeError("the docs' Jupyter server did not load the neta_jupyter extension")
    (server.root / name).write_text(source.read_text())
    nb = nbformat.read(server.root / name, as_version=4)
    client = NotebookClient(nb, km=session_kernel(server, name), timeout=240)
    runs: list[str] = []
    with client.setup_kernel():
        index = 0
        while index < len(nb.cells):
            cell = nb.cells[index]
            client.execute_cell(cell, index)
            if is_prompt(cell):
                runs.append(new_run(server, runs))
                play_reader(server, name, runs[-1], READER_EDITS.get(cell.id))
                index += 1
                nb.cells.insert(index, nbformat.v4.new_code_cell(WAIT_FOR_RUNS))
                client.execute_cell(nb.cells[index], index)
            index += 1
    return merged(nbformat.read(server.root / name, as_version=4), nb, server.root)


def is_prompt(cell: Any) -> bool:
    """A cell that starts a run (``%neta undo`` reverts at once, without one)."""
    return bool(cell.cell_type == "code" and cell.source.startswith("%neta ") and cell.id != "undo")


def new_run(server: DocsServer, known: list[str]) -> str:
    """The requestId of the run the cell just sent, once it has started.

    A prompt after one the kernel has not yet seen finish waits for it.
    """
    deadline = time.monotonic() + RUN_SECONDS
    while True:
        with server.client() as http:
            found = http.get("neta/api/agent/runs").json()["runs"]  # the newest first
        if found and found[0]["requestId"] not in known:
            return str(found[0]["requestId"])
        if time.monotonic() > deadline:
            raise RuntimeError("a prompt of the workspace notebook never started its run")
        time.sleep(0.1)


def play_reader(server: DocsServer, name: str, rid: str, edit: str | None) -> None:
    """Follow the run to its end, approving what it asks.

    With ``edit``, first add that line to the cell the first ask is about, as the notebook tells
    its reader to.
    """
    deadline = time.monotonic() + RUN_SECONDS
    after: int | None = None
    while time.monotonic() < deadline:
        events = server.read(rid, after)
        if not events:  # the stream of a run at rest may end before it goes on
            time.sleep(0.2)
            continue
        last = events[-1]
        after = last["seq"]
        if last["eventType"] != "MESSAGE_SUSPENDED":
            if last["eventType"] != "MESSAGE_COMPLETED":
                raise RuntimeError(f"a run of the workspace notebook ended so: {last}")
            return
        reason = last["data"]["suspendReason"]["type"]
        if reason == "ASYNC_TOOL_PENDING":
            continue  # the next read waits for the background cell, then for the run's end
        if reason != "PERMISSION_ASK":
            raise RuntimeError(f"a run of the workspace notebook waits for {reason}")
        ask = next(e["data"] for e in reversed(events) if e["eventType"] == "PERMISSION_ASK")
        if edit is not None:
            change_cell(server.root / name, ask["preview"]["cellId"], edit)
            edit = None
        body = {"requestId": rid, "approved": True, "askId": ask["askId"]}
        with server.client() as http:
            http.post("neta/api/agent/run/resumeTask", json=body).raise_for_status()
    raise RuntimeError(f"run {rid} of the workspace notebook did not end")


def change_cell(path: Path, cell_id: str, line: str) -> None:
    """Add ``line`` to the cell, saving the file as an editor does."""
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.id == cell_id)
    cell.source += "\n" + line
    nbformat.write(nb, path)


def merged(saved: Any, executed: Any, root: Path) -> Any:
    """The server's copy with the outputs the kernel sent for the notebook's own cells.

    Paths in printed text are made relative to the server's (scratch) root folder.
    """
    ran = {c.id: c for c in executed.cells}
    for cell in saved.cells:
        if cell.cell_type != "code":
            continue
        if cell.outputs:
            cell.outputs = [o for o in map(text_and_pictures, cell.outputs) if o is not None]
        elif cell.id in ran:
            cell.outputs = ran[cell.id].outputs
            cell.execution_count = ran[cell.id].execution_count
        for output in cell.outputs:
            if output.output_type == "stream":
                output.text = output.text.replace(f"{root}/", "")
    saved.metadata = executed.metadata
    saved.metadata.pop("widgets", None)
    return saved


def text_and_pictures(output: Any) -> Any:
    """Of an output the agent's code made: its text and pictures (None when it has neither)."""
    if output.output_type not in ("display_data", "execute_result"):
        return output  # streams and errors: text, which the page escapes
    output.data = {k: v for k, v in output.data.items() if k in SAFE_DATA}
    return output if output.data else None
