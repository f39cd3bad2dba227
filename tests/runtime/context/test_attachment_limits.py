"""Attachments against hostile input: odd names, address policy, quotas, compressed bombs.

A real jupyter server and real HTTP: uploads through the API, URLs served by local web servers.
"""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
import logging
import threading
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from neta_jupyter.runtime import Runtime
from neta_jupyter.runtime.context.attachments import download
from neta_jupyter.runtime.context.fetch import AddressPolicy, ImportFailed
from tests.helpers import ApiClient, types

pytestmark = pytest.mark.timeout(120)

BOMB = gzip.compress(b"\0" * 200_000_000, compresslevel=9)
"""About 200 KB that inflate to 200 MB."""
UPLOAD = "neta/api/agent/attachment/upload"
DOWNLOAD = "neta/api/agent/attachment/download"


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        ("..", "file"),
        (".", "file"),
        ("notes/..", "file"),
        ("r" * 300 + ".csv", "r" * 116 + ".csv"),
    ],
)
async def test_an_upload_with_a_hostile_name_is_stored_under_a_safe_one(
    api: ApiClient, name: str, stored: str
) -> None:
    for sent in (
        await api.http.post(UPLOAD, files={"file": (name, b"a,b\n1,2\n", "text/csv")}),
        await api.http.post(UPLOAD, params={"fileName": name}, content=b"a,b\n1,2\n"),
    ):
        assert sent.status_code == 200, sent.text
        uploaded: dict[str, Any] = sent.json()
        assert uploaded["fileName"] == stored
        got = await api.http.get(DOWNLOAD, params={"virtualPath": uploaded["virtualPath"]})
        assert got.status_code == 200 and got.content == b"a,b\n1,2\n"


class Pages(BaseHTTPRequestHandler):
    """A page, a redirect to the same server by its address, and a gzip bomb."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        if self.path == "/hop":
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{port}/page.csv")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = BOMB if self.path == "/bomb.csv" else b"secret,1\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/csv")
        if self.path == "/bomb.csv":
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def pages() -> Iterator[int]:
    """A web server on loopback; its port."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield int(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


async def _import_fails(api: ApiClient, url: str) -> str:
    rid = (await api.start("read it", model="demo", attachments=[{"url": url}]))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_FAILED", types(events)
    data: dict[str, Any] = events[-1]["data"]
    assert data["recoverable"] is False  # the same answer every time: no retry offered
    return str(data["errorMessage"])


async def test_an_attached_url_on_loopback_or_link_local_is_refused(
    api: ApiClient, pages: int
) -> None:
    loopback = await _import_fails(api, f"http://127.0.0.1:{pages}/page.csv")
    assert "127.0.0.1, a loopback address" in loopback and "url_allowlist" in loopback
    named = await _import_fails(api, f"http://localhost:{pages}/page.csv")
    assert "localhost resolves to" in named
    metadata = await _import_fails(api, "http://169.254.169.254/latest/meta-data/")
    assert "169.254.169.254, a link-local address" in metadata
    private = await _import_fails(api, "http://10.1.2.3/x.csv")
    assert "10.1.2.3, a private address" in private


async def test_a_redirect_out_of_the_allowlist_is_refused(
    api: ApiClient, runtime: Runtime, pages: int
) -> None:
    runtime.config.url_allowlist = ("localhost",)
    why = await _import_fails(api, f"http://localhost:{pages}/hop")
    assert "127.0.0.1, a loopback address" in why


async def test_an_allowlisted_address_is_fetched(
    api: ApiClient, runtime: Runtime, pages: int
) -> None:
    runtime.config.url_allowlist = ("127.0.0.0/8",)
    rid = (
        await api.start(
            "read it", model="demo", attachments=[{"url": f"http://localhost:{pages}/hop"}]
        )
    )["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    attached = next(e["data"] for e in events if e["eventType"] == "ATTACHMENT_CHANGED")
    assert attached["fileName"] == "hop" and attached["fileSize"] == len(b"secret,1\n")


def test_the_policy_refuses_the_servers_own_addresses() -> None:
    policy = AddressPolicy.from_allowlist([])
    assert policy.own  # at least the loopback interface
    for own in policy.own:
        why = policy.refusal("me.example", own)
        assert why is not None and str(own) in why
    public = ipaddress.ip_address("93.184.216.34")  # as if the server had a public interface
    mine = AddressPolicy(own=frozenset({public})).refusal("me.example", public)
    assert mine is not None and "one of this server's own addresses" in mine


async def test_a_gzip_bomb_is_refused_before_it_is_inflated(pages: int) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(ImportFailed) as refused:
            await download(
                f"http://127.0.0.1:{pages}/bomb.csv",
                limit=1_000_000,
                timeout=60,
                policy=AddressPolicy.from_allowlist(["127.0.0.1"]),
            )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "over the limit of 1,000,000 bytes" in str(refused.value)
    assert peak < 16_000_000  # of the 200 MB it inflates to


@pytest.fixture
def neta_config(pages: int) -> dict[str, Any]:
    """A webhook on loopback, which no allowlist names."""
    return {"webhooks": [{"url": f"http://127.0.0.1:{pages}/hook"}]}


async def test_a_webhook_on_loopback_is_not_called(
    api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    rid = (await api.start("hello", model="demo"))["requestId"]
    assert types(await api.segment(rid))[-1] == "MESSAGE_COMPLETED"
    for _ in range(300):
        if any("is not called" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.1)
    warned = [r.getMessage() for r in caplog.records if "is not called" in r.getMessage()]
    assert warned and "127.0.0.1, a loopback address" in warned[0]
