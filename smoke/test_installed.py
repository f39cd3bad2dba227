"""The installed wheel, with no extras: what a user gets from ``pip install neta_jupyter``."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import nbformat
import pytest
from conftest import BIN, EXTRAS, Kernel, Server, clean_env

import neta_jupyter

WIDGET = "application/vnd.jupyter.widget-view+json"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_jupyter_lists_the_extension_as_enabled_and_valid(tmp_path: Path) -> None:
    listed = subprocess.run(
        [str(BIN / "jupyter"), "server", "extension", "list"],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=300,
        check=True,
    )
    said = ANSI.sub("", listed.stdout + listed.stderr)
    assert re.search(r"neta_jupyter enabled", said), said
    assert re.search(rf"neta_jupyter {re.escape(neta_jupyter.__version__)} OK", said), said
    # The notebook tools' live edits need the collaboration extension: it comes with the wheel.
    assert re.search(r"jupyter_server_ydoc [\d.]+ OK", said), said
    assert "could not be found" not in said, said


def test_jupyterlab_lists_the_side_panel_as_a_prebuilt_extension(tmp_path: Path) -> None:
    listed = subprocess.run(
        [str(BIN / "jupyter"), "labextension", "list"],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=300,
        check=True,
    )
    said = ANSI.sub("", listed.stdout + listed.stderr)
    assert re.search(r"neta-jupyter v[\d.]+ enabled OK \(python, neta_jupyter\)", said), said


def test_the_run_api_answers(server: Server) -> None:
    with server.client() as http:
        assert http.get("neta/api/agent/runs").status_code == 200
        models = http.get("neta/api/models")
        assert models.status_code == 200 and "demo" in models.text
        assert http.get("neta/api/openapi.json").json()["openapi"].startswith("3.")


def test_a_demo_run_completes_over_sse(server: Server) -> None:
    rid = server.start_run(content="what files are here?", model="demo", approve="auto")
    events = server.follow(rid)
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED", events[-1]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert any(e["eventType"] == "TOOL_COMPLETED" for e in events)


def test_the_magic_runs_a_prompt_on_the_server_and_the_widget_bundle_is_served(
    server: Server,
) -> None:
    kernel = Kernel(server)
    try:
        kernel.run("%load_ext neta_jupyter")
        shown = kernel.run("%neta --approve auto what files are here?")
        assert any(WIDGET in m["content"].get("data", {}) for m in shown), shown
        opened = [
            m["content"]["data"]["state"]
            for m in shown
            if m["msg_type"] == "comm_open" and "_esm" in m["content"]["data"].get("state", {})
        ]
        bundle = (Path(neta_jupyter.__file__).parent / "static" / "widget.js").read_text()
        assert len(bundle) > 10_000, "the wheel carries the built widget"
        assert any(state["_esm"] == bundle for state in opened), "the page gets the bundle"
        said = kernel.printed(
            "import neta_jupyter\n"
            "from neta_jupyter.kernel import current_context\n"
            "_run = await neta_jupyter.last_run()\n"
            "print(current_context().host.mode, _run.status, _run.request_id)"
        )
        mode, status, rid = said.split()
        assert (mode, status) == ("server", "completed"), said
        with server.client() as http:
            known = http.get("neta/api/agent/run/status", params={"requestId": rid})
        assert known.status_code == 200 and known.json()["status"] == "completed"
    finally:
        kernel.close()


def test_the_terminal_client_runs_a_prompt_embedded_and_on_the_server(
    server: Server, tmp_path: Path
) -> None:
    env = clean_env(tmp_path)
    common = ["what files are here?", "--yes", "--json", "--model", "demo"]
    for where in (["--data-dir", str(tmp_path / "embedded")], ["--server", server.url]):
        done = subprocess.run(
            [str(BIN / "neta-jupyter"), "run", *common, *where],
            capture_output=True,
            text=True,
            env=env | {"JUPYTER_TOKEN": server.token},
            cwd=tmp_path,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        types = [json.loads(line)["eventType"] for line in done.stdout.splitlines()]
        assert types[-1] == "MESSAGE_COMPLETED", done.stdout


def test_notebook_bound_runs_insert_run_and_edit_cells(server: Server) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# Notes"))
    nbformat.write(nb, server.root / "notes.ipynb")
    kernel = Kernel(server)
    bound = {"model": "demo", "notebookPath": "notes.ipynb", "kernelId": kernel.id}
    try:
        added = server.start_run(content="add a cell to the notebook", approve="auto", **bound)
        events = server.follow(added)
        assert events[-1]["eventType"] == "MESSAGE_COMPLETED", events[-1]
        calls = [e["data"]["toolName"] for e in events if e["eventType"] == "TOOL_START"]
        assert calls == ["insert_cell"], calls  # added and run in one call
        _, cell = nbformat.read(server.root / "notes.ipynb", as_version=4).cells
        assert cell.metadata["neta"]["requestId"] == added
        printed = "".join(o.get("text", "") for o in cell.outputs)
        assert "hello from a cell the demo model wrote" in printed

        edited = server.start_run(content="comment the last cell: greeting", **bound)
        events = server.follow(edited)
        assert events[-1]["eventType"] == "MESSAGE_SUSPENDED", "an edit asks first"
        (ask,) = [e["data"] for e in events if e["eventType"] == "PERMISSION_ASK"]
        assert ask["toolName"] == "edit_cell"
        with server.client() as http:
            answer = {"requestId": edited, "approved": True, "askId": ask["askId"]}
            assert http.post("neta/api/agent/run/resumeTask", json=answer).status_code == 200
        events = server.follow(edited, after=events[-1]["seq"])
        assert events[-1]["eventType"] == "MESSAGE_COMPLETED", events[-1]
    finally:
        kernel.close()
    _, cell = nbformat.read(server.root / "notes.ipynb", as_version=4).cells
    assert cell.source.startswith("# greeting\nprint(")
    assert cell.metadata["neta"]["requestId"] == edited


@pytest.mark.skipif("redis" in EXTRAS, reason="the redis extra is installed")
def test_without_the_redis_extra_a_redis_store_says_what_to_install(tmp_path: Path) -> None:
    assert importlib.util.find_spec("redis") is None, "a plain install has no redis"
    server = Server(tmp_path, {"store_url": "redis://127.0.0.1:9/0"})
    server.start()
    kernel = None
    try:
        with server.client() as http:
            answer = http.post("neta/api/agent/run/async", json={"content": "hi"})
        assert answer.status_code == 503, answer.text
        assert answer.json()["errCode"] == "DEPENDENCY_MISSING"
        assert "pip install 'neta_jupyter[redis]'" in answer.json()["message"]
        kernel = Kernel(server)
        kernel.run("%load_ext neta_jupyter")
        shown = kernel.run("%neta hi")
        shown += kernel.run("import neta_jupyter\nprint((await neta_jupyter.last_run()).error)")
        said = "".join(m["content"]["text"] for m in shown if m["msg_type"] == "stream")
        assert "pip install 'neta_jupyter[redis]'" in said, said
        to_widget = [
            json.dumps(m["content"]) for m in shown if m["msg_type"] in ("comm_open", "comm_msg")
        ]
        assert any("neta_jupyter[redis]" in state for state in to_widget), "the widget says it"
    finally:
        if kernel is not None:
            kernel.close()
        server.stop()
