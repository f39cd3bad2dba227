"""With several users, each user's crews are theirs alone: not listed, followed or steered by
another."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import websockets

from neta_jupyter.providers import ScriptedTurn
from tests.crew_helpers import agent, start, until
from tests.server.test_ownership import TOKENS, TwoUsers, browser

__all__ = ["TwoUsers"]


@pytest.fixture
def jp_server_config(tmp_path: Path) -> dict[str, Any]:
    return {
        "ServerApp": {
            "jpserver_extensions": {"neta_jupyter": True},
            "identity_provider_class": TwoUsers,
        },
        "NetaApp": {"data_dir": str(tmp_path / "neta-data"), "demo_pace": 0.0},
    }


async def test_another_users_crew_does_not_exist_for_them(
    jp_serverapp: Any, server_url: str
) -> None:
    runtime = jp_serverapp.web_app.settings["neta_runtime"]
    agent(runtime, "solo", ScriptedTurn(text="done"))
    definition = {
        "agents": [{"name": "solo", "model": "m-solo"}],
        "tasks": [{"id": "only", "agent": "solo", "description": "do it", "approval": "before"}],
    }
    async with browser(server_url, "alice") as alice, browser(server_url, "bob") as bob:
        rid = await start(alice, definition)
        await until(alice, rid, lambda s: s["status"] == "waiting")
        assert [
            c["requestId"] for c in (await alice.http.get("neta/api/crews")).json()["crews"]
        ] == [rid]
        assert (await bob.http.get("neta/api/crews")).json()["crews"] == []
        for path in ("status", "stream"):
            seen = await bob.http.get(f"neta/api/crew/{path}", params={"requestId": rid})
            assert seen.status_code == 404, path
        stop = await bob.http.post(
            "neta/api/crew/control", json={"requestId": rid, "action": "stop"}
        )
        assert stop.status_code == 404 and stop.json()["errCode"] == "CREW_NOT_FOUND"
        url = server_url.replace("http://", "ws://") + "neta/crew"
        headers = {"Authorization": f"token {TOKENS['bob']}"}
        async with websockets.connect(url, additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "subscribe", "requestId": rid}))
            reply = json.loads(await ws.recv())
            assert reply["type"] == "error" and reply["errCode"] == "CREW_NOT_FOUND"
        assert (await until(alice, rid, lambda s: True))["status"] == "waiting"
