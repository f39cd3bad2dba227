"""An outside agent runs cells through neta's MCP server: figures come back, a cancel interrupts."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from pathlib import Path
from typing import Any

import mcp_types
import pytest

from tests.helpers import ApiClient, types
from tests.notebook_mcp.agent import agent, text_of, write_notebook

pytestmark = pytest.mark.timeout(240)

PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()"
SLOW = "import time\nfor _ in range(1200):\n    time.sleep(0.25)\nfinished = True"
AFTER = "print('finished' in globals(), 6 * 7)"


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {
        "permission_rules": [
            {"tool": "run_cell", "action": "allow", "client": "test-agent"},
            {"tool": "insert_cell", "action": "allow", "client": "test-agent"},
        ],
        "mcp_progress_interval": 0.5,
    }


async def test_a_cell_draws_a_figure_and_a_cancelled_long_cell_interrupts_the_kernel(
    server_url: str, jp_auth_header: dict[str, str], jp_root_dir: Path
) -> None:
    cells = [("plot", PLOT), ("slow", SLOW), ("after", AFTER)]
    write_notebook(jp_root_dir, "cells.ipynb", cells)
    async with agent(server_url, jp_auth_header) as session:
        listed = text_of(await session.call_tool("list_notebooks", {}))
        assert "cells.ipynb" not in listed  # no kernel yet: nothing open
        drawn = await session.call_tool("run_cell", {"notebook": "cells.ipynb", "cell_id": "plot"})
        assert not drawn.is_error, text_of(drawn)
        assert "had no kernel: started" in text_of(drawn)
        images = [c for c in drawn.content if isinstance(c, mcp_types.ImageContent)]
        assert images and images[0].mime_type == "image/png"
        assert base64.b64decode(images[0].data).startswith(b"\x89PNG")
        assert "cells.ipynb" in text_of(await session.call_tool("list_notebooks", {}))
        inserted = await session.call_tool(
            "insert_cell", {"notebook": "cells.ipynb", "source": "print(6 * 7)", "run": True}
        )
        assert not inserted.is_error and "42" in text_of(inserted), text_of(inserted)

        progressed = asyncio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            progressed.set()

        slow = asyncio.ensure_future(
            session.call_tool(
                "run_cell",
                {"notebook": "cells.ipynb", "cell_id": "slow"},
                progress_callback=on_progress,
            )
        )
        await asyncio.wait_for(progressed.wait(), 60)
        slow.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await slow
        after = await session.call_tool("run_cell", {"notebook": "cells.ipynb", "cell_id": "after"})
        assert not after.is_error, text_of(after)
        assert "False 42" in text_of(after)  # the slow cell was stopped; the kernel lives


async def test_stopping_the_sessions_run_ends_its_calls_and_the_session(
    server_url: str, jp_auth_header: dict[str, str], jp_root_dir: Path, api: ApiClient
) -> None:
    write_notebook(jp_root_dir, "stop.ipynb", [("slow", SLOW), ("after", AFTER)])
    async with agent(server_url, jp_auth_header) as session:
        progressed = asyncio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            progressed.set()

        slow = asyncio.ensure_future(
            session.call_tool(
                "run_cell",
                {"notebook": "stop.ipynb", "cell_id": "slow"},
                progress_callback=on_progress,
            )
        )
        await asyncio.wait_for(progressed.wait(), 60)
        request_id = (await api.http.get("neta/api/agent/runs")).json()["runs"][0]["requestId"]
        stopped = await api.post("terminateTask", {"requestId": request_id})
        assert stopped.status_code == 200, stopped.text
        ended = await asyncio.wait_for(slow, 60)
        assert ended.is_error and "stopped by the user" in text_of(ended)
        refused = await session.call_tool(
            "run_cell", {"notebook": "stop.ipynb", "cell_id": "after"}
        )
        assert refused.is_error and "start a new session" in text_of(refused)
    events = await api.segment(request_id)
    assert types(events)[-1] == "MESSAGE_FAILED"
    assert events[-1]["data"]["errorCode"] == "USER_CANCELLED"
    failed = [e for e in events if e["eventType"] == "TOOL_FAILED"]
    assert [e["data"]["toolName"] for e in failed] == ["run_cell"]
    assert (await api.post("retryTask", {"requestId": request_id})).status_code == 409
