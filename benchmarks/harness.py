"""What every figure shares: result rows, the servers under test, and readings from ``/proc``."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
TERMINAL = frozenset({"MESSAGE_COMPLETED", "MESSAGE_SUSPENDED", "MESSAGE_FAILED"})
Frames = list[tuple[int, str, str]]
"""A run's stored events as (seq, eventType, envelope JSON)."""
EXPERIMENTS = {
    "gc-freeze": "gc.freeze() once the server is up: collections stop rescanning startup objects",
    "tool-schema-cache": "Tool.definition computed once per tool, not on every model call",
    "slow-callbacks": "log event-loop callbacks and turns over 30 ms (BENCH_SLOW_CALLBACK "
    "seconds) to the server log, with wall and CPU time (diagnostic)",
    "gc-pauses": "log garbage collections over a third of BENCH_SLOW_CALLBACK (10 ms) to the "
    "server log (diagnostic)",
    "commit-costs": "log every 5 s the store's group commits: how many, their events, their wall "
    "and CPU time (diagnostic)",
}
"""Changes outside the streaming path that ``--experiment`` applies to the server under test."""
BATCH = 2048
"""Events per flush in the bare baselines: the group commit's largest batch, which the real
handlers write and flush as one piece."""


# --- results ---------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the table: repeated samples of a figure and of its bare baseline."""

    figure: str
    unit: str
    samples: list[float]
    baseline: list[float] = field(default_factory=list)
    target: str = ""
    met: bool | None = None
    note: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    @property
    def baseline_median(self) -> float | None:
        return statistics.median(self.baseline) if self.baseline else None

    @property
    def ratio(self) -> float | None:
        m, b = self.median, self.baseline_median
        if m is None or not b:
            return None
        return m / b


@dataclass
class Settings:
    """How big and how often: ``--quick`` shrinks every size for a smoke run."""

    quick: bool = False
    repeats: int = 3
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="neta-bench-")))
    store: str = "sqlite"
    """Where the server under test keeps runs: ``sqlite`` (its data folder) or ``redis``."""
    runs: tuple[int, ...] = ()
    """B11's levels when given (``--runs``): fixed Ns to profile or compare, not the sweep."""
    py_spy: Path | None = None
    """B11 records the server with py-spy during each level's monitored window into this folder."""
    _redis: subprocess.Popen[bytes] | None = None

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    @property
    def redis_url(self) -> str | None:
        """The Redis the servers under test store runs in (started once), with ``redis``."""
        if self.store != "redis":
            return None
        sock = self.workdir / "redis" / "redis.sock"
        if self._redis is None:
            (self.workdir / "redis").mkdir(parents=True, exist_ok=True)
            self._redis = subprocess.Popen(
                ["redis-server", "--port", "0", "--unixsocket", str(sock), "--dir",
                 str(sock.parent), "--save", "", "--appendonly", "yes", "--appendfsync",
                 "always", "--maxmemory-policy", "noeviction"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            deadline = time.monotonic() + 30
            while not sock.exists():
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        return f"unix://{sock}"

    def close(self) -> None:
        """Stop the Redis, if one was started."""
        if self._redis is not None:
            self._redis.terminate()
            self._redis.wait(30)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1), nearest rank."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


# --- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process used so far, from ``/proc/<pid>/stat``."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETA_", "JPY_"))}
    # The checkout under test, not whatever copy of the package happens to be installed.
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        env.pop(var, None)
    return env


def _wait_ready(
    proc: subprocess.Popen[bytes], url: str, log: Path, headers: dict[str, str]
) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log.read_text(errors='replace')}")
        try:
            if httpx.get(url, headers=headers, timeout=2, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server did not start:\n{log.read_text(errors='replace')}")


class _Process:
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class NetaServer(_Process):
    """A real ``jupyter server`` with the extension, data in a fresh folder."""

    def __init__(self, workdir: Path, redis_url: str | None = None, **neta: Any) -> None:
        self.redis_url = redis_url
        if redis_url is not None:
            neta = {"store_url": redis_url, **neta}
        self.dir = workdir / f"neta-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir(parents=True)
        (self.dir / "root").mkdir()
        self.token = uuid.uuid4().hex
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/"
        self.headers = {"Authorization": f"token {self.token}"}
        traits = {
            "data_dir": str(self.dir / "data"),
            "demo_pace": 0.0,
            "max_active_runs_per_user": 0,  # capacity is what is measured: one user, many runs
            "scripted_models_dir": str(self.dir),  # where script() writes
            **neta,
        }
        args = [f"--NetaApp.{k}={v}" for k, v in traits.items()]
        log = self.dir / "server.log"
        env = _child_env()
        env["JUPYTER_RUNTIME_DIR"] = str(self.dir / "runtime")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                f"--port={self.port}",
                "--port-retries=0",
                "--ip=127.0.0.1",
                f"--IdentityProvider.token={self.token}",
                "--ServerApp.open_browser=False",
                f"--ServerApp.root_dir={self.dir / 'root'}",
                f"--config={REPO / 'benchmarks' / 'server_config.py'}",
                "--ServerApp.log_level=WARN",
                "--allow-root",
                *args,
            ],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.dir,
        )
        _wait_ready(self.proc, self.base + "api/status", log, self.headers)

    @property
    def db_path(self) -> Path:
        return self.dir / "data" / "neta.sqlite3"

    @property
    def ws_url(self) -> str:
        return self.base.replace("http://", "ws://") + "neta/ws"

    def script(self, deltas: int, token: str = "tok ", turns: int = 1) -> str:
        """A scripted model file of ``turns`` answers of ``deltas`` text deltas; its model spec."""
        path = self.dir / f"script-{uuid.uuid4().hex[:8]}.json"
        turn = {"repeat": [token, deltas]}
        path.write_text(json.dumps({"turns": [turn] * turns}))
        return f"scripted:{path}"

    async def start_run(self, client: httpx.AsyncClient, model: str, content: str = "go") -> str:
        response = await client.post(
            self.base + "neta/api/agent/run/async",
            json={"content": content, "model": model},
            headers=self.headers,
        )
        response.raise_for_status()
        request_id: str = response.json()["requestId"]
        return request_id

    def stream_url(self) -> str:
        return self.base + "neta/api/agent/run/stream"

    def lag(self, action: str) -> dict[str, Any]:
        """Start or stop the in-server event-loop lag monitor (``stop`` returns its samples)."""
        return _lag(self.base + f"neta-bench/lag?action={action}", self.headers)

    def stored_frames(self, request_id: str) -> Frames:
        """The run's stored events as (seq, type, envelope JSON), read from its database."""
        if self.redis_url is not None:
            return redis_frames(self.redis_url, request_id)
        with closing_ro(self.db_path) as conn:
            return conn.execute(
                "SELECT e.key & 0xFFFFFFFF, e.event_type, e.payload FROM events e "
                "JOIN event_streams s ON e.key >> 32 = s.stream WHERE s.request_id = ? "
                "ORDER BY e.key",
                (request_id,),
            ).fetchall()


class BareServer(_Process):
    """The bare baseline: plain tornado sending pre-serialised frames (``bare_server.py``)."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / f"bare-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir(parents=True)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/"
        self.ws_url = f"ws://127.0.0.1:{self.port}/ws"
        log = self.dir / "server.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bare_server", str(self.port), str(self.dir)],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env=_child_env(),
            cwd=self.dir,
        )
        _wait_ready(self.proc, self.base + "ready", log, {})

    def load(self, name: str, frames: Frames) -> None:
        """Hand the server a set of frames; it pre-serialises them before answering."""
        path = self.dir / f"{name}.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for row in frames:
                out.write(json.dumps(row) + "\n")
        httpx.get(self.base + "load", params={"name": name}, timeout=120).raise_for_status()

    def lag(self, action: str) -> dict[str, Any]:
        return _lag(self.base + f"lag?action={action}", {})


def _lag(url: str, headers: dict[str, str]) -> dict[str, Any]:
    response = httpx.get(url, headers=headers, timeout=30, trust_env=False)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


@contextmanager
def closing_ro(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def redis_frames(url: str, request_id: str, page: int = 512) -> Frames:
    """A run's events as a Redis store keeps them, read by paged ``XRANGE``."""
    import redis

    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        [key] = client.scan_iter(f"neta:*:ev:{request_id}")
        out: Frames = []
        start = "-"
        while found := client.xrange(key, start, "+", count=page):
            out += [(int(eid.split("-")[1]) - 1, f["t"], f["p"]) for eid, f in found]
            start = "(" + found[-1][0]
        return out
    finally:
        client.close()


@contextmanager
def neta_server(settings: Settings, **neta: Any) -> Iterator[NetaServer]:
    server = NetaServer(settings.workdir, settings.redis_url, **neta)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def bare_server(settings: Settings) -> Iterator[BareServer]:
    server = BareServer(settings.workdir)
    try:
        yield server
    finally:
        server.stop()


def http_client(connections: int = 16) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=httpx.Timeout(120.0),
        trust_env=False,
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )
