"""A notebook executed headless (nbclient) and saved keeps the run: transcript and snapshot."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.timeout(90)

WIDGET = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"


async def test_saved_notebook_carries_the_transcript_and_the_widget_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NETA_SERVER_URL", "NETA_KERNEL_TOKEN", "NETA_SERVER_PID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETA_DEMO_PACE", "0")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "%load_ext neta_jupyter\nimport pandas as pd\ndf = pd.DataFrame({'x': [2.0, 4.0, 9.0]})"
        ),
        nbformat.v4.new_code_cell(
            "%neta what is the mean of df's column x? compute it --approve auto"
        ),
        nbformat.v4.new_code_cell(
            "from neta_jupyter.kernel import current_context\n"
            "await current_context().last.wait(60);"
        ),
    ]
    client = NotebookClient(
        nb, kernel_name="python3", timeout=60, resources={"metadata": {"path": str(tmp_path)}}
    )
    await client.async_execute()
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)

    outputs = saved.cells[1].outputs
    assert len(outputs) == 1, "one output, updated in place when the run ended"
    data = outputs[0]["data"]
    assert WIDGET in data
    markdown = data["text/markdown"]
    assert "> what is the mean of df's column x? compute it" in markdown
    assert "- `python` `code=print(df.describe())` ✓" in markdown
    assert "mean   5.0" in markdown
    assert "*completed" in markdown
    assert saved.cells[2].outputs == [], "waiting shows nothing by itself"

    model_id = data[WIDGET]["model_id"]
    state = saved.metadata["widgets"][STATE]["state"][model_id]["state"]
    assert state["mode"] == "embedded"
    assert state["snapshot"]["status"] == "completed"
    assert "mean   5.0" in state["snapshot"]["finalText"]
    assert state["snapshot"]["requestId"] == state["request_id"]
