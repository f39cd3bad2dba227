"""The demo notebooks run headless (nbclient, embedded runtime, NETA_APPROVE=auto) and keep their
results in the saved file: the widget's snapshot and the markdown transcript."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"

WAIT_FOR_RUNS = """\
import asyncio
import neta_jupyter.kernel as _neta
_ctx = _neta.current_context()
await asyncio.gather(*(h.wait(180) for h in _ctx.launched))
print("runs at rest:", sorted(h.status for h in _ctx.launched))
"""


def execute(name: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    for var in ("NETA_SERVER_URL", "NETA_KERNEL_TOKEN", "NETA_SERVER_PID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETA_APPROVE", "auto")
    monkeypatch.setenv("MPLBACKEND", "agg")
    shutil.copy(NOTEBOOKS / name, workdir / name)
    nb = nbformat.read(workdir / name, as_version=4)
    nb.cells = [c for c in nb.cells if "needs-api-key" not in c.metadata.get("tags", [])]
    nb.cells.append(nbformat.v4.new_code_cell(WAIT_FOR_RUNS))
    client = NotebookClient(
        nb,
        timeout=240,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()
    return nb


def cell_output(nb: Any, source_start: str) -> tuple[str, str]:
    """(text/markdown, text/plain and stream text) of the first cell whose source starts so."""
    cell = next(c for c in nb.cells if c.source.lstrip().startswith(source_start))
    markdown, plain = [], []
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        markdown.append(data.get("text/markdown", ""))
        plain.append(data.get("text/plain", "") + out.get("text", ""))
    return "".join(markdown), "".join(plain)


def snapshots(nb: Any) -> list[dict[str, Any]]:
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return [m["state"]["snapshot"] for m in state.values() if "snapshot" in m.get("state", {})]


def assert_runs_completed(nb: Any, count: int) -> None:
    assert "runs at rest" in cell_output(nb, "import asyncio")[1]
    found = snapshots(nb)
    assert len(found) >= count
    assert all(s["status"] == "completed" for s in found), [s.get("status") for s in found]


def test_quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = execute("quickstart.ipynb", tmp_path, monkeypatch)
    assert_runs_completed(nb, 4)
    files, _ = cell_output(nb, "%neta what files")
    assert "notes.txt" in files and "list_files" in files
    summary, _ = cell_output(nb, "%neta please summarise")
    assert "read_file" in summary and "12%" in summary
    computed, _ = cell_output(nb, "%neta what is 17*23")
    assert "python" in computed and "391" in computed
    assert "17*23" in computed or "17 * 23" in computed
    _, status = cell_output(nb, "%neta status")
    assert "17*23" in status, "the status of the latest run: the computation"
    _, help_text = cell_output(nb, "%neta help")
    assert "%neta stop" in help_text


def test_dataframe_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = execute("dataframe_analysis.ipynb", tmp_path, monkeypatch)
    assert_runs_completed(nb, 2)
    missing, _ = cell_output(nb, "%neta which columns")
    for tool in ("list_variables", "inspect_variable", "python"):
        assert tool in missing, tool
    assert "discount" in missing
    texts = [s["finalText"] for s in snapshots(nb)]
    assert any("discount" in t for t in texts)
    mean, _ = cell_output(nb, 'column = "price"')
    assert "price" in mean


def test_providers_walkthrough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = execute("providers.ipynb", tmp_path, monkeypatch)
    assert not any("needs-api-key" in c.metadata.get("tags", []) for c in nb.cells)
    _, models = cell_output(nb, "%neta models")
    assert "demo" in models
    _, config = cell_output(nb, "%neta config")
    assert "embedded" in config
    assert_runs_completed(nb, 1)


def test_skill_profiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = execute("skill_profiling.ipynb", tmp_path, monkeypatch)
    assert_runs_completed(nb, 1)
    report, _ = cell_output(nb, "%neta profile")
    assert "run_skill" in report
    assert "sales.csv" in report


def test_subagents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = execute("subagents.ipynb", tmp_path, monkeypatch)
    assert_runs_completed(nb, 1)
    answer, _ = cell_output(nb, "%neta compare")
    assert "delegate" in answer
    for name in ("notes.txt", "data.csv", "README.md"):
        assert f"`{name}` has " in answer, name
    _, children = cell_output(nb, "import neta_jupyter")
    assert [line.split()[:2] for line in children.splitlines()[:3]] == [
        ["notes.txt", "completed"],
        ["data.csv", "completed"],
        ["README.md", "completed"],
    ]
    _, history = cell_output(nb, "%neta history")
    assert history.count("(sub-agent of ") == 3


def test_crews_notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = execute("crews.ipynb", tmp_path, monkeypatch)
    _, waited = cell_output(nb, "import neta_jupyter\n\ncrew = neta_jupyter.last_crew()")
    assert waited.strip() == "waiting ['approval_after']"
    _, retried = cell_output(nb, 'await crew.decide("summary", "retry"')
    assert retried.strip() == "waiting 2"
    _, done = cell_output(nb, 'await crew.decide("summary", "answer"')
    assert done.startswith("completed\n")
    assert "sales.csv" in done
    _, board = cell_output(nb, "crew")
    assert board == "<crew profile-and-report completed {'completed': 4}>"
