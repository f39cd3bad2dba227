"""Fixtures: a real jupyter server with the extension (pytest-jupyter) and real HTTP clients."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient

pytest_plugins = ["pytest_jupyter.jupyter_server"]


def pytest_unconfigure(config: pytest.Config) -> None:
    """Let the test process exit: stop AnyIO worker threads whose event loop a test closed.

    AnyIO's worker threads are not daemons; their loop's root task stops them when it ends, but
    each test here has a loop of its own, and one closed before that callback ran leaves an idle
    worker that Python then waits for at exit for ever.
    """
    for thread in threading.enumerate():
        queue = getattr(thread, "queue", None)
        if thread.name == "AnyIO worker thread" and thread.is_alive() and queue is not None:
            try:
                queue.put_nowait(None)  # the worker's own shutdown command
            except Exception:  # a full or odd queue: nothing more to do for it
                continue


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests never reach the network: refuse proxies that could route loopback elsewhere."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(var, None)


@pytest.fixture
def neta_config() -> dict[str, Any]:
    """Extra ``NetaApp`` traits for one test (override in a test module)."""
    return {}


@pytest.fixture
def jp_server_config(tmp_path: Path, neta_config: dict[str, Any]) -> dict[str, Any]:
    return {
        "ServerApp": {"jpserver_extensions": {"neta_jupyter": True}},
        "NetaApp": {
            "data_dir": str(tmp_path / "neta-data"),
            "demo_pace": 0.0,
            "scripted_models_dir": str(tmp_path),  # the scripts a test writes
            **neta_config,
        },
    }


@pytest.fixture
def runtime(jp_serverapp: Any) -> Runtime:
    """The runtime inside the test server."""
    rt: Runtime = jp_serverapp.web_app.settings["neta_runtime"]
    return rt


@pytest.fixture
def server_url(http_server: Any, jp_http_port: int, jp_base_url: str) -> str:
    """Base URL of the listening test server."""
    return f"http://127.0.0.1:{jp_http_port}{jp_base_url}"


@pytest.fixture
def api(
    server_url: str, jp_auth_header: dict[str, str], jp_asyncio_loop: Any
) -> Iterator[ApiClient]:
    """An authenticated client of the run API (pytest-jupyter runs async tests, not fixtures)."""
    client = httpx.AsyncClient(
        base_url=server_url, headers=jp_auth_header, timeout=30, trust_env=False
    )
    yield ApiClient(client)
    jp_asyncio_loop.run_until_complete(client.aclose())


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium, for the browser tests (their modules import ``tests.browser_lab``)."""
    from benchmarks.b6_lab import chromium
    from tests.browser_lab import CHROMIUM

    assert CHROMIUM is not None
    with chromium(CHROMIUM) as found:
        yield found
