"""Where runs of this kernel live: on the Jupyter server that started it, or embedded here.

A server running the extension puts ``NETA_SERVER_URL``, ``NETA_KERNEL_TOKEN`` and
``NETA_SERVER_PID`` into the environment its kernels inherit. Without them (an older server, or
one whose kernels get a clean environment) the kernel looks for the server whose pid is its
``JPY_PARENT_PID`` among the running servers and uses that server's own token.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import httpx

_CONNECTION_FILE = re.compile(r"kernel-(?P<id>[0-9A-Za-z-]+)\.json$")
_PROBE_TIMEOUT = 3.0


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """How to reach a Jupyter server that runs the extension."""

    url: str
    """Base URL including the server's base_url; always ends with ``/``."""
    headers: dict[str, str]
    """The authorization header to send."""
    source: str
    """``environment`` or ``discovery``: how the server was found."""


def kernel_id() -> str | None:
    """The id of the kernel we run in, from its connection file name (``kernel-<id>.json``)."""
    try:
        from ipykernel.connect import get_connection_file

        name = Path(get_connection_file()).name
    except Exception:  # not in a kernel, or no connection file
        return None
    match = _CONNECTION_FILE.search(name)
    return match["id"] if match else None


def find_server(environ: dict[str, str] | None = None) -> ServerInfo | None:
    """The server this kernel belongs to, or None (then runs are embedded)."""
    env = dict(os.environ if environ is None else environ)
    url, token = env.get("NETA_SERVER_URL"), env.get("NETA_KERNEL_TOKEN")
    parent = env.get("JPY_PARENT_PID")
    server_pid = env.get("NETA_SERVER_PID")
    if url and token and (server_pid is None or parent is None or parent == server_pid):
        return ServerInfo(_slash(url), {"Authorization": f"neta-kernel {token}"}, "environment")
    if parent:
        return _discover(int(parent)) if parent.isdigit() else None
    return None


def _discover(parent_pid: int) -> ServerInfo | None:
    try:
        from ..server.installation import running_servers

        servers = [s for s in running_servers() if s.get("pid") == parent_pid]
    except Exception:
        return None
    for server in servers:
        token = server.get("token") or ""
        info = ServerInfo(
            _slash(str(server.get("url", ""))),
            {"Authorization": f"token {token}"} if token else {},
            "discovery",
        )
        if info.url and runs_extension(info):
            return info
    return None


def runs_extension(info: ServerInfo) -> bool:
    """Whether the server answers the run API (the extension may not be enabled there)."""
    try:
        response = httpx.get(
            f"{info.url}neta/api/models",
            headers=info.headers,
            timeout=_PROBE_TIMEOUT,
            trust_env=False,
        )
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def _slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"
