"""Attachments in and out: uploads and URLs the model is shown, files the agent sends the user.

A real jupyter server, the SSE stream, an OpenAI-compatible endpoint served over real HTTP by
the provider stand-in (which records what the model was sent), and a local file server for
attached URLs.
"""

from __future__ import annotations

import base64
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.runtime.context.attachments import (
    MAX_INLINE_CHARS,
    Shown,
    entry_item,
    save_upload,
)
from neta_jupyter.store import Store
from tests.helpers import TERMINAL, ApiClient, types
from tests.provider_server import ProviderServer, Reply, openai_stream, serve

pytestmark = pytest.mark.timeout(120)

LIMIT = 4096
IMPORT_TIMEOUT = 5.0
SLOW = 30.0
CSV = b"city,temp\nOslo,3\nLima,19\n"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
UPLOAD = "neta/api/agent/attachment/upload"
DOWNLOAD = "neta/api/agent/attachment/download"
MODEL = "local:vision"
KEY = "sk-attachPLANTED0123456789abcdef"

provider = pytest.fixture(serve)


class Files(BaseHTTPRequestHandler):
    """A web server with one CSV, one file over the limit and nothing else."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path == "/slow.csv":
            time.sleep(SLOW)  # far past the server's import timeout
        bodies = {"/data/weather.csv": CSV, "/big.bin": b"x" * (LIMIT * 3)}
        body = bodies.get(self.path)
        self.send_response(404 if body is None else 200)
        self.send_header("Content-Type", "text/csv" if self.path.endswith(".csv") else "text/plain")
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def files() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Files)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def neta_config(provider: ProviderServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("LOCAL_KEY", KEY)
    endpoint = {
        "base_url": f"{provider.url}/v1",
        "api_key_env": "LOCAL_KEY",
        "models": ["vision"],
        "images": True,
    }
    return {
        "endpoints": {"local": endpoint},
        "max_attachment_bytes": LIMIT,
        "attachment_import_timeout": IMPORT_TIMEOUT,
        "url_allowlist": ["127.0.0.1"],  # the local file server (loopback is refused otherwise)
    }


def answer(provider: ProviderServer, text: str = "Noted.") -> None:
    provider.reply(Reply(body=openai_stream(text=[text])))


def user_message(provider: ProviderServer) -> dict[str, Any]:
    """The last user message of the model's last request."""
    messages = provider.requests[-1].json["messages"]
    found: dict[str, Any] = [m for m in messages if m["role"] == "user"][-1]
    return found


async def upload_form(api: ApiClient, name: str, content: bytes, kind: str) -> dict[str, Any]:
    response = await api.http.post(UPLOAD, files={"file": (name, content, kind)})
    assert response.status_code == 200, response.text
    return response.json()


async def run_to_end(api: ApiClient, content: str, **fields: Any) -> list[dict[str, Any]]:
    rid = (await api.start(content, model=MODEL, **fields))["requestId"]
    events = await api.segment(rid)
    assert sum(1 for name in types(events) if name in TERMINAL) == 1
    return events


async def test_an_uploaded_file_is_shown_to_the_model_with_the_prompt(
    api: ApiClient, provider: ProviderServer
) -> None:
    leaky = CSV + f"# key={KEY}\n".encode()
    uploaded = await upload_form(api, "weather.csv", leaky, "text/csv")
    assert uploaded["source"] == "USER_UPLOAD" and uploaded["fileName"] == "weather.csv"
    assert uploaded["contentType"] == "text/csv"
    answer(provider, "Lima is warmer.")
    events = await run_to_end(
        api, "Which city is warmer?", attachments=[{"attachmentId": uploaded["attachmentId"]}]
    )
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    # Clients list the files a prompt attached with the run's other files.
    listed = next(e["data"] for e in events if e["eventType"] == "ATTACHMENT_CHANGED")
    assert listed["attachmentId"] == uploaded["attachmentId"] and listed["source"] == "USER_UPLOAD"
    assert listed["sessionId"] == events[0]["data"]["sessionId"]
    content = user_message(provider)["content"]
    assert content.startswith("Which city is warmer?")
    assert "weather.csv" in content and "Lima,19" in content
    # The server's secrets are cut from attachments like from everything else.
    assert KEY not in provider.requests[-1].body.decode()
    got = await api.http.get(DOWNLOAD, params={"virtualPath": uploaded["virtualPath"]})
    assert (
        got.status_code == 200 and got.content.startswith(CSV) and KEY.encode() not in got.content
    )
    assert uploaded["fileSize"] == len(got.content)


async def test_an_uploaded_picture_reaches_an_image_model_as_an_image(
    api: ApiClient, provider: ProviderServer
) -> None:
    response = await api.http.post(
        UPLOAD, params={"fileName": "plot.png"}, content=PNG, headers={"Content-Type": "image/png"}
    )
    assert response.status_code == 200, response.text
    picture = response.json()
    assert picture["contentType"] == "image/png" and picture["fileExtension"] == "png"
    answer(provider, "A single pixel.")
    await run_to_end(
        api, "What is in the plot?", attachments=[{"attachmentId": picture["attachmentId"]}]
    )
    parts = user_message(provider)["content"]
    assert isinstance(parts, list)
    assert parts[0]["type"] == "text" and "What is in the plot?" in parts[0]["text"]
    image = next(p for p in parts if p["type"] == "image_url")
    prefix = "data:image/png;base64,"
    assert image["image_url"]["url"].startswith(prefix)
    assert base64.b64decode(image["image_url"]["url"].removeprefix(prefix)) == PNG


async def test_an_attached_url_is_imported_then_shown_to_the_model(
    api: ApiClient, provider: ProviderServer, files: str
) -> None:
    answer(provider, "Two cities.")
    url = f"{files}/data/weather.csv"
    events = await run_to_end(api, "How many cities?", attachments=[{"url": url}])
    names = types(events)
    status = next(e["data"] for e in events if e["eventType"] == "AGENT_STATUS")
    assert status["code"] == "IMPORTING_ATTACHMENTS" and status["attributes"] == {"count": 1}
    assert status["level"] == "INFO"
    imported = next(e["data"] for e in events if e["eventType"] == "ATTACHMENT_CHANGED")
    assert imported["fileName"] == "weather.csv" and imported["source"] == "USER_UPLOAD"
    assert (
        names.index("AGENT_STATUS") < names.index("ATTACHMENT_CHANGED") < names.index("TEXT_START")
    )
    assert names[-1] == "MESSAGE_COMPLETED"
    assert "Oslo,3" in user_message(provider)["content"]
    got = await api.http.get(DOWNLOAD, params={"virtualPath": imported["virtualPath"]})
    assert got.content == CSV


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("path", "why", "recoverable"),
    [
        ("/missing.csv", "HTTP 404", False),
        ("/big.bin", f"over the limit of {LIMIT:,} bytes", False),
        ("/slow.csv", f"no complete answer within {IMPORT_TIMEOUT:g} s", True),
        (None, "could not connect", True),
    ],
)
async def test_an_attached_url_that_cannot_be_imported_fails_the_run_saying_why(
    api: ApiClient,
    provider: ProviderServer,
    files: str,
    path: str | None,
    why: str,
    recoverable: bool,
) -> None:
    url = f"{files}{path}" if path else f"http://127.0.0.1:{closed_port()}/gone.csv"
    events = await run_to_end(api, "Summarise it", attachments=[{"url": url}])
    failed = events[-1]
    assert failed["eventType"] == "MESSAGE_FAILED"
    assert failed["data"]["errorCode"] == "ATTACHMENT_IMPORT_FAILED"
    assert url in failed["data"]["errorMessage"] and why in failed["data"]["errorMessage"]
    assert failed["data"]["recoverable"] is recoverable
    assert "IMPORTING_ATTACHMENTS" in [e["data"].get("code") for e in events]
    assert provider.requests == []  # the model was never asked


async def test_bad_attachments_are_refused_with_a_code(api: ApiClient) -> None:
    too_large = await api.http.post(UPLOAD, files={"file": ("big.bin", b"x" * (LIMIT + 1))})
    assert too_large.status_code == 413
    assert too_large.json()["errCode"] == "ATTACHMENT_TOO_LARGE"
    raw = await api.http.post(UPLOAD, params={"fileName": "big.bin"}, content=b"x" * (LIMIT * 40))
    assert raw.status_code == 413 and raw.json()["errCode"] == "ATTACHMENT_TOO_LARGE"
    unnamed = await api.http.post(UPLOAD, content=b"a,b\n")
    assert unnamed.status_code == 400 and unnamed.json()["errCode"] == "MISSING_FILE_NAME"
    unknown = await api.post(
        "async", {"content": "hi", "attachments": [{"attachmentId": "att_nope"}]}
    )
    assert unknown.status_code == 404 and unknown.json()["errCode"] == "ATTACHMENT_NOT_FOUND"
    both = await api.post(
        "async", {"content": "hi", "attachments": [{"attachmentId": "a", "url": "http://x/"}]}
    )
    assert both.status_code == 400 and "attachmentId or url" in both.json()["message"]
    ftp = await api.post("async", {"content": "hi", "attachments": [{"url": "ftp://host/f"}]})
    assert ftp.status_code == 400 and "http://" in ftp.json()["message"]


async def test_send_file_hands_the_user_a_file_and_sending_it_again_updates_it(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    (jp_root_dir / "report.txt").write_text("first draft\n")
    (jp_root_dir / "final").mkdir()
    (jp_root_dir / "final" / "report.txt").write_text("final version\n")
    runtime.models.register(
        "sender",
        ScriptedModel(
            [
                ScriptedTurn(tool_calls=[ScriptedToolCall("send_file", {"path": "report.txt"})]),
                ScriptedTurn(
                    tool_calls=[ScriptedToolCall("send_file", {"path": "final/report.txt"})]
                ),
                ScriptedTurn(tool_calls=[ScriptedToolCall("send_file", {"path": "../etc/passwd"})]),
                ScriptedTurn(text="Sent you the report."),
            ]
        ),
    )
    rid = (await api.start("send me the report", model="sender"))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    sent = [e["data"] for e in events if e["eventType"] == "ATTACHMENT_SENT"]
    assert [s["changeType"] for s in sent] == ["CREATED", "UPDATED"]
    first, second = sent
    assert first["attachmentId"] == second["attachmentId"]
    assert first["virtualPath"] == second["virtualPath"]
    session_id = events[0]["data"]["sessionId"]
    tree = await api.http.get("neta/api/sessions/tree", params={"sessionId": session_id})
    replies = [e for e in tree.json()["entries"] if e["role"] == "assistant"]
    sent_by = replies[1]["entryId"]  # the reply whose call sent it the second time
    assert second | {"attachmentId": None, "virtualPath": None} == {
        "type": "attachment",
        "attachmentId": None,
        "sessionId": session_id,
        "messageId": sent_by,
        "fileName": "report.txt",
        "fileExtension": "txt",
        "contentType": "text/plain",
        "fileSize": len("final version\n"),
        "virtualPath": None,
        "source": "AGENT_GENERATED",
        "changeType": "UPDATED",
    }
    refused = next(e["data"] for e in events if e["eventType"] == "TOOL_FAILED")
    assert "outside the notebook root" in refused["errorMessage"]
    got = await api.http.get(DOWNLOAD, params={"virtualPath": second["virtualPath"]})
    assert got.status_code == 200 and got.content == b"final version\n"
    assert "attachment" in got.headers["content-disposition"]


async def test_a_long_text_file_is_shown_by_its_beginning_and_end(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    lines = "".join(f"row {i}\n" for i in range(10_000))
    record = await save_upload(
        store.records,
        store.redactor,
        tmp_path,
        principal="owner",
        file_name="rows.txt",
        content=lines.encode(),
        content_type="text/plain",
    )
    text, images = await Shown(store.records, images=True).of([entry_item(record)])
    store.close()
    assert images == []
    assert "row 0\n" in text and "row 9999\n" in text and "row 5000\n" not in text
    assert f"it has {len(lines):,} characters in 10,001 lines" in text
    assert len(text) < MAX_INLINE_CHARS + 500


async def test_a_picture_is_named_to_a_model_that_cannot_see_images(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    record = await save_upload(
        store.records,
        store.redactor,
        tmp_path,
        principal="owner",
        file_name="plot.png",
        content=PNG,
        content_type="image/png",
    )
    blind = await Shown(store.records, images=False).of([entry_item(record)])
    seeing = await Shown(store.records, images=True).of([entry_item(record)])
    store.close()
    assert blind == (
        f"[Attached file plot.png (image/png, {len(PNG)} bytes)]\n"
        "(an image; this model cannot be shown images)",
        [],
    )
    assert seeing[1][0].data == PNG and "shown as an image" in seeing[0]
