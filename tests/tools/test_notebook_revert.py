"""Reverting a run's notebook edits: the endpoint, the edit list after the run, ``%neta undo``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools.notebook_doc import source_hash
from tests.helpers import ApiClient, script
from tests.kernel.test_magics import server_kernel
from tests.notebook_room import (
    cell_by_id,
    collaboration_config,
    joined,
    saved_cells,
    until,
    write_notebook,
)
from tests.tools.test_notebook_tools import call, edits_of, run_to_end, write_notebook_source

pytestmark = pytest.mark.timeout(120)

BEFORE = "total = sum(values)\nprint(total)\n"


@pytest.fixture
def jp_server_config(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    return collaboration_config(jp_root_dir, tmp_path)


async def revert(api: ApiClient, **body: str) -> Any:
    return await api.http.post("neta/api/notebook/revert", json=body)


async def edit_run(api: ApiClient, runtime: Runtime, path: str, cell: str) -> list[dict[str, Any]]:
    script(
        runtime,
        call("edit_cell", cell_id=cell, source="total = 0", source_hash=source_hash(BEFORE)),
        call("insert_cell", source="print('added')", after_cell_id=cell),
        ScriptedTurn(text="done"),
    )
    return await run_to_end(api, "reset the total", path)


async def test_revert_restores_the_exact_source_in_the_open_notebook_and_is_listed(
    api: ApiClient,
    runtime: Runtime,
    jp_root_dir: Path,
    server_url: str,
    jp_auth_header: dict[str, str],
) -> None:
    (cell,) = write_notebook(jp_root_dir / "open.ipynb", ("code", BEFORE))
    async with joined(api.http, server_url, jp_auth_header, "open.ipynb") as notebook:
        events = await edit_run(api, runtime, "open.ipynb", cell)
        edited, inserted = edits_of(events)
        await until(lambda: notebook.cell_number == 2, "the insert never arrived")
        response = await revert(api, editId=edited["editId"])
        assert response.status_code == 200, response.text
        assert response.json()["edit"]["reverted"] is True
        await until(
            lambda: (cell_by_id(notebook, cell) or {}).get("source") == BEFORE,
            "the open notebook never showed the reverted source",
        )
        assert (await revert(api, editId=inserted["editId"])).status_code == 200
        await until(lambda: notebook.cell_number == 1, "the inserted cell was never removed")
        again = await revert(api, editId=edited["editId"])
        assert again.status_code == 409 and again.json()["errCode"] == "ALREADY_REVERTED"
    listed = await api.http.get(
        "neta/api/notebook/edits", params={"requestId": events[0]["requestId"]}
    )
    assert [(e["kind"], e["reverted"]) for e in listed.json()["edits"]] == [
        ("edit", True),
        ("insert", True),
    ]


async def test_a_revert_after_a_later_user_change_is_refused(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    path = jp_root_dir / "later.ipynb"
    (cell,) = write_notebook(path, ("code", BEFORE))
    edited, _ = edits_of(await edit_run(api, runtime, "later.ipynb", cell))
    write_notebook_source(path, 0, "total = 0  # and the user's own change")
    response = await revert(api, editId=edited["editId"])
    assert response.status_code == 409
    assert response.json()["errCode"] == "CELL_CHANGED"
    assert saved_cells(path)[0]["source"] == "total = 0  # and the user's own change"


async def test_bad_revert_requests_are_4xx_with_a_code(api: ApiClient) -> None:
    assert (await revert(api)).json()["errCode"] == "INVALID_FIELDS"
    missing = await revert(api, editId="ed_nope")
    assert missing.status_code == 404 and missing.json()["errCode"] == "EDIT_NOT_FOUND"
    outside = await revert(api, notebookPath="../elsewhere.ipynb")
    assert outside.status_code == 400
    nothing = await revert(api, notebookPath="never.ipynb")
    assert nothing.status_code == 404 and nothing.json()["errCode"] == "NOTHING_TO_UNDO"
    unknown = await api.http.get("neta/api/notebook/edits", params={"requestId": "r_nope"})
    assert unknown.status_code == 404


async def test_neta_undo_reverts_the_last_edit_of_the_notebooks_latest_run(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, jp_serverapp: Any
) -> None:
    path = jp_root_dir / "undo.ipynb"
    (cell,) = write_notebook(path, ("code", BEFORE))
    await edit_run(api, runtime, "undo.ipynb", cell)
    assert len(saved_cells(path)) == 2
    async with server_kernel(jp_serverapp) as (_, k):
        await k.run("%load_ext neta_jupyter\n__session__ = 'undo.ipynb'")
        said = await k.stdout("%neta undo")
        assert "reverted the insert of cell" in said
        assert len(saved_cells(path)) == 1
        said = await k.stdout("%neta undo")
        assert "reverted the edit of cell" in said
    assert json.loads(path.read_text())["cells"][0]["source"] in (BEFORE, BEFORE.splitlines(True))


async def test_moves_and_deletes_are_reverted_to_the_same_place(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    path = jp_root_dir / "order.ipynb"
    one, two, three = write_notebook(path, ("code", "1"), ("code", "2"), ("markdown", "3"))
    script(
        runtime,
        call("move_cell", cell_id=one, position="end"),
        call("delete_cell", cell_id=two, source_hash=source_hash("2")),
        call("read_notebook", start=1, end=1),
        ScriptedTurn(text="done"),
    )
    events = await run_to_end(api, "tidy up", "order.ipynb")
    assert [c["source"] for c in saved_cells(path)] == ["3", "1"]
    reads = [e["data"]["output"] for e in events if e["eventType"] == "TOOL_COMPLETED"]
    assert f"cell 1 of 2 · id {three}" in reads[-1] and f"id {one}" not in reads[-1]
    moved, deleted = edits_of(events)
    assert (await revert(api, editId=deleted["editId"])).status_code == 200
    assert [c["source"] for c in saved_cells(path)] == ["2", "3", "1"]
    assert (await revert(api, editId=moved["editId"])).status_code == 200
    assert [c["id"] for c in saved_cells(path)] == [one, two, three]


async def test_revert_puts_back_a_secret_the_events_never_show(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    secret = "sk-live-0123456789abcdef"
    runtime.store.redactor.add(secret)  # as an endpoint's key is
    keyed = f'API_KEY = "{secret}"\n'
    also = f"client = connect('{secret}')\n"
    path = jp_root_dir / "keys.ipynb"
    edited, deleted = write_notebook(path, ("code", keyed), ("code", also))
    script(
        runtime,
        call("edit_cell", cell_id=edited, source="API_KEY = None", source_hash=source_hash(keyed)),
        call("delete_cell", cell_id=deleted, source_hash=source_hash(also)),
        ScriptedTurn(text="done"),
    )
    events = await run_to_end(api, "take the key out", "keys.ipynb")
    assert [c["source"] for c in saved_cells(path)] == ["API_KEY = None"]
    answers = []
    for edit in reversed(edits_of(events)):
        response = await revert(api, editId=edit["editId"])
        assert response.status_code == 200, response.text
        answers.append(response.text)
    assert [c["source"] for c in saved_cells(path)] == [keyed, also], "back exactly as written"
    listed = await api.http.get(
        "neta/api/notebook/edits", params={"requestId": events[0]["requestId"]}
    )
    shown = json.dumps(events) + "".join(answers) + listed.text
    assert secret not in shown and "[redacted]" in shown
