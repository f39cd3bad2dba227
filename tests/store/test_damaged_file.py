"""A damaged database file: the API says so (503), the log says so, and ``doctor`` salvages it.

Each case damages a real store the way disks and people do (cut short, header overwritten, a
folder in its place, garbage in the middle), then starts a real server on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from neta_jupyter.cli import main as cli_main
from neta_jupyter.client import HttpTransport, RunClient, ServerError
from neta_jupyter.providers import ModelRegistry
from neta_jupyter.runtime import Runtime, RuntimeConfig
from neta_jupyter.store import Store
from neta_jupyter.store.doctor import salvage
from tests.helpers import TERMINAL
from tests.server_process import ServerProcess

RUNS = 6
PAGE = 4096


def make_store(data: Path, runs: int, deltas: int) -> None:
    """A store with ``runs`` finished runs of ``deltas`` text deltas each."""

    async def fill() -> None:
        store = Store(data / "neta.sqlite3")
        config = RuntimeConfig(root_dir=data.parent, data_dir=data)
        runtime = Runtime(store, config, models=ModelRegistry(scripts=data.parent))
        try:
            for number in range(runs):
                script = data.parent / f"script-{number}.json"  # a script plays its turns once
                script.write_text(json.dumps({"turns": [{"repeat": ["word " * 10, deltas]}]}))
                run = await runtime.start("owner", f"prompt {number}", model=f"scripted:{script}")
                await runtime.wait(run.request_id)
        finally:
            store.close()

    data.mkdir(parents=True)
    asyncio.run(fill())


@pytest.fixture(scope="module")
def sound_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("sound") / "neta-data"
    make_store(data, RUNS, 2000)
    return data


def truncate(db: Path) -> None:
    os.truncate(db, db.stat().st_size // 2)


def garbage_header(db: Path) -> None:
    with db.open("r+b") as file:
        file.write(b"not a database, just garbage! " * 3 + b"!!!!!!!!!!")


def folder(db: Path) -> None:
    db.unlink()
    db.mkdir()
    (db / "notes.txt").write_text("someone made a folder here")


def garbage_in_the_middle(db: Path) -> None:
    middle = db.stat().st_size // 2 // PAGE * PAGE
    with db.open("r+b") as file:
        file.seek(middle)
        file.write(b"\xff" * PAGE * 3)


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (truncate, "cut short"),
    "garbage header": (garbage_header, "header is damaged"),
    "folder at its path": (folder, "is a folder"),
    "garbage mid-file": (garbage_in_the_middle, "damaged"),
}


def get(server: ServerProcess, path: str, **kwargs: Any) -> httpx.Response:
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http:
        return http.get(path, **kwargs)


def replay(server: ServerProcess, request_id: str) -> list[tuple[str, str]]:
    with (
        httpx.Client(base_url=server.url, headers=server.headers, timeout=60) as http,
        connect_sse(
            http, "GET", "neta/api/agent/run/stream", params={"requestId": request_id}
        ) as source,
    ):
        return [(s.event, s.data) for s in source.iter_sse() if s.event != "HEARTBEAT"]


async def follow_all(server: ServerProcess, request_id: str) -> None:
    client = RunClient(HttpTransport(server.url, headers=server.headers))
    try:
        async for _ in client.follow(request_id):
            pass
    finally:
        await client.aclose()


def doctor(data: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = cli_main(["doctor", "--data-dir", str(data), *extra])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_store_is_reported_and_salvaged(
    case: str, sound_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage, words = CASES[case]
    data = tmp_path / "neta-data"
    shutil.copytree(sound_store, data)
    damage(data / "neta.sqlite3")
    server = ServerProcess(tmp_path)
    server.start()
    try:
        for answer in (
            get(server, "neta/api/agent/runs"),
            get(server, "neta/api/agent/run/stream", params={"requestId": "r_any"}),
            get(server, "neta/ws"),
        ):
            assert answer.status_code == 503, answer.text
            body = answer.json()
            assert body["errCode"] == "STORAGE_DAMAGED" and body["success"] is False
            assert words in body["message"]
            assert f"neta-jupyter doctor --salvage --data-dir {data}" in body["message"]
        with httpx.Client(base_url=server.url, timeout=30) as anonymous:
            assert anonymous.get("neta/api/agent/runs").status_code == 403, "auth still applies"
        errors = [line for line in server.log_text().splitlines() if line.startswith("[E ")]
        assert any("neta: the run API is off" in line and words in line for line in errors)
    finally:
        server.stop()

    code, report = doctor(data, capsys)
    assert code == 1
    assert words in report and "neta-jupyter doctor --salvage" in report
    code, salvaged = doctor(data, capsys, "--salvage")
    assert code == 0, salvaged
    assert "Moved the damaged store aside" in salvaged and "No problems found" in salvaged
    assert list(data.glob("neta.sqlite3.damaged-*")), "the damaged file is kept"

    server.start()
    try:
        listed = get(server, "neta/api/agent/runs")
        assert listed.status_code == 200, listed.text
        runs = listed.json()["runs"]
        if case in ("garbage header", "garbage mid-file"):
            assert len(runs) == RUNS, "every run whose rows could be read is kept"
        for run in runs:
            events = replay(server, run["requestId"])
            assert sum(kind in TERMINAL for kind, _ in events) == 1, "each run still ends once"
        assert get(server, "neta/api/models").status_code == 200
    finally:
        server.stop()


def test_a_read_that_fails_mid_replay_ends_the_stream_with_an_error(tmp_path: Path) -> None:
    data = tmp_path / "neta-data"
    make_store(data, 1, 40_000)  # several MB: more than the server keeps in its page cache
    db = data / "neta.sqlite3"
    server = ServerProcess(tmp_path)
    server.start()
    try:
        rid = get(server, "neta/api/agent/runs").json()["runs"][0]["requestId"]
        # Damage the file under the running server (its start-up check passed).
        at = db.stat().st_size // 4 // PAGE * PAGE
        with db.open("r+b") as file:
            file.seek(at)
            file.write(b"\xff" * PAGE * 2)
        events = replay(server, rid)
        kinds = [kind for kind, _ in events]
        assert kinds[-1] == "error", "the stream ends with an explicit error, not in silence"
        assert not TERMINAL & set(kinds)
        stored = [json.loads(d) for k, d in events[:-1] if k != "AGENT_STATUS"]
        assert [e["seq"] for e in stored] == list(range(len(stored)))
        assert 0 < len(stored) < 40_000
        error = json.loads(events[-1][1])
        assert error["errCode"] == "STORAGE_DAMAGED" and "damaged" in error["message"]
        log = server.log_text()
        assert "is damaged" in log and "neta-jupyter doctor" in log
        # The run API's client reports the damage, not a run that does not exist.
        with pytest.raises(ServerError) as refused:
            asyncio.run(follow_all(server, rid))
        assert refused.value.code == "STORAGE_DAMAGED"
    finally:
        server.stop()


def test_the_terminal_client_says_how_to_recover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "neta.sqlite3").mkdir()
    assert cli_main(["run", "hello", "--data-dir", str(tmp_path)]) == 2
    said = capsys.readouterr().err
    assert "is a folder" in said and f"neta-jupyter doctor --data-dir {tmp_path}" in said


def test_a_salvage_keeps_when_ended_crews_logs_expire(tmp_path: Path) -> None:
    """An ended crew's log is still deleted after the retention once its store was salvaged."""

    async def end_a_crew(db: Path) -> None:
        store = Store(db)
        try:
            await store.events.open("crew_1")
            store.events.retire("crew_1")
            await store.events.flush()
        finally:
            store.close()

    db = tmp_path / "neta.sqlite3"
    asyncio.run(end_a_crew(db))
    garbage_header(db)
    result = salvage(db)
    assert not [note for note in result.notes if "ended_streams" in note], result.notes
    with sqlite3.connect(db) as conn:
        ended = conn.execute(
            "SELECT e.request_id FROM ended_streams d JOIN event_streams e USING (stream)"
        ).fetchall()
    assert ended == [("crew_1",)]
