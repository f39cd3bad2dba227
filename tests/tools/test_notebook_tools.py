"""The notebook tools on a real server with the collaboration extension, driven by scripted runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools.notebook_doc import source_hash
from tests.helpers import ApiClient, script, types
from tests.notebook_room import (
    cell_by_id,
    collaboration_config,
    joined,
    saved_cells,
    until,
    write_notebook,
)
from tests.tools.test_kernel_tools import SETUP, kernel_of

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def jp_server_config(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    return collaboration_config(jp_root_dir, tmp_path)


def call(name: str, **arguments: Any) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedToolCall(name, arguments)])


def edits_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["data"]["payload"]
        for e in events
        if e["eventType"] == "TOOL_EVENT" and e["data"].get("category") == "notebook_edit"
    ]


def outputs_of(events: list[dict[str, Any]]) -> list[str]:
    """What each tool call gave the model (its output or its error)."""
    return [
        e["data"].get("output") or e["data"].get("errorMessage") or ""
        for e in events
        if e["eventType"] in ("TOOL_COMPLETED", "TOOL_FAILED")
    ]


async def run_to_end(api: ApiClient, prompt: str, path: str, **fields: Any) -> list[dict[str, Any]]:
    started = await api.start(prompt, model="scripted", notebookPath=path, approve="auto", **fields)
    return await api.segment(started["requestId"])


async def test_no_room_the_file_is_changed_and_saved_with_provenance(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    first, second = write_notebook(
        jp_root_dir / "plain.ipynb", ("markdown", "# Sales"), ("code", "x = 1")
    )
    script(
        runtime,
        call("read_notebook"),
        call("insert_cell", source="print(x + 1)", after_cell_id=first),
        call("edit_cell", cell_id=second, source="x = 2", source_hash=source_hash("x = 1")),
        ScriptedTurn(text="done"),
    )
    events = await run_to_end(api, "add a cell\nthat prints x", "plain.ipynb")
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    read, inserted, edited = outputs_of(events)
    assert f"id {first} · markdown · hash {source_hash('# Sales')}" in read
    assert "x = 1" in read
    assert "the file was saved" in inserted and "the file was saved" in edited
    cells = saved_cells(jp_root_dir / "plain.ipynb")
    assert [c["source"] for c in cells] == ["# Sales", "print(x + 1)", "x = 2"]
    neta = cells[1]["metadata"]["neta"]
    assert neta["requestId"] == events[0]["requestId"] and neta["prompt"] == "add a cell"
    assert neta["toolCallId"]
    kinds = [(e["kind"], e["via"]) for e in edits_of(events)]
    assert kinds == [("insert", "file"), ("edit", "file")]
    assert "-x = 1\n+x = 2\n" in edits_of(events)[1]["diff"]


async def test_edits_merge_with_the_user_typing_in_the_shared_document(
    api: ApiClient,
    runtime: Runtime,
    jp_root_dir: Path,
    server_url: str,
    jp_auth_header: dict[str, str],
) -> None:
    user_cell, agent_cell = write_notebook(
        jp_root_dir / "live.ipynb", ("code", "a = 1"), ("code", "b = 1")
    )
    async with joined(api.http, server_url, jp_auth_header, "live.ipynb") as notebook:
        index = next(i for i in range(2) if notebook.ycells[i]["id"] == user_cell)
        script(
            runtime,
            call("read_notebook"),
            call("edit_cell", cell_id=agent_cell, source="b = 2", source_hash=source_hash("b = 1")),
            call("insert_cell", source="c = a + b", position="end"),
            ScriptedTurn(text="done"),
        )
        started = await api.start(
            "change b", model="scripted", notebookPath="live.ipynb", approve="auto"
        )
        typed = notebook.ycells[index]["source"]
        typed += "  # typed by the user"  # while the run works
        events = await api.segment(started["requestId"])
        assert types(events)[-1] == "MESSAGE_COMPLETED"
        await until(lambda: notebook.cell_number == 3, "the inserted cell never arrived")
        assert cell_by_id(notebook, agent_cell)["source"] == "b = 2"  # type: ignore[index]
        assert cell_by_id(notebook, user_cell)["source"] == "a = 1  # typed by the user"  # type: ignore[index]
        assert [e["via"] for e in edits_of(events)] == ["shared", "shared"]

        def saved() -> bool:
            sources = [c["source"] for c in saved_cells(jp_root_dir / "live.ipynb")]
            return sources == ["a = 1  # typed by the user", "b = 2", "c = a + b"]

        await until(saved, "the room never saved both changes")
    cells = saved_cells(jp_root_dir / "live.ipynb")
    assert cells[1]["metadata"]["neta"]["requestId"] == started["requestId"]
    assert cells[2]["metadata"]["neta"]["prompt"] == "change b"


PLOT_CELL = """import matplotlib.pyplot as plt
plt.plot([1, 3, 2])
plt.title("sales")
plt.show()
print("plotted")"""


async def test_run_cell_writes_outputs_into_the_cell_and_returns_text_errors_and_images(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    printing, failing, plotting = write_notebook(
        jp_root_dir / "run.ipynb",
        ("code", "total = 40 + 2\nprint('total is', total)"),
        ("code", "1 / 0"),
        ("code", PLOT_CELL),
    )
    km = jp_serverapp.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        model = script(
            runtime,
            call("run_cell", cell_id=printing),
            call("run_cell", cell_id=failing),
            call("run_cell", cell_id=plotting),
            ScriptedTurn(text="done"),
        )
        events = await run_to_end(api, "run them", "run.ipynb", kernelId=kernel_id)
    finally:
        await km.shutdown_kernel(kernel_id, now=True)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    printed, error, plotted = outputs_of(events)
    assert "total is 42" in printed
    assert "ZeroDivisionError" in error and "----> 1 1 / 0" in error  # with its traceback
    assert "plotted" in plotted and "[image:" in plotted
    completed = [e for e in events if e["eventType"] == "TOOL_COMPLETED"]
    assert completed[-1]["data"]["images"], "the figure is an image of the call"
    assert len(model.requests) == 4
    cells = saved_cells(jp_root_dir / "run.ipynb")
    first, second, third = cells
    assert "".join(first["outputs"][0]["text"]) == "total is 42\n"
    assert first["execution_count"] == 1
    assert second["outputs"][0]["output_type"] == "error"
    assert second["outputs"][0]["ename"] == "ZeroDivisionError"
    assert any("image/png" in o.get("data", {}) for o in third["outputs"])
    assert third["execution_count"] == 3


async def test_a_stale_edit_is_refused_with_the_current_source_and_the_retry_lands(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    path = jp_root_dir / "stale.ipynb"
    (cell,) = write_notebook(path, ("code", "rate = 0.1"))
    read_hash = source_hash("rate = 0.1")
    # The user changes the cell after the agent read it.
    write_notebook_source(path, 0, "rate = 0.25  # the user's value")
    fresh = source_hash("rate = 0.25  # the user's value")
    script(
        runtime,
        call("read_notebook", cell_id=cell),
        call("edit_cell", cell_id=cell, source="rate = 0.2", source_hash=read_hash),
        call("read_notebook", cell_id=cell),
        call("edit_cell", cell_id=cell, source="rate = 0.25 * 2", source_hash=fresh),
        ScriptedTurn(text="done"),
    )
    events = await run_to_end(api, "double the rate", "stale.ipynb")
    _, refused, _, landed = outputs_of(events)
    assert "cell changed since you read it" in refused
    assert "rate = 0.25  # the user's value" in refused and fresh in refused
    assert "applied" in landed
    assert [
        e["eventType"]
        for e in events
        if e["eventType"].startswith("TOOL_")
        and e["eventType"] in ("TOOL_COMPLETED", "TOOL_FAILED")
    ][1] == "TOOL_FAILED"
    assert saved_cells(path)[0]["source"] == "rate = 0.25 * 2"
    assert len(edits_of(events)) == 1


def write_notebook_source(path: Path, index: int, source: str) -> None:
    """The user saves a change to one cell."""
    nb = json.loads(path.read_text())
    nb["cells"][index]["source"] = source
    path.write_text(json.dumps(nb))


async def test_two_notebooks_with_runs_at_once_never_touch_each_others_cells(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (left,) = write_notebook(jp_root_dir / "left.ipynb", ("code", "side = 'left'"))
    (right,) = write_notebook(jp_root_dir / "right.ipynb", ("code", "side = 'right'"))
    # Each run is told to edit the other notebook's cell: it is not in its notebook.
    for name, other, source in (
        ("left", right, "side = 'right'"),
        ("right", left, "side = 'left'"),
    ):
        edit = call("edit_cell", cell_id=other, source="hijacked", source_hash=source_hash(source))
        runtime.models.register(f"scripted-{name}", ScriptedModel([edit, ScriptedTurn("done")]))
    one = await api.start("a", model="scripted-left", notebookPath="left.ipynb", approve="auto")
    two = await api.start("b", model="scripted-right", notebookPath="right.ipynb", approve="auto")
    for started in (one, two):
        events = await api.segment(started["requestId"])
        assert any("no cell with id" in o for o in outputs_of(events)), outputs_of(events)
        assert not edits_of(events)
    assert saved_cells(jp_root_dir / "left.ipynb")[0]["source"] == "side = 'left'"
    assert saved_cells(jp_root_dir / "right.ipynb")[0]["source"] == "side = 'right'"


async def test_writing_asks_with_a_diff_and_reading_does_not(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (cell,) = write_notebook(jp_root_dir / "ask.ipynb", ("code", "n = 1"))
    script(
        runtime,
        ScriptedTurn(
            tool_calls=[
                ScriptedToolCall("read_notebook", {}),
                ScriptedToolCall(
                    "edit_cell",
                    {"cell_id": cell, "source": "n = 2", "source_hash": source_hash("n = 1")},
                ),
            ]
        ),
    )
    started = await api.start("bump n", model="scripted", notebookPath="ask.ipynb")
    events = await api.segment(started["requestId"])
    asks = [e["data"] for e in events if e["eventType"] == "PERMISSION_ASK"]
    assert [a["toolName"] for a in asks] == ["edit_cell"]
    assert asks[0]["preview"]["kind"] == "diff"
    assert "-n = 1\n+n = 2\n" in asks[0]["preview"]["text"]
    assert types(events)[-1] == "MESSAGE_SUSPENDED"


async def test_without_a_notebook_the_tools_are_not_offered(
    api: ApiClient, runtime: Runtime
) -> None:
    model = script(runtime, ScriptedTurn(text="done"))
    started = await api.start("hi", model="scripted")
    await api.segment(started["requestId"])
    offered = {t.name for t in model.requests[0].tools}
    assert "read_notebook" not in offered and "edit_cell" not in offered


async def test_the_demo_model_adds_a_plot_cell_runs_it_and_answers_from_its_output(
    api: ApiClient, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    write_notebook(jp_root_dir / "demo.ipynb", ("markdown", "# Prices"))
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        await bridge.execute(SETUP)
        started = await api.start(
            "add a cell that plots the x column of df",
            model="demo",
            notebookPath="demo.ipynb",
            kernelId=kernel_id,
            approve="auto",
        )
        events = await api.segment(started["requestId"])
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    calls = [e["data"]["toolName"] for e in events if e["eventType"] == "TOOL_START"]
    assert calls[-1] == "insert_cell" and "read_notebook" not in calls  # the map suffices
    insert = [e["data"] for e in events if e["eventType"] == "TOOL_START"][-1]
    assert '"run": true' in insert["arguments"].replace('"run":true', '"run": true')
    answer = "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")
    assert "I added cell" in answer and "I ran it" in answer
    assert "I was shown the picture it made" in answer
    cells = saved_cells(jp_root_dir / "demo.ipynb")
    assert len(cells) == 2 and "plot" in cells[1]["source"]
    assert cells[1]["metadata"]["neta"]["prompt"] == "add a cell that plots the x column of df"
    assert any("image/png" in o.get("data", {}) for o in cells[1]["outputs"])


SLOW_CELL = """import pathlib, time
print("first half", flush=True)
while not pathlib.Path({go!r}).exists():  # until the test has seen the first half
    time.sleep(0.05)
print("second half")"""


async def test_run_cell_output_appears_in_the_open_notebook_while_the_cell_runs(
    api: ApiClient,
    runtime: Runtime,
    jp_root_dir: Path,
    jp_serverapp: Any,
    server_url: str,
    jp_auth_header: dict[str, str],
) -> None:
    go = jp_root_dir / "go"
    (cell,) = write_notebook(jp_root_dir / "slow.ipynb", ("code", SLOW_CELL.format(go=str(go))))
    km = jp_serverapp.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        async with joined(api.http, server_url, jp_auth_header, "slow.ipynb") as notebook:
            script(runtime, call("run_cell", cell_id=cell), ScriptedTurn(text="done"))
            started = await api.start(
                "run it", model="scripted", notebookPath="slow.ipynb", kernelId=kernel_id,
                approve="auto",
            )  # fmt: skip

            def text() -> str:
                found = cell_by_id(notebook, cell) or {}
                return "".join(str(o.get("text", "")) for o in found.get("outputs", []))

            def running_with_first_half() -> bool:
                found = cell_by_id(notebook, cell) or {}
                return found.get("execution_state") == "running" and "first half" in text()

            await until(running_with_first_half, "the first output never showed while running")
            assert "second half" not in text()
            go.touch()
            events = await api.segment(started["requestId"])
            assert types(events)[-1] == "MESSAGE_COMPLETED"
            await until(lambda: "second half" in text(), "the rest of the output never came")
            done = cell_by_id(notebook, cell) or {}
            assert done["execution_state"] == "idle" and done["execution_count"] == 1
    finally:
        await km.shutdown_kernel(kernel_id, now=True)


async def test_a_huge_edit_keeps_its_event_small_and_its_revert_exact(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (cell,) = write_notebook(jp_root_dir / "big.ipynb", ("code", "small = 1"))
    huge = "\n".join(f"row_{i} = {i}" for i in range(20_000))
    script(
        runtime,
        call("edit_cell", cell_id=cell, source=huge, source_hash=source_hash("small = 1")),
        ScriptedTurn(text="done"),
    )
    frames = await api.frames((await api.start(
        "grow it", model="scripted", notebookPath="big.ipynb", approve="auto"
    ))["requestId"])  # fmt: skip
    # (the call's own arguments are the model's; the edit event is ours to keep small)
    assert max(len(f.data.encode()) for f in frames if f.event == "TOOL_EVENT") < 64 * 1024
    (edit,) = edits_of([f.json for f in frames if f.event != "HEARTBEAT"])
    assert "diff truncated" in edit["diff"]
    assert saved_cells(jp_root_dir / "big.ipynb")[0]["source"] == huge
    reverted = await api.http.post("neta/api/notebook/revert", json={"editId": edit["editId"]})
    assert reverted.status_code == 200
    assert saved_cells(jp_root_dir / "big.ipynb")[0]["source"] == "small = 1"


async def test_reading_a_closed_notebook_leaves_its_file_as_it_was(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    path = jp_root_dir / "untouched.ipynb"
    write_notebook(path, ("code", "x = 1"), ("markdown", "notes"))
    before = path.read_bytes()
    script(runtime, call("read_notebook"), ScriptedTurn(text="done"))
    events = await run_to_end(api, "what is in it?", "untouched.ipynb")
    assert "x = 1" in outputs_of(events)[0]
    assert path.read_bytes() == before


async def test_running_a_cell_asks_with_the_code_it_would_run(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (cell,) = write_notebook(jp_root_dir / "ask_run.ipynb", ("code", "print('hi')"))
    script(runtime, call("run_cell", cell_id=cell))
    started = await api.start("run it", model="scripted", notebookPath="ask_run.ipynb")
    events = await api.segment(started["requestId"])
    (ask,) = [e["data"] for e in events if e["eventType"] == "PERMISSION_ASK"]
    assert ask["preview"] == {"kind": "code", "cellId": cell, "text": "print('hi')"}
