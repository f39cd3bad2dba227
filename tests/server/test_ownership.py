"""With an identity provider that knows several users, each user's runs are theirs alone:
from their browser and from the kernels they started."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from jupyter_client.session import Session
from jupyter_server.auth.identity import IdentityProvider, User
from tornado.web import RequestHandler

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from tests.helpers import ApiClient
from tests.kernel.test_embedded import KernelSession

pytestmark = pytest.mark.timeout(120)

TOKENS = {"alice": "alice-secret-token", "bob": "bob-secret-token"}


class TwoUsers(IdentityProvider):
    """Tokens of two users, as a multi-user deployment has (JupyterHub, a custom provider)."""

    def get_user(self, handler: RequestHandler) -> User | None:
        scheme, _, token = handler.request.headers.get("Authorization", "").partition(" ")
        names = {secret: name for name, secret in TOKENS.items()}
        name = names.get(token.strip()) if scheme.lower() == "token" else None
        if name is None:
            return None
        handler._token_authenticated = True  # type: ignore[attr-defined]  # no XSRF for tokens
        return User(username=name)


@pytest.fixture
def jp_server_config(tmp_path: Path) -> dict[str, Any]:
    return {
        "ServerApp": {
            "jpserver_extensions": {"neta_jupyter": True},
            "identity_provider_class": TwoUsers,
        },
        "NetaApp": {"data_dir": str(tmp_path / "neta-data"), "demo_pace": 0.0},
    }


@asynccontextmanager
async def browser(server_url: str, user: str) -> AsyncIterator[ApiClient]:
    headers = {"Authorization": f"token {TOKENS[user]}"}
    async with httpx.AsyncClient(
        base_url=server_url, headers=headers, timeout=30, trust_env=False
    ) as http:
        yield ApiClient(http)


@asynccontextmanager
async def users_kernel(jp_serverapp: Any, user: ApiClient) -> AsyncIterator[KernelSession]:
    """A kernel the user starts through Jupyter's kernels API, as JupyterLab does."""
    started = await user.http.post("api/kernels", json={"name": "python3"})
    assert started.status_code == 201, started.text
    kernel_id = started.json()["id"]
    manager = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    client = manager.client(
        session=Session(key=manager.session.key, signature_scheme=manager.session.signature_scheme)
    )
    client.start_channels()
    await client.wait_for_ready(timeout=60)

    class _Shutdown:
        async def shutdown_kernel(self, now: bool = True) -> None:
            await user.http.delete(f"api/kernels/{kernel_id}")

    session = KernelSession(_Shutdown(), client)
    try:
        await session.run("%load_ext neta_jupyter")
        yield session
    finally:
        await session.close()


WAIT = """
import json
from neta_jupyter.kernel import current_context as _cc
await _cc().last.wait(60)
print(json.dumps([_cc().last.host.mode, _cc().last.request_id, _cc().last.status]))
"""

SEES = """
import json
from neta_jupyter.kernel import current_context as _cc
from neta_jupyter.kernel.host import HostError
try:
    print(json.dumps(_cc().host.status({rid!r})["prompt"]))
except HostError as exc:
    print(json.dumps(exc.code))
"""


async def test_runs_belong_to_the_user_who_started_the_kernel(
    jp_serverapp: Any, server_url: str
) -> None:
    async with (
        browser(server_url, "alice") as alice,
        browser(server_url, "bob") as bob,
        users_kernel(jp_serverapp, alice) as alices_kernel,
        users_kernel(jp_serverapp, bob) as bobs_kernel,
    ):
        await alices_kernel.run("%neta --approve deny alice asks from her kernel")
        mode, from_kernel, status = await alices_kernel.json(WAIT, timeout=90)
        assert (mode, status) == ("server", "completed")
        from_browser = (await alice.start("alice asks from her browser"))["requestId"]
        bobs = (await bob.start("bob asks from his browser"))["requestId"]

        # Alice's browser sees the run her kernel started (it was the anonymous owner's before).
        assert (await alice.status(from_kernel))["prompt"] == "alice asks from her kernel"
        listed = (await alice.http.get("neta/api/agent/runs")).json()["runs"]
        assert {r["requestId"] for r in listed} == {from_kernel, from_browser}
        # Her kernel sees what her browser started; neither sees Bob's run.
        assert await alices_kernel.json(SEES.format(rid=from_browser)) == (
            "alice asks from her browser"
        )
        assert await alices_kernel.json(SEES.format(rid=bobs)) == "RUN_NOT_FOUND"

        # Bob, from his browser or his kernel, sees none of Alice's runs.
        for rid in (from_kernel, from_browser):
            missing = await bob.http.get("neta/api/agent/run/status", params={"requestId": rid})
            assert missing.status_code == 404 and missing.json()["errCode"] == "RUN_NOT_FOUND"
            assert await bobs_kernel.json(SEES.format(rid=rid)) == "RUN_NOT_FOUND"
        assert await bobs_kernel.json(SEES.format(rid=bobs)) == "bob asks from his browser"
        listed = (await bob.http.get("neta/api/agent/runs")).json()["runs"]
        assert [r["requestId"] for r in listed] == [bobs]


async def test_a_kernel_token_is_no_one_elses_and_is_redacted(
    jp_serverapp: Any, server_url: str
) -> None:
    async with browser(server_url, "alice") as alice, users_kernel(jp_serverapp, alice) as kernel:
        token = json.loads(
            await kernel.stdout(
                "import os, json; print(json.dumps(os.environ['NETA_KERNEL_TOKEN']))"
            )
        )
        assert token != jp_serverapp.web_app.settings["neta_kernel_token"], "a token of its own"
        redact = jp_serverapp.web_app.settings["neta_redactor"]
        assert token not in redact(f"the kernel's environment holds {token}")
    async with httpx.AsyncClient(base_url=server_url, trust_env=False) as anyone:
        forged = await anyone.post(
            "neta/api/agent/run/async",
            json={"content": "x"},
            headers={"Authorization": f"neta-kernel {token}x"},
        )
        assert forged.status_code == 403


async def test_another_user_cannot_follow_a_session(server_url: str) -> None:
    async with browser(server_url, "alice") as alice, browser(server_url, "bob") as bob:
        alices = await alice.start("alice's question", sessionName="shared name")
        await alice.segment(alices["requestId"])
        bobs = await bob.start("bob's question", sessionName="shared name")
        await bob.segment(bobs["requestId"])
        url = server_url.replace("http://", "ws://") + "neta/ws"
        headers = {"Authorization": f"token {TOKENS['bob']}"}
        async with websockets.connect(url, additional_headers=headers) as ws:
            for last in (None, 0):
                frame: dict[str, Any] = {
                    "type": "subscribe_session",
                    "sessionId": alices["sessionId"],
                }
                if last is not None:
                    frame["lastEventId"] = last
                await ws.send(json.dumps(frame))
                reply = json.loads(await ws.recv())
                assert reply["type"] == "error" and reply["errCode"] == "SESSION_NOT_FOUND", reply
            # The socket stays open, and follows what is Bob's.
            await ws.send(json.dumps({"type": "subscribe_session", "sessionId": bobs["sessionId"]}))
            assert json.loads(await ws.recv())["type"] == "subscribed_session"
            [first, *_] = json.loads(await ws.recv())
            assert first["requestId"] == bobs["sessionId"] and first["seq"] == 0
            assert first["data"]["preview"] == "bob's question"
        stream = await bob.http.get(
            "neta/api/agent/session/stream", params={"sessionId": alices["sessionId"]}
        )
        assert stream.status_code == 404 and stream.json()["errCode"] == "SESSION_NOT_FOUND"
        tree = await bob.http.get(
            "neta/api/sessions/tree", params={"sessionId": alices["sessionId"]}
        )
        assert tree.status_code == 404


async def test_attachments_are_their_owners_alone(
    jp_serverapp: Any, server_url: str, jp_root_dir: Path
) -> None:
    runtime = jp_serverapp.web_app.settings["neta_runtime"]
    (jp_root_dir / "result.csv").write_text("n\n1\n")
    send = ScriptedToolCall("send_file", {"path": "result.csv"})
    runtime.models.register(
        "sender", ScriptedModel([ScriptedTurn(tool_calls=[send]), ScriptedTurn(text="Sent.")])
    )
    upload = "neta/api/agent/attachment/upload"
    download = "neta/api/agent/attachment/download"
    async with browser(server_url, "alice") as alice, browser(server_url, "bob") as bob:
        mine = await alice.http.post(upload, files={"file": ("notes.txt", b"alice's notes")})
        assert mine.status_code == 200, mine.text
        rid = (await alice.start("send me the result", model="sender"))["requestId"]
        events = await alice.segment(rid)
        sent = next(e["data"] for e in events if e["eventType"] == "ATTACHMENT_SENT")
        for path in (mine.json()["virtualPath"], sent["virtualPath"]):
            assert (await alice.http.get(download, params={"virtualPath": path})).status_code == 200
            refused = await bob.http.get(download, params={"virtualPath": path})
            assert refused.status_code == 404
            assert refused.json()["errCode"] == "ATTACHMENT_NOT_FOUND"
        # Nor can Bob show Alice's upload to his model.
        borrowed = await bob.post(
            "async",
            {
                "content": "what is in it?",
                "attachments": [{"attachmentId": mine.json()["attachmentId"]}],
            },
        )
        assert borrowed.status_code == 404
        assert borrowed.json()["errCode"] == "ATTACHMENT_NOT_FOUND"
