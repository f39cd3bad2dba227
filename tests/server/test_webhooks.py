"""Completion webhooks against local HTTP receivers, with a real server and SSE followers.

A receiver gets one signed call per terminal event it asked for, its body the event's envelope
as the stream carries it; a receiver that answers 500, or refuses connections, is called again
later, and the run never waits for it; a bad entry is named at start-up; secrets stay out of
events.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from tornado.httpserver import HTTPServer
from tornado.web import Application, RequestHandler

from neta_jupyter.providers import ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.server.webhooks import parse_webhooks, webhooks_of
from tests.helpers import ApiClient, script, stored, types

pytestmark = pytest.mark.timeout(120)

SECRET = "whsec-FIRSTfirstFIRST0123456789"
OTHER_SECRET = "whsec-SECONDsecondSECOND0123456789"
PATIENCE = 60.0


@dataclass
class Receiver:
    """A local HTTP endpoint that records each call; ``answers`` are its statuses, in turn."""

    sock: socket.socket
    answers: list[int] = field(default_factory=list)
    hold_first: asyncio.Event | None = None
    calls: list[tuple[dict[str, str], bytes, int]] = field(default_factory=list)
    server: HTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"

    def listen(self) -> None:
        """Accept connections from now on (until then they are refused)."""
        receiver = self

        class Hook(RequestHandler):
            async def post(self) -> None:
                first = not receiver.calls
                status = receiver.answers.pop(0) if receiver.answers else 200
                receiver.calls.append((dict(self.request.headers), self.request.body, status))
                if first and receiver.hold_first is not None:
                    await receiver.hold_first.wait()
                self.set_status(status)

        self.sock.listen(16)
        self.sock.setblocking(False)
        self.server = HTTPServer(Application([("/hook", Hook)]))
        self.server.add_sockets([self.sock])

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.sock.close()


def bound_socket() -> socket.socket:
    """A local port of our own that refuses connections until it listens."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture
def receivers() -> Iterator[dict[str, Receiver]]:
    made = {name: Receiver(bound_socket()) for name in ("all", "flaky", "refusing")}
    yield made
    for receiver in made.values():
        receiver.close()


@pytest.fixture
def neta_config(receivers: dict[str, Receiver]) -> dict[str, Any]:
    only_completed = ["MESSAGE_COMPLETED"]
    return {
        "webhooks": [
            {"url": receivers["all"].url, "secret": SECRET},
            {"url": receivers["flaky"].url, "events": only_completed},
            {"url": receivers["refusing"].url, "events": only_completed, "secret": OTHER_SECRET},
            {"url": "ftp://example.invalid/hook"},
        ],
        "webhook_retries": 40,
        "webhook_retry_delay": 0.05,
        "url_allowlist": ["127.0.0.1"],  # the local receivers (loopback is refused otherwise)
    }


def signed(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def until(condition: Any, why: str) -> None:
    loop = asyncio.get_running_loop()
    until_time = loop.time() + PATIENCE
    while not condition():
        assert loop.time() < until_time, f"never happened: {why}"
        await asyncio.sleep(0.05)


def asking(question: str) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedToolCall("clarify", {"question": question})])


async def suspended_on_question(api: ApiClient, prompt: str) -> tuple[str, list[dict[str, Any]]]:
    rid = (await api.start(prompt, model="scripted"))["requestId"]
    events = await api.segment(rid)
    assert events[-1]["data"]["suspendReason"]["type"] == "CLARIFY_REQUEST", types(events)
    return rid, events


async def test_each_terminal_event_reaches_the_receiver_once_signed(
    api: ApiClient,
    runtime: Runtime,
    receivers: dict[str, Receiver],
    caplog: pytest.LogCaptureFixture,
    jp_serverapp: Any,
) -> None:
    everything = receivers["all"]
    everything.listen()
    script(runtime, asking("Which column?"), ScriptedTurn(text="qty it is"), asking("Sure?"))
    answered, first = await suspended_on_question(api, f"look (my key is {SECRET})")
    ask = next(e for e in first if e["eventType"] == "CLARIFY_REQUEST")["data"]["clarifyId"]
    resumed = await api.resume(answered, askId=ask, answer="qty")
    assert resumed.status_code == 200, resumed.text
    done = await api.segment(answered, first[-1]["seq"])
    stopped, second = await suspended_on_question(api, "look again")
    assert (await api.post("terminateTask", {"requestId": stopped})).status_code == 200
    failed = await api.segment(stopped, second[-1]["seq"])
    endings = [first[-1], done[-1], second[-1], failed[-1]]
    assert [e["eventType"] for e in endings] == [
        "MESSAGE_SUSPENDED",
        "MESSAGE_COMPLETED",
        "MESSAGE_SUSPENDED",
        "MESSAGE_FAILED",
    ]

    await until(lambda: len(everything.calls) >= 4, "a call per terminal event")
    await asyncio.sleep(0.5)  # a second call of any of them would come in this while
    assert len(everything.calls) == 4
    got = {}
    for headers, body, status in everything.calls:
        assert status == 200
        assert headers["X-Neta-Signature-256"] == signed(SECRET, body)
        envelope = json.loads(body)
        assert headers["X-Neta-Event"] == envelope["eventType"]
        assert headers["X-Neta-Delivery"] == f"{envelope['requestId']}:{envelope['seq']}"
        got[(envelope["requestId"], envelope["seq"])] = envelope
    # Each body is the event as the stream carried it.
    assert got == {(e["requestId"], e["seq"]): e for e in endings}
    (app,) = jp_serverapp.extension_manager.extension_apps["neta_jupyter"]
    assert [h.url for h in app.notifier.hooks] == [r.url for r in receivers.values()]
    # The webhook's secret is redacted wherever it would show, like a model key.
    log = "".join(await stored(runtime, answered))
    assert SECRET not in log and "[redacted]" in log
    assert SECRET not in caplog.text


async def test_failing_receivers_are_called_again_and_the_run_never_waits_for_them(
    api: ApiClient, runtime: Runtime, receivers: dict[str, Receiver]
) -> None:
    flaky, refusing = receivers["flaky"], receivers["refusing"]
    flaky.answers = [500]
    flaky.hold_first = asyncio.Event()  # its first call hangs until the test has the ending
    flaky.listen()
    receivers["all"].listen()
    script(runtime, ScriptedTurn(text="done"))
    rid = (await api.start("hello", model="scripted"))["requestId"]
    events = await api.segment(rid)
    # The run ended, and its follower has the ending, while one receiver holds its first
    # call unanswered and the other refuses connections.
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert (await api.status(rid))["status"] == "completed"
    assert not refusing.calls
    await until(lambda: len(flaky.calls) == 1, "the flaky receiver's first call")
    flaky.hold_first.set()
    refusing.listen()

    await until(lambda: len(flaky.calls) == 2, "the flaky receiver called again")
    await until(lambda: len(refusing.calls) == 1, "the refusing receiver called once it listens")
    await asyncio.sleep(0.5)
    assert [status for _, _, status in flaky.calls] == [500, 200]
    assert len(refusing.calls) == 1
    (first_headers, first_body, _), (again_headers, again_body, _) = flaky.calls
    assert again_body == first_body and json.loads(again_body) == events[-1]
    assert again_headers["X-Neta-Delivery"] == first_headers["X-Neta-Delivery"]
    assert "X-Neta-Signature-256" not in again_headers  # that entry has no secret
    headers, body, _ = refusing.calls[0]
    assert headers["X-Neta-Signature-256"] == signed(OTHER_SECRET, body)


def test_bad_entries_are_named_with_what_is_wrong(caplog: pytest.LogCaptureFixture) -> None:
    entries = [
        {"url": "https://example.org/hook"},
        {"url": "file:///etc/passwd"},
        {"url": "https://example.org/x", "events": ["MESSAGE_DONE"]},
        {"url": "https://example.org/y", "secret": "s", "extra": 1},
        "https://example.org/z",
    ]
    hooks, problems = parse_webhooks(entries)
    assert [h.url for h in hooks] == ["https://example.org/hook"]
    assert hooks[0].events == ("MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED")
    assert len(problems) == 4
    assert problems[0].startswith("c.NetaApp.webhooks[1] is not used: url:")
    assert "http:// or https://" in problems[0]
    assert problems[1].startswith("c.NetaApp.webhooks[2] is not used: events.0:")
    assert "extra" in problems[2]
    assert problems[3].startswith("c.NetaApp.webhooks[4] is not used:")
    # As the server starts: each one logged as an error, the good ones used.
    with caplog.at_level(logging.ERROR):
        notifier = webhooks_of(entries, logging.getLogger("neta-test"), retries=1, retry_delay=1)
    assert [r.getMessage() for r in caplog.records] == [f"neta: {p}" for p in problems]
    assert notifier.hooks == hooks
