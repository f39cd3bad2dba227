"""A real redis-server for the tests, on a private unix socket in a temporary directory.

Locally the Redis tests skip when Debian's ``redis-server`` is missing; under ``CI=true`` they
fail instead, so CI never passes without running them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
)
SAFE = ["--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"]


def need_redis() -> str:
    """The redis-server binary; skips (or, under CI, fails) without one."""
    if REDIS_SERVER is None:
        if os.environ.get("CI") == "true":
            raise RuntimeError("CI=true but redis-server is missing: install Debian's redis-server")
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    return REDIS_SERVER


class RedisProcess:
    """A redis-server in ``where`` on a unix socket, which a test may kill -9 and start again on
    the same append-only file."""

    def __init__(self, where: Path, *extra: str, settings: list[str] = SAFE) -> None:
        self.binary = need_redis()
        where.mkdir(parents=True, exist_ok=True)
        sock = where / "redis.sock"
        self.args = [self.binary, "--port", "0", "--unixsocket", str(sock), "--dir", str(where),
                     "--save", "", *settings, *extra]  # fmt: skip
        password = extra[extra.index("--requirepass") + 1] if "--requirepass" in extra else None
        self.url = f"unix://{':' + password + '@' if password else ''}{sock}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_ready(self.url, self.process)

    def kill9(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@contextmanager
def redis_server(where: Path, *extra: str, settings: list[str] = SAFE) -> Iterator[str]:
    """A redis-server in ``where`` on a unix socket; its URL. Stopped by its pid at the end."""
    server = RedisProcess(where, *extra, settings=settings)
    try:
        server.start()
        yield server.url
    finally:
        server.stop()


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    """Until the server answers PING (it may still be loading its append-only file)."""
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {process.returncode}")
        try:
            client = redis.Redis.from_url(url)
            try:
                if client.ping():
                    return
            finally:
                client.close()
        except (redis.ConnectionError, redis.BusyLoadingError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
