"""The documented JupyterHub recipe run as written: each user's server with a Redis user of its own.

The recipe is read from ``docs/deployment.md`` (its ``pre_spawn_hook``) and called as JupyterHub would call
it before each spawn, on a real redis-server; the servers are real ``jupyter server`` processes
whose user is the one they were spawned for (:mod:`tests.hub_stand_in`). Each server must start,
see its own runs only, and its Redis user must neither read nor write anything of the other's;
no key is shared between them.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from redis.exceptions import NoPermissionError, ResponseError

from neta_jupyter.store import AttachmentRecord, Entry, RunRecord, SessionRecord, Store
from neta_jupyter.store.redis_conn import StoreMisconfigured, UserKeys, UserNotServed
from tests.redis_server import redis_server
from tests.server_process import ServerProcess

DEPLOYMENT = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
USERS = ("alice", "bob+lab")
"""A plain name, and one whose keys escape a character (``bob%2blab``)."""
SECRET = "hub-secret-for-the-test"


def hub_hook() -> str:
    """The ``jupyterhub_config.py`` code of the documented JupyterHub recipe."""
    text = DEPLOYMENT.read_text()
    section = text[text.index("### JupyterHub") :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, "the JupyterHub recipe has no hook"
    return found.group(1)


def spawn_environment(redis_url: str, name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """What the recipe's hook gives the server it runs before (as JupyterHub spawns it).

    Only where Redis is differs: the recipe's ``REDIS_URL`` names the hub's Redis over TLS,
    this one is on a unix socket.
    """
    monkeypatch.setenv("NETA_REDIS_ADMIN_URL", redis_url)
    monkeypatch.setenv("NETA_REDIS_SECRET", SECRET)
    config = SimpleNamespace(Spawner=SimpleNamespace())
    namespace: dict[str, Any] = {"c": config}
    exec(compile(hub_hook(), "jupyterhub_config.py", "exec"), namespace)
    namespace["REDIS_URL"] = redis_url.replace("unix://", "unix://{user}:{password}@")
    spawner = SimpleNamespace(user=SimpleNamespace(name=name), environment={})
    config.Spawner.pre_spawn_hook(spawner)
    environment: dict[str, str] = spawner.environment
    return environment


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path / "redis") as url:
        yield url


@pytest.fixture
def spawned(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    """Each user's server environment, made by the recipe's hook."""
    return {name: spawn_environment(redis_url, name, monkeypatch) for name in USERS}


def prefix(name: str) -> str:
    return UserKeys(name).prefix


def every_key(redis_url: str) -> list[str]:
    with redis.Redis.from_url(redis_url, decode_responses=True) as admin:
        return sorted(admin.scan_iter(count=1000))


def assert_locked_out(url: str, keys: list[str]) -> None:
    """The Redis user of ``url`` can neither read nor write any of ``keys``, nor list keys."""
    assert keys, "nothing to try"
    with redis.Redis.from_url(url, decode_responses=True) as other:
        for key in keys:
            for command in (
                ("EXISTS", key), ("GET", key), ("HGETALL", key), ("XRANGE", key, "-", "+"),
                ("ZRANGE", key, 0, -1), ("LRANGE", key, 0, -1), ("DEL", key), ("SET", key, "x"),
                ("HSET", key, "status", "failed"), ("XADD", key, "*", "p", "x"),
                ("EXPIRE", key, 1),
            ):  # fmt: skip
                with pytest.raises(NoPermissionError):
                    other.execute_command(*command)
            with pytest.raises(ResponseError, match=r"(?i)permission"):
                other.eval("return redis.call('GET', KEYS[1])", 1, key)
        for command in (
            ("KEYS", "*"), ("SCAN", 0), ("RANDOMKEY",), ("DBSIZE",), ("FLUSHALL",),
            ("FLUSHDB",), ("CLIENT", "LIST"), ("SCRIPT", "FLUSH"), ("FUNCTION", "FLUSH"),
            ("CONFIG", "SET", "appendonly", "no"),
        ):  # fmt: skip
            with pytest.raises(NoPermissionError):
                other.execute_command(*command)


def hub_server(tmp_path: Path, name: str, environment: dict[str, str]) -> ServerProcess:
    """A single-user server as the hub spawns it: its environment, its user."""
    workdir = tmp_path / f"server-{name}"
    workdir.mkdir()
    shutil.copy(Path(__file__).parents[1] / "hub_stand_in.py", workdir / "hub_stand_in.py")
    server = ServerProcess(
        workdir, args=["--ServerApp.identity_provider_class=hub_stand_in.HubUser"]
    )
    server.env = {**environment, "JUPYTERHUB_USER": name}
    return server


def finished_run(server: ServerProcess, prompt: str) -> str:
    with server.client() as http:
        response = http.post("neta/api/agent/run/async", json={"content": prompt})
        assert response.status_code == 200, response.text
        rid = str(response.json()["requestId"])
    log = server.read(rid)
    assert log[-1]["eventType"] == "MESSAGE_COMPLETED", log[-1]
    return rid


def crew(server: ServerProcess) -> str:
    definition = {
        "name": "one-task",
        "agents": [{"name": "writer", "role": "writes"}],
        "tasks": [{"id": "note", "agent": "writer", "description": "Write a note"}],
    }
    with server.client() as http:
        response = http.post("neta/api/crew/run", json={"definition": definition, "inputs": {}})
    assert response.status_code == 200, response.text
    return str(response.json()["requestId"])


def listed(server: ServerProcess) -> set[str]:
    with server.client() as http:
        response = http.get("neta/api/agent/runs")
    assert response.status_code == 200, response.text
    return {run["requestId"] for run in response.json()["runs"]}


def test_the_documented_recipe_gives_each_users_server_only_its_own_runs(
    tmp_path: Path, redis_url: str, spawned: dict[str, dict[str, str]]
) -> None:
    servers = {name: hub_server(tmp_path, name, spawned[name]) for name in USERS}
    try:
        for server in servers.values():
            server.start()  # start-up recovery reads its user's keys only
        runs = {
            name: finished_run(server, f"hello from {name}") for name, server in servers.items()
        }
        crews = {name: crew(server) for name, server in servers.items()}
        for name, server in servers.items():
            assert runs[name] in listed(server)
            other = runs[USERS[1] if name == USERS[0] else USERS[0]]
            assert other not in listed(server), "another user's run is listed"
            with server.client() as http:
                status = http.get("neta/api/agent/run/status", params={"requestId": other})
                assert status.status_code == 404, status.text
                crews_seen = {c["requestId"] for c in http.get("neta/api/crews").json()["crews"]}
            assert crews_seen == {crews[name]}
        alice = servers["alice"]
        alice.kill9()
        alice.start()  # recovery after a crash, with her crew and runs in Redis
        assert runs["alice"] in listed(alice)
        with alice.client() as http:
            assert http.get("neta/api/crews").json()["crews"][0]["requestId"] == crews["alice"]
    finally:
        for server in servers.values():
            server.stop()
    keys = every_key(redis_url)
    assert keys and all(key.startswith(tuple(map(prefix, USERS))) for key in keys), (
        "a key outside every user's own: " + repr([k for k in keys if "{u:" not in k])
    )
    for name in USERS:
        other = USERS[1] if name == USERS[0] else USERS[0]
        assert_locked_out(spawned[name]["NETA_STORE_URL"], [
            key for key in keys if key.startswith(prefix(other))
        ])  # fmt: skip


async def test_a_users_records_of_every_kind_stay_among_their_own_keys(
    redis_url: str, spawned: dict[str, dict[str, str]]
) -> None:
    """Runs, sessions, entries, inputs, attachments, edits and streams of no run (a crew's)."""
    stores = {
        name: Store(env["NETA_STORE_URL"], store_user=env["NETA_STORE_USER"])
        for name, env in spawned.items()
    }
    try:
        for name, store in stores.items():
            await store.start()
            await fill(store, name)
            assert await store.acquire(f"r_{name}")
        with redis.Redis.from_url(redis_url) as admin:  # as if both servers had died
            admin.delete(*(UserKeys(name).lease(f"r_{name}") for name in USERS))
        alice, bob = stores["alice"], stores["bob+lab"]
        assert await alice.backend.get_run("r_bob+lab") is None
        assert await alice.backend.get_session("s_bob+lab") is None
        assert await alice.backend.get_entry("e_bob+lab") is None
        assert await alice.backend.get_attachment("/bob+lab/a.txt") is None
        runs = await alice.backend.find_runs(
            principal=None, session_id=None, status=None, parent_request_id=None, limit=50
        )
        assert [run.request_id for run in runs] == ["r_alice"]
        assert await alice.leases.expired() == ["r_alice"], "her crashed run, not his"
        assert await bob.leases.expired() == ["r_bob+lab"]
        assert await bob.backend.get_entry("e_bob+lab") is not None
        with pytest.raises(UserNotServed):
            await alice.backend.insert_run(run_of("bob+lab", "r_2"))
    finally:
        for store in stores.values():
            store.close()
    keys = every_key(redis_url)
    assert all(key.startswith(tuple(map(prefix, USERS))) for key in keys), keys
    for kind in ("run:", "session:", "owners", "inputs", "attachments", "notebook-edits", "ev:"):
        for name in USERS:
            assert any(key.startswith(prefix(name) + kind) for key in keys), (name, kind)
    assert_locked_out(spawned["alice"]["NETA_STORE_URL"], [
        key for key in keys if key.startswith(prefix("bob+lab"))
    ])  # fmt: skip


def run_of(name: str, rid: str) -> RunRecord:
    return RunRecord(
        request_id=rid, principal=name, session_id=f"s_{name}", status="running",
        model="demo", created=1.0, prompt="p", state={},
    )  # fmt: skip


async def fill(store: Store, name: str) -> None:
    """One record of every kind for ``name``, and a stream no record claims."""
    from tests.store.contract import delta

    backend = store.backend
    session = SessionRecord(
        session_id=f"s_{name}", principal=name, name="main", created=1.0, leaf_entry_id=None
    )
    await backend.insert_session(session)
    await backend.insert_run(run_of(name, f"r_{name}"))
    await backend.update_run(f"r_{name}", "running", {}, with_events=False)
    entry = Entry(entry_id=f"e_{name}", session_id=f"s_{name}", parent_id=None, role="user",
                  message={"role": "user"}, request_id=f"r_{name}", created=1.0)  # fmt: skip
    await backend.insert_entries(f"s_{name}", [entry], move_leaf=True)
    await backend.insert_input(f"i_{name}", f"r_{name}", "more")
    await backend.put_attachment(
        AttachmentRecord(
            attachment_id=f"a_{name}",
            principal=name,
            session_id=f"s_{name}",
            request_id=f"r_{name}",
            virtual_path=f"/{name}/a.txt",
            file_name="a.txt",
            content_type="text/plain",
            file_size=1,
            disk_path="a.txt",
        )
    )
    await backend.put_notebook_edit(f"ed_{name}", f"r_{name}", {"id": f"ed_{name}"})
    for stream in (f"r_{name}", "crews:index"):
        await store.events.open(stream)
        store.events.append_nowait(delta(stream, "hello"))
    await store.events.flush()


async def test_a_server_limited_to_one_users_keys_but_not_told_whose_refuses_to_start(
    spawned: dict[str, dict[str, str]],
) -> None:
    store = Store(spawned["alice"]["NETA_STORE_URL"])
    try:
        with pytest.raises(StoreMisconfigured, match="store_user"):
            await store.start()
    finally:
        store.close()


@pytest.fixture(scope="module")
def lasting_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server that outlives the in-process server (which writes to it as it stops)."""
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture
def jp_server_config(tmp_path: Path, lasting_redis: str) -> dict[str, Any]:
    """An in-process server that keeps alice's runs only, reached by alice and by bob."""
    from tests.server.test_ownership import TwoUsers

    return {
        "ServerApp": {
            "jpserver_extensions": {"neta_jupyter": True},
            "identity_provider_class": TwoUsers,
        },
        "NetaApp": {
            "data_dir": str(tmp_path / "neta-data"),
            "demo_pace": 0.0,
            "store_url": lasting_redis,
            "store_user": "alice",
        },
    }


async def test_another_users_requests_to_a_server_of_one_user_are_refused_or_find_nothing(
    jp_serverapp: Any, server_url: str
) -> None:
    from tests.server.test_ownership import browser

    async with browser(server_url, "alice") as alice, browser(server_url, "bob") as bob:
        mine = (await alice.start("hello"))["requestId"]
        refused = await bob.post("async", {"content": "hello"})
        assert refused.status_code == 403, refused.text
        assert refused.json()["errCode"] == "USER_NOT_SERVED"
        assert "alice" in refused.json()["message"]
        listed = await bob.http.get("neta/api/agent/runs")
        assert listed.status_code == 200 and listed.json()["runs"] == []
        status = await bob.http.get("neta/api/agent/run/status", params={"requestId": mine})
        assert status.status_code == 404
        assert (await bob.http.get("neta/api/sessions")).json()["sessions"] == []
