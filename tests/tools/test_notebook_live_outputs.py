"""run_cell's outputs reach an open view of the notebook the way JupyterLab's views watch them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, script, types
from tests.notebook_room import collaboration_config, joined, until, write_notebook
from tests.tools.test_notebook_tools import call

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def jp_server_config(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    return collaboration_config(jp_root_dir, tmp_path)


async def test_outputs_land_in_the_array_an_open_view_holds(
    api: ApiClient,
    runtime: Runtime,
    jp_root_dir: Path,
    jp_serverapp: Any,
    server_url: str,
    jp_auth_header: dict[str, str],
) -> None:
    (cell,) = write_notebook(jp_root_dir / "view.ipynb", ("code", "print('ran by the agent')"))
    kernel_id = await jp_serverapp.kernel_manager.start_kernel()
    try:
        async with joined(api.http, server_url, jp_auth_header, "view.ipynb") as notebook:
            # A JupyterLab view takes the cell's outputs array once, when it shows the cell,
            # and draws what changes in it.
            held = notebook.ycells[0]["outputs"]
            script(runtime, call("run_cell", cell_id=cell), ScriptedTurn(text="done"))
            started = await api.start(
                "run it", model="scripted", notebookPath="view.ipynb", kernelId=kernel_id,
                approve="auto",
            )  # fmt: skip
            events = await api.segment(started["requestId"])
            assert types(events)[-1] == "MESSAGE_COMPLETED"

            def shown() -> str:
                return "".join(str(o.get("text", "")) for o in held.to_py())

            await until(lambda: "ran by the agent" in shown(), "the open view never got it")
            assert notebook.ycells[0]["outputs"].to_py() == held.to_py()
    finally:
        await jp_serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)
