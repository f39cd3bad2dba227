"""``neta-jupyter crew run``: a crew file run from the terminal, its decisions taken there."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import sys
from pathlib import Path
from typing import Any

from tests.cli_helpers import LiveCli, cli, cli_env, embedded, workdir

__all__ = ["workdir"]  # a fixture, imported for the tests below

CREW = {
    "name": "files",
    "inputs": ["first"],
    "agents": [{"name": "reader", "role": "You read files."}],
    "tasks": [
        {"id": "one", "agent": "reader", "description": "read {first}"},
        {"id": "two", "agent": "reader", "description": "read sales.csv"},
        {
            "id": "summary",
            "agent": "reader",
            "description": "read a.txt, knowing: {one} {two}",
            "depends_on": ["one", "two"],
        },
    ],
}


def _crew_file(workdir: Path, **changes: object) -> str:
    path = workdir / "crew.yaml"
    path.write_text(json.dumps({**CREW, **changes}, indent=2))
    return str(path)


def test_crew_run_follows_the_crew_and_prints_its_result(workdir: Path) -> None:
    args = ["crew", "run", _crew_file(workdir), "--input", "first=a.txt", "--yes"]
    done = cli(*embedded(workdir, *args), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "  one: running (attempt 1)" in lines and "  two: running (attempt 1)" in lines
    assert any(line.startswith("crew completed") for line in lines)
    result = done.stdout.split("\n## summary\n", 1)[1]
    assert "a.txt" in result


def test_a_bad_crew_file_is_refused_naming_the_field_and_line(workdir: Path) -> None:
    tasks = [dict(CREW["tasks"][0], agent="writer"), *CREW["tasks"][1:]]  # type: ignore[index]
    done = cli(*embedded(workdir, "crew", "run", _crew_file(workdir, tasks=tasks)))
    assert done.returncode == 2
    assert "tasks[0].agent: unknown agent 'writer'" in done.stderr
    assert "(line " in done.stderr
    missing = cli(*embedded(workdir, "crew", "run", _crew_file(workdir)))
    assert missing.returncode == 2 and "inputs.first: missing input" in missing.stderr


def test_an_approval_gate_waits_without_a_terminal(workdir: Path) -> None:
    tasks = [dict(CREW["tasks"][0], approval="before")]  # type: ignore[index]
    args = ["crew", "run", _crew_file(workdir, tasks=tasks), "--input", "first=a.txt"]
    done = cli(*embedded(workdir, *args), timeout=60)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "waits for a decision on one" in done.stderr


def test_an_approval_gate_is_decided_at_the_terminal(workdir: Path) -> None:
    tasks = [dict(CREW["tasks"][0], approval="before")]  # type: ignore[index]
    args = ["crew", "run", _crew_file(workdir, tasks=tasks), "--input", "first=a.txt"]
    master, slave = pty.openpty()
    try:
        live = LiveCli(*embedded(workdir, *args), stdin=slave)
        os.close(slave)
        live.wait_for("decide: retry, skip, answer or stop?")
        os.write(master, b"answer\n")
        live.wait_for("your answer:")
        os.write(master, b"go ahead\n")
        assert live.finish(120) == 0, live.output
    finally:
        os.close(master)
    assert "one waits for a decision: approve starting task one" in live.output
    assert "crew completed" in live.output


async def test_crew_run_on_a_server_follows_it_there(
    api: Any, server_url: str, jp_auth_header: dict[str, str], jp_root_dir: Path, tmp_path: Path
) -> None:
    (jp_root_dir / "a.txt").write_text("alpha contents\n")
    (jp_root_dir / "sales.csv").write_text("region,amount\nnorth,10\n")
    token = jp_auth_header["Authorization"].split(" ", 1)[1]
    args = ["crew", "run", _crew_file(tmp_path), "--input", "first=a.txt", "--yes"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "neta_jupyter.cli",
        *args,
        "--server",
        server_url,
        "--token",
        token,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cli_env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, (out + err).decode()
    assert "crew completed" in out.decode()
    rid = err.decode().split("crew ", 1)[1].split(" ", 1)[0]
    status = await api.http.get("neta/api/crew/status", params={"requestId": rid})
    assert status.json()["status"] == "completed", "the crew ran on the server"
