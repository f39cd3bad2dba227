"""Two real jupyter servers on one real Redis: runs go on where their kernel is, and the
attachments' bytes are on a directory every server shares.

A run bound to a notebook's kernel on server A that is resumed (a permission answer, a resume
after a pause) through server B goes on on A, with A's kernel; B answers what A answered.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.redis_server import redis_server
from tests.server_process import ServerProcess
from tests.test_redis_replicas import LEASE, start

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path / "redis") as url:
        yield url


def servers(
    tmp_path: Path, redis_url: str, a_config: dict[str, Any], b_config: dict[str, Any]
) -> tuple[ServerProcess, ServerProcess]:
    """Servers A and B on one Redis and one notebook root (as replicas behind a proxy)."""
    a = ServerProcess(tmp_path / "a", {"store_url": redis_url, **LEASE, **a_config})
    b = ServerProcess(tmp_path / "b", {"store_url": redis_url, **LEASE, **b_config})
    b.root = a.root
    return a, b


def test_an_attachment_a_run_wrote_on_one_server_is_served_by_the_other(
    tmp_path: Path, redis_url: str
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    mount_b = tmp_path / "mount-b"  # B mounts the shared volume at another path
    mount_b.symlink_to(shared)
    a, b = servers(tmp_path, redis_url, {"attachment_dir": str(shared)},
                   {"attachment_dir": str(mount_b)})  # fmt: skip
    (a.root / "report.csv").write_text("city,temp\nOslo,4\nRome,18\n")
    script = tmp_path / "send.json"
    call = {"name": "send_file", "arguments": {"path": "report.csv"}}
    script.write_text(json.dumps({"turns": [{"toolCalls": [call]}, {"text": "Sent."}]}))
    a.start()
    b.start()
    try:
        rid = start(a, content="send the report", model=f"scripted:{script}", approve="auto")
        log = a.read(rid)
        assert log[-1]["eventType"] == "MESSAGE_COMPLETED", log[-1]
        [sent] = [e["data"] for e in log if e["eventType"].startswith("ATTACHMENT_")]
        a.stop()
        shutil.rmtree(a.workdir / "neta-data", ignore_errors=True)  # A's own disk is gone
        shared.rename(tmp_path / "moved")  # and B's mount follows the volume
        mount_b.unlink()
        mount_b.symlink_to(tmp_path / "moved")
        with b.client() as http:
            got = http.get(
                "neta/api/agent/attachment/download",
                params={"virtualPath": sent["virtualPath"]},
            )
        assert got.status_code == 200, got.text
        assert got.text == "city,temp\nOslo,4\nRome,18\n"
    finally:
        a.stop()
        b.stop()
