"""``neta-jupyter doctor`` checks the environment: each problem on its line with its fix, exit 1.

The CLI runs as a real process; endpoints are real HTTP servers on 127.0.0.1 (or a port nobody
listens on); a missing package is made absent in that process only
(``tests/fixtures/blocked_imports``); an MCP server is the SDK's, started by the doctor.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import cli
from tests.server.test_optional_parts import BLOCKER

pytestmark = pytest.mark.timeout(900)

KEY = "sk-doctor-" + os.urandom(6).hex()
MCP_SERVER = str(Path(__file__).parents[1] / "mcp" / "sdk_server.py")


@pytest.fixture
def model_server() -> Iterator[str]:
    """An OpenAI-style model list on 127.0.0.1 that accepts only ``KEY``; its base URL."""

    class Models(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            good = self.headers.get("Authorization") == f"Bearer {KEY}"
            body = json.dumps({"data": [{"id": "m"}]} if good else {"error": "bad key"}).encode()
            self.send_response(200 if good else 401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again on leaving: nobody listens there


def doctor(
    tmp_path: Path, config: dict[str, Any], env: dict[str, str] | None = None
) -> tuple[int, list[str]]:
    """The doctor's exit status and its lines, with ``config`` as the NetaApp section."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"NetaApp": config}))
    runtime = tmp_path / "runtime"  # no running servers but the test's own
    runtime.mkdir(exist_ok=True)
    env = {"JUPYTER_RUNTIME_DIR": str(runtime), **(env or {})}
    args = ("doctor", "--data-dir", str(tmp_path / "data"), "--config", str(path))
    done = cli(*args, env=env, timeout=600)  # only a hang: imports are slow on a loaded machine
    assert KEY not in done.stdout + done.stderr, "a key is named, never shown"
    return done.returncode, done.stdout.splitlines()


def line_of(lines: list[str], subject: str) -> str:
    (found,) = [line.strip() for line in lines if subject in line]
    return found


def blocked(*modules: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(BLOCKER), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, "BLOCKED_IMPORTS": ",".join(modules)}


def test_a_sound_environment_passes(tmp_path: Path, model_server: str) -> None:
    endpoints = {"local": {"base_url": model_server, "api_key_env": "DOCTOR_KEY"}}
    code, lines = doctor(tmp_path, {"endpoints": endpoints}, {"DOCTOR_KEY": KEY})
    assert code == 0, "\n".join(lines)
    assert line_of(lines, "extension:").startswith("ok")
    for part in ("jupyter_server:", "jupyterlab:", "ipywidgets:", "anywidget:"):
        assert line_of(lines, part).startswith("ok")
    said = line_of(lines, "endpoint local:")
    assert said.startswith("ok") and "key from DOCTOR_KEY" in said
    assert "No problems found." in lines


def test_a_missing_key_variable_is_named_with_its_fix(tmp_path: Path, model_server: str) -> None:
    endpoints = {"local": {"base_url": model_server, "api_key_env": "DOCTOR_KEY_UNSET"}}
    code, lines = doctor(tmp_path, {"endpoints": endpoints})
    assert code == 1
    said = line_of(lines, "endpoint local:")
    assert said.startswith("problem") and "DOCTOR_KEY_UNSET is not set" in said
    assert "fix: export DOCTOR_KEY_UNSET=" in said


def test_a_refused_key_is_reported(tmp_path: Path, model_server: str) -> None:
    endpoints = {"local": {"base_url": model_server, "api_key_env": "DOCTOR_KEY"}}
    code, lines = doctor(tmp_path, {"endpoints": endpoints}, {"DOCTOR_KEY": "wrong"})
    assert code == 1
    said = line_of(lines, "endpoint local:")
    assert "refuses the key in DOCTOR_KEY (HTTP 401)" in said and "fix: put a valid key" in said


def test_an_unreachable_endpoint_is_reported_with_its_fix(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    code, lines = doctor(tmp_path, {"endpoints": {"gone": {"base_url": url}}})
    assert code == 1
    said = line_of(lines, "endpoint gone:")
    assert said.startswith("problem") and f"{url} is unreachable" in said
    assert f"fix: start the model server at {url}" in said


def test_a_missing_collaboration_stack_is_reported_with_what_to_install(tmp_path: Path) -> None:
    code, lines = doctor(tmp_path, {}, blocked("pycrdt", "jupyter_server_ydoc"))
    assert code == 1
    said = line_of(lines, "collaboration:")
    assert said.startswith("problem") and "is not installed" in said
    assert "a view that has the notebook open shows their changes only after" in said
    assert said.endswith("fix: pip install jupyter-collaboration")


def test_redis_is_a_problem_only_when_the_store_needs_it(tmp_path: Path) -> None:
    code, lines = doctor(tmp_path, {}, blocked("redis"))
    assert code == 0, "\n".join(lines)
    assert line_of(lines, "redis:").startswith("note")
    code, lines = doctor(tmp_path, {"store_url": "redis://127.0.0.1:9/0"}, blocked("redis"))
    assert code == 1
    said = line_of(lines, "redis:")
    assert said.startswith("problem") and said.endswith("fix: pip install 'neta_jupyter[redis]'")


def test_a_disabled_extension_says_how_to_enable_it(tmp_path: Path) -> None:
    config_dir = tmp_path / "jupyter-config"
    config_dir.mkdir()
    off = {"ServerApp": {"jpserver_extensions": {"neta_jupyter": False}}}
    (config_dir / "jupyter_server_config.json").write_text(json.dumps(off))
    # The user's config folder comes first only when not told to prefer the environment's.
    nearest = {"JUPYTER_CONFIG_DIR": str(config_dir), "JUPYTER_PREFER_ENV_PATH": "0"}
    code, lines = doctor(tmp_path, {}, nearest)
    assert code == 1
    said = line_of(lines, "extension:")
    assert said.startswith("problem") and "not enabled" in said
    assert said.endswith("fix: jupyter server extension enable neta_jupyter")


def test_mcp_servers_are_started_and_a_broken_one_is_reported(tmp_path: Path) -> None:
    servers = {
        "notes": {"command": sys.executable, "args": [MCP_SERVER]},
        "broken": {"command": str(tmp_path / "no-such-program")},
    }
    code, lines = doctor(tmp_path, {"mcp_servers": servers})
    assert code == 1
    started = line_of(lines, "mcp server notes:")
    assert started.startswith("ok") and "tools" in started
    broken = line_of(lines, "mcp server broken:")
    assert broken.startswith("problem") and "does not start" in broken and "fix: check" in broken
