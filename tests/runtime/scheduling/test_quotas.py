"""Per-user quotas over the API: runs going at once, bytes of uploads kept, and their retention."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedModel, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.crew_helpers import agent, four_tasks
from tests.helpers import ApiClient, types

UPLOAD = "neta/api/agent/attachment/upload"
DOWNLOAD = "neta/api/agent/attachment/download"


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"max_active_runs_per_user": 2, "max_upload_bytes_per_user": 10_000}


def _slow(runtime: Runtime) -> None:
    """``slow`` answers after a long while (the test stops its runs)."""
    runtime.models.register("slow", ScriptedModel([ScriptedTurn(text=["a", "b"], delay=60)] * 4))


async def test_a_user_past_their_runs_at_once_gets_429_until_one_ends(
    api: ApiClient, runtime: Runtime
) -> None:
    _slow(runtime)
    first = (await api.start("one", model="slow"))["requestId"]
    await api.start("two", model="slow")
    refused = await api.post("async", {"content": "three", "model": "slow"})
    assert refused.status_code == 429, refused.text
    assert refused.json()["errCode"] == "RUN_QUOTA_EXCEEDED"
    assert "2 runs going" in refused.json()["message"]
    for name in ("profiler_a", "profiler_b", "reconciler", "writer"):
        agent(runtime, name, ScriptedTurn(text="x"))
    crew = await api.http.post(
        "neta/api/crew/run", json={"definition": four_tasks(), "inputs": {"table_a": "a"}}
    )
    assert crew.status_code == 429 and crew.json()["errCode"] == "RUN_QUOTA_EXCEEDED"

    stopped = await api.post("terminateTask", {"requestId": first})
    assert stopped.status_code == 200, stopped.text
    assert types(await api.segment(first))[-1] == "MESSAGE_FAILED"
    runtime.models.register("quick", ScriptedModel([ScriptedTurn(text="done")]))
    third = await api.post("async", {"content": "three", "model": "quick"})
    assert third.status_code == 200, third.text
    for run in await runtime.runs.find(status="running"):
        await api.post("terminateTask", {"requestId": run.request_id})


async def test_uploads_past_the_quota_get_429_and_old_ones_are_deleted(
    api: ApiClient, runtime: Runtime
) -> None:
    first = await api.http.post(UPLOAD, params={"fileName": "a.csv"}, content=b"a" * 6_000)
    assert first.status_code == 200, first.text
    over = await api.http.post(UPLOAD, params={"fileName": "b.csv"}, content=b"b" * 6_000)
    assert over.status_code == 429, over.text
    assert over.json()["errCode"] == "ATTACHMENT_QUOTA_EXCEEDED"
    assert "quota of 10,000 bytes" in over.json()["message"]

    # A week later the first upload has expired: it is deleted, and its room is free again.
    record = await runtime.store.records.get_attachment(first.json()["virtualPath"])
    assert record is not None
    upload_folder = Path(record.disk_path).parent
    week_ago = time.time() - 8 * 86_400
    os.utime(upload_folder, (week_ago, week_ago))
    again = await api.http.post(UPLOAD, params={"fileName": "b.csv"}, content=b"b" * 6_000)
    assert again.status_code == 200, again.text
    gone = await api.http.get(DOWNLOAD, params={"virtualPath": first.json()["virtualPath"]})
    assert gone.status_code == 404
    kept = await api.http.get(DOWNLOAD, params={"virtualPath": again.json()["virtualPath"]})
    assert kept.status_code == 200 and kept.content == b"b" * 6_000
