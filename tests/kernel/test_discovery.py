"""How a kernel finds the Jupyter server that started it."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from neta_jupyter.kernel.discovery import ServerInfo, find_server, runs_extension


def test_the_environment_names_the_server() -> None:
    env = {
        "NETA_SERVER_URL": "http://127.0.0.1:8888/base",
        "NETA_KERNEL_TOKEN": "secret",
        "NETA_SERVER_PID": "42",
        "JPY_PARENT_PID": "42",
    }
    info = find_server(env)
    assert info == ServerInfo(
        "http://127.0.0.1:8888/base/", {"Authorization": "neta-kernel secret"}, "environment"
    )


def test_an_inherited_environment_of_another_process_is_not_trusted() -> None:
    # e.g. nbclient run from a terminal of the server: the kernel's parent is not the server.
    env = {
        "NETA_SERVER_URL": "http://127.0.0.1:8888/",
        "NETA_KERNEL_TOKEN": "secret",
        "NETA_SERVER_PID": "42",
        "JPY_PARENT_PID": "4242",
    }
    assert find_server(env) is None


def test_no_server_means_embedded() -> None:
    assert find_server({}) is None


async def test_fallback_finds_the_parent_server_among_the_running_ones(
    jp_serverapp: Any, server_url: str
) -> None:
    # The test server runs in this process; the probe must not block the loop it serves on.
    info = await asyncio.to_thread(find_server, {"JPY_PARENT_PID": str(os.getpid())})
    assert info is not None and info.source == "discovery"
    assert info.url.endswith(server_url.split(":", 2)[2])
    assert info.headers["Authorization"].startswith("token ")
    refused = ServerInfo(info.url, {"Authorization": "token wrong"}, "discovery")
    assert not await asyncio.to_thread(runs_extension, refused)
