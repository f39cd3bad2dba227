"""The run list says where each run came from: the client that started it, and its notebook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.terminal.backends import run_request
from tests.helpers import ApiClient

pytestmark = pytest.mark.timeout(120)


async def _listed(api: ApiClient) -> dict[str, dict[str, Any]]:
    response = await api.http.get("neta/api/agent/runs")
    assert response.status_code == 200, response.text
    return {run["requestId"]: run for run in response.json()["runs"]}


async def test_a_run_is_listed_with_the_client_that_said_it_started_it(
    api: ApiClient, jp_root_dir: Path
) -> None:
    (jp_root_dir / "work.ipynb").write_text(
        '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    )
    plain = await api.start("hello", model="demo")
    panel = await api.start("hello", model="demo", origin="panel", notebookPath="work.ipynb")

    runs = await _listed(api)
    assert runs[plain["requestId"]]["origin"]["kind"] == "api"
    assert runs[plain["requestId"]]["origin"]["notebookPath"] is None
    assert runs[panel["requestId"]]["origin"]["kind"] == "panel"
    assert runs[panel["requestId"]]["origin"]["notebookPath"] == "work.ipynb"
    status = await api.status(panel["requestId"])
    assert status["origin"]["kind"] == "panel"


async def test_a_client_cannot_claim_to_be_a_subagent_or_an_mcp_client(api: ApiClient) -> None:
    for claimed in ("subagent", "crew", "mcp", "someone"):
        response = await api.post("async", {"content": "hi", "model": "demo", "origin": claimed})
        assert response.status_code == 400, response.text
        assert response.json()["errCode"]


def test_the_terminal_client_says_it_is_the_terminal() -> None:
    import argparse

    args = argparse.Namespace(prompt="hello", session=None, yes=False)
    assert run_request(args).origin == "terminal"


def test_a_child_run_says_it_was_delegated_or_a_crew_task_whatever_its_options_say() -> None:
    from neta_jupyter.runtime.data.state import RunOptions, origin_of

    assert origin_of(RunOptions(kind="subagent", origin="cell")).kind == "subagent"
    assert origin_of(RunOptions(kind="crew_task")).kind == "crew"
    assert origin_of(
        RunOptions(kind="top", origin="cell", notebook_path="a.ipynb")
    ).model_dump() == {
        "kind": "cell",
        "notebook_path": "a.ipynb",
        "client": None,
    }


def test_an_mcp_run_names_the_outside_agent_it_serves() -> None:
    from neta_jupyter.runtime.data.state import McpClient, RunOptions, origin_of

    origin = origin_of(
        RunOptions(kind="mcp", mcp_client=McpClient(name="claude-code", version="2"))
    )
    assert (origin.kind, origin.client) == ("mcp", "claude-code")
