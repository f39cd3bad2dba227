"""The scripted model is for tests: no run request and no model's ``delegate`` reaches a file.

A server as users run it has no ``scripted_models_dir``; there ``scripted:<path>`` is an unknown
model, whoever names it, and nothing is opened. With the folder set (tests, benchmarks) only its
regular files are read.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ModelRegistry, ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.providers.config import UnknownModel
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient

pytestmark = pytest.mark.timeout(120)

SCRIPT = '{"turns": [{"text": "scripted answer"}]}'


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"scripted_models_dir": ""}  # as users run the server


def feed_later(fifo: Path, seconds: float) -> threading.Thread:
    """Write a script into ``fifo`` once someone reads it, for ``seconds`` at most: a server
    that waits on the pipe is freed again when the test gives up on it."""

    def feed() -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader yet
                time.sleep(0.05)
                continue
            os.write(fd, SCRIPT.encode())
            os.close(fd)
            return

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread


async def test_a_run_request_cannot_name_a_file_as_its_model(
    api: ApiClient, tmp_path: Path
) -> None:
    (tmp_path / "real.json").write_text(SCRIPT)
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    feeder = feed_later(fifo, 20)
    messages = {}
    for name in ("real.json", "missing.json", "pipe.json"):
        spec = f"scripted:{tmp_path / name}"
        response = await api.post("async", {"content": "hi", "model": spec})
        assert response.status_code == 400, (name, response.text)
        assert response.json()["errCode"] == "UNKNOWN_MODEL"
        messages[name] = response.json()["message"].replace(spec, "<model>")
    # The answer says nothing of the file: an existing one reads as a missing one.
    assert messages["real.json"] == messages["missing.json"] == messages["pipe.json"]
    listed = await api.http.get("neta/api/agent/runs")
    assert listed.json()["runs"] == []
    feeder.join(0)


async def test_delegate_cannot_give_a_sub_agent_a_file_as_its_model(
    api: ApiClient, runtime: Runtime, tmp_path: Path
) -> None:
    (tmp_path / "real.json").write_text(SCRIPT)
    task = {"task": "answer", "model": f"scripted:{tmp_path / 'real.json'}"}
    call = ScriptedToolCall("delegate", {"tasks": [task]}, id="call_delegate")
    runtime.models.register(
        "boss", ScriptedModel([ScriptedTurn(tool_calls=[call]), ScriptedTurn(text="done")])
    )
    started = await api.start("split it", model="boss")
    events = await api.segment(started["requestId"])
    kinds = [e["eventType"] for e in events]
    assert "SUBAGENT_RUN_STARTED" not in kinds and kinds[-1] == "MESSAGE_COMPLETED", kinds
    [failed] = [e["data"] for e in events if e["eventType"] == "TOOL_FAILED"]
    assert "unknown model" in failed["errorMessage"], failed
    assert "scripted answer" not in str(events)
    runs = (await api.http.get("neta/api/agent/runs")).json()["runs"]
    assert [r["requestId"] for r in runs] == [started["requestId"]], "no child was started"


def test_with_a_scripts_folder_only_its_regular_files_are_read(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "ok.json").write_text(SCRIPT)
    (tmp_path / "outside.json").write_text(SCRIPT)
    (scripts / "link.json").symlink_to(tmp_path / "outside.json")
    os.mkfifo(scripts / "pipe.json")
    registry = ModelRegistry(scripts=scripts)
    assert isinstance(registry.resolve("scripted:ok.json"), ScriptedModel)
    assert isinstance(registry.resolve(f"scripted:{scripts / 'ok.json'}"), ScriptedModel)
    for name in (
        "../outside.json",
        str(tmp_path / "outside.json"),
        "link.json",
        "pipe.json",  # opened without waiting for a writer, then refused
        "/etc/hostname",
        "",
    ):
        with pytest.raises(UnknownModel):
            registry.resolve(f"scripted:{name}")
    with pytest.raises(UnknownModel):
        ModelRegistry().resolve(f"scripted:{scripts / 'ok.json'}")
