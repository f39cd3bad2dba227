"""A server without the optional parts (Redis, the collaboration stack) still serves every run.

The server runs in a subprocess whose imports of those packages fail as if they were not
installed (``tests/fixtures/blocked_imports``): the extension loads, a notebook-bound run edits
the file and says how to get live edits, and a Redis store answers with what to install.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.notebook_room import write_notebook
from tests.server_process import ServerProcess

pytestmark = pytest.mark.timeout(240)

BLOCKER = Path(__file__).parents[1] / "fixtures" / "blocked_imports"


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Servers started after ``without("redis", ...)`` cannot import those packages."""

    def block(*modules: str) -> None:
        path = os.pathsep.join(p for p in (str(BLOCKER), os.environ.get("PYTHONPATH")) if p)
        monkeypatch.setenv("PYTHONPATH", path)
        monkeypatch.setenv("BLOCKED_IMPORTS", ",".join(modules))

    return block


def test_without_collaboration_stack_a_notebook_run_edits_the_file_and_says_why(
    tmp_path: Path, without: Any
) -> None:
    without("redis", "pycrdt", "jupyter_server_ydoc")
    server = ServerProcess(tmp_path)
    write_notebook(server.root / "nb.ipynb", ("markdown", "# Notes"))
    server.start()
    try:
        with server.client() as http:
            assert http.get("neta/api/agent/runs").status_code == 200
            kernel = http.post("api/kernels", json={"name": "python3"}).json()["id"]
            started = http.post(
                "neta/api/agent/run/async",
                json={
                    "content": "add a cell to the notebook",
                    "model": "demo",
                    "notebookPath": "nb.ipynb",
                    "kernelId": kernel,
                    "approve": "auto",
                },
            )
            assert started.status_code == 200, started.text
        events = server.read(started.json()["requestId"])
        assert events[-1]["eventType"] == "MESSAGE_COMPLETED", events[-1]
        calls = [e["data"]["toolName"] for e in events if e["eventType"] == "TOOL_START"]
        assert calls == ["insert_cell"], "the demo model adds and runs the cell in one call"
        (edit,) = [
            e["data"]
            for e in events
            if e["eventType"] == "TOOL_EVENT" and e["data"].get("category") == "notebook_edit"
        ]
        assert edit["payload"]["via"] == "file"
        assert "pip install jupyter-collaboration" in edit["userMessage"]
        assert "pip install jupyter-collaboration" in edit["payload"]["note"], "the widget says it"
        _, added = nbformat.read(server.root / "nb.ipynb", as_version=4).cells
        printed = "".join(o.get("text", "") for o in added.outputs)
        assert "hello from a cell the demo model wrote" in printed
        log = server.log_text()
        assert "neta_jupyter | extension was successfully loaded" in log
        assert "neta: the collaboration extension (jupyter_server_ydoc) is not loaded" in log
    finally:
        server.stop()


def test_a_redis_store_without_redis_answers_what_to_install(tmp_path: Path, without: Any) -> None:
    without("redis")
    server = ServerProcess(tmp_path, {"store_url": "redis://127.0.0.1:9/0"})
    server.start()
    try:
        with server.client() as http:
            for answer in (
                http.get("neta/api/agent/runs"),
                http.post("neta/api/agent/run/async", json={"content": "hi", "model": "demo"}),
            ):
                assert answer.status_code == 503, answer.text
                body = answer.json()
                assert body["errCode"] == "DEPENDENCY_MISSING" and body["success"] is False
                assert "pip install 'neta_jupyter[redis]'" in body["message"]
                assert "Traceback" not in answer.text
            assert http.get("api/status").status_code == 200, "the server itself is up"
        assert "neta: the run API is off" in server.log_text()
    finally:
        server.stop()


LAZY = ("neta_jupyter.store.redis_", "neta_jupyter.server.notebook_shared")
"""The only modules that import an optional part at their top (each imported where it is used)."""


def test_no_other_module_imports_an_optional_part_when_it_is_loaded(tmp_path: Path) -> None:
    script = f"""
import importlib, pkgutil, neta_jupyter
failed = []
for info in pkgutil.walk_packages(neta_jupyter.__path__, "neta_jupyter."):
    if info.name.startswith({LAZY!r}) or info.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(info.name)
    except ImportError as exc:
        failed.append(f"{{info.name}}: {{exc}}")
print("\\n".join(failed))
"""
    path = os.pathsep.join(p for p in (str(BLOCKER), os.environ.get("PYTHONPATH")) if p)
    env = os.environ | {"PYTHONPATH": path, "BLOCKED_IMPORTS": "redis,pycrdt,jupyter_server_ydoc"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout
