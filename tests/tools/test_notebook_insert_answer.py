"""A run's answer, or its code, inserted as a new cell (the side panel's buttons): at the end of
the notebook, with the run as its provenance, one of the run's edits and reverted like them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ApiClient
from tests.notebook_room import saved_cells, until, write_notebook

pytestmark = pytest.mark.timeout(120)


async def insert(api: ApiClient, **body: Any) -> Any:
    return await api.http.post("neta/api/notebook/insert", json=body)


async def test_the_answer_becomes_a_cell_with_the_run_as_its_provenance_and_can_be_reverted(
    api: ApiClient, jp_root_dir: Path
) -> None:
    write_notebook(jp_root_dir / "work.ipynb", ("code", "x = 1"))
    run = (await api.start("explain x", model="demo"))["requestId"]
    answer = "## What x is\n\n`x` is **1**."
    response = await insert(
        api, requestId=run, notebookPath="work.ipynb", cellType="markdown", source=answer
    )
    assert response.status_code == 200, response.text
    edit = response.json()["edit"]
    cells = saved_cells(jp_root_dir / "work.ipynb")
    assert [c["cell_type"] for c in cells] == ["code", "markdown"]
    assert cells[1]["source"] == answer
    assert cells[1]["metadata"]["neta"] == {
        "requestId": run,
        "toolCallId": "neta-panel",
        "prompt": "explain x",
    }
    listed = await api.http.get("neta/api/notebook/edits", params={"requestId": run})
    assert [e["editId"] for e in listed.json()["edits"]] == [edit["editId"]]

    code = await insert(
        api, requestId=run, notebookPath="work.ipynb", cellType="code", source="print(x)"
    )
    assert code.status_code == 200, code.text
    assert saved_cells(jp_root_dir / "work.ipynb")[2]["cell_type"] == "code"
    reverted = await api.http.post("neta/api/notebook/revert", json={"editId": edit["editId"]})
    assert reverted.status_code == 200, reverted.text
    await until(
        lambda: (
            [c["source"] for c in saved_cells(jp_root_dir / "work.ipynb")] == ["x = 1", "print(x)"]
        ),
        "the inserted answer was never removed",
    )


async def test_an_insert_names_a_run_of_the_caller_a_notebook_under_the_root_and_a_cell_type(
    api: ApiClient, jp_root_dir: Path
) -> None:
    write_notebook(jp_root_dir / "work.ipynb", ("code", "x = 1"))
    run = (await api.start("hello", model="demo"))["requestId"]
    cases = [
        ({"requestId": "r_nobody", "notebookPath": "work.ipynb", "cellType": "code"}, 404),
        ({"requestId": run, "notebookPath": "../outside.ipynb", "cellType": "code"}, 400),
        ({"requestId": run, "notebookPath": "work.ipynb", "cellType": "raw"}, 400),
        ({"requestId": run, "notebookPath": "work.ipynb", "cellType": "code", "source": ""}, 400),
    ]
    for body, status in cases:
        response = await insert(api, **{"source": "print(1)", **body})
        assert response.status_code == status, (body, response.text)
        assert response.json()["errCode"], response.text
    assert len(saved_cells(jp_root_dir / "work.ipynb")) == 1
