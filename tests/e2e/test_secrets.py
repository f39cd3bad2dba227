"""A planted API key and token never reach an event, a log line or an error body."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from httpx_sse import connect_sse

from neta_jupyter.events import EventType, ProcessData
from neta_jupyter.events.redact import RedactingFilter, Redactor, StreamRedactor
from neta_jupyter.runtime.activation.process import ProcessLog
from neta_jupyter.runtime.log.emitter import RunEmitter
from neta_jupyter.store import Store
from tests.provider_server import ProviderServer, Reply, serve
from tests.server_process import ServerProcess

KEY = "sk-PLANTEDplantedPLANTED0123456789"
TOKEN = "tok-SECRETsecretSECRET98765"


def test_stream_redactor_catches_secrets_split_across_fragments() -> None:
    redactor = Redactor([KEY, TOKEN])
    text = f'{{"path": "{KEY}", "note": "{TOKEN[:6]} is not a secret", "t": "{TOKEN}"}}'
    for size in range(1, 12):
        stream = StreamRedactor(redactor)
        out = "".join(stream.feed(text[i : i + size]) for i in range(0, len(text), size))
        out += stream.flush()
        assert out == redactor(text)
        assert KEY not in out and TOKEN not in out and f"{TOKEN[:6]} is not" in out


def test_stream_redactor_holds_back_after_fragments_no_secret_starts_in() -> None:
    # Fragments without a secret's first character pass straight through; the one that starts a
    # secret must still be held back until the rest of it arrives.
    redactor = Redactor([KEY])
    text = "0123 " * 4 + KEY + " 9876 " + KEY[:5]
    for size in (1, 3, 5, 7):
        stream = StreamRedactor(redactor)
        parts = [stream.feed(text[i : i + size]) for i in range(0, len(text), size)]
        out = "".join(parts) + stream.flush()
        assert out == redactor(text)
        assert all(KEY not in part for part in parts)


async def test_a_delta_whose_json_escapes_form_a_secret_is_redacted(tmp_path: Path) -> None:
    # Escaping can make a secret appear in the envelope that the raw text never held ("\n" +
    # "ABC…" is written as "\\nABC…"): such deltas are searched again as a whole.
    secret = "nESCAPEDsecret0123"
    store = Store(tmp_path / "log.sqlite3")
    store.events.redactor = Redactor([secret])
    await store.events.open("r_escapes")
    emitter = RunEmitter(store.events, "r_escapes")
    emitter.emit_text(EventType.TEXT_DELTA, "line\n" + secret[1:])
    emitter.emit_text(EventType.TEXT_DELTA, "plain " + secret[1:])
    await emitter.flush()
    stored = [event.payload for event in await store.events.read_after("r_escapes", -1)]
    store.close()
    assert len(stored) == 2
    assert all(secret not in payload for payload in stored)
    assert json.loads(stored[1])["data"]["text"] == "plain " + secret[1:]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    os.environ["OPENAI_API_KEY"] = KEY
    os.environ["SERVICE_TOKEN"] = TOKEN
    try:
        proc = ServerProcess(tmp_path)
        proc.start()
    finally:
        os.environ.pop("OPENAI_API_KEY", None)
        os.environ.pop("SERVICE_TOKEN", None)
    yield proc
    proc.stop()


def events_of(server: ServerProcess, rid: str) -> list[str]:
    with (
        httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http,
        connect_sse(http, "GET", "neta/api/agent/run/stream", params={"requestId": rid}) as src,
    ):
        return [sse.data for sse in src.iter_sse()]


def test_planted_secrets_are_absent_everywhere(server: ServerProcess, tmp_path: Path) -> None:
    (server.root / "creds.txt").write_text(f"api_key={KEY}\ntoken={TOKEN}\n")
    script = tmp_path / "leaky.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    # Tool arguments carrying the key (streamed in fragments), a tool output carrying both.
                    {
                        "toolCalls": [
                            {"name": "read_file", "arguments": {"path": "creds.txt", "note": KEY}}
                        ]
                    },
                    {
                        "toolCalls": [{"name": "read_file", "arguments": {"path": "creds.txt"}}],
                        "text": f"The key is {KEY} and the token {TOKEN}.",
                    },
                    # A provider error whose message echoes the key.
                    {"error": {"kind": "invalid", "message": f"401 invalid api key {KEY}"}},
                ]
            }
        )
    )
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http:
        rid = http.post(
            "neta/api/agent/run/async",
            json={"content": "read creds.txt", "model": f"scripted:{script}"},
        ).json()["requestId"]
        frames = events_of(server, rid)
        # An error body that would echo the secret back.
        bad = http.post("neta/api/agent/run/async", json={"content": "x", "model": f"{KEY}:model"})
        assert bad.status_code == 400
        status = http.get("neta/api/agent/run/status", params={"requestId": rid}).text
    stream = "\n".join(frames)
    assert "TOOL_COMPLETED" in stream and "MESSAGE_FAILED" in stream
    assert "[redacted]" in stream
    everything = [stream, bad.text, status, server.log_text()]
    for place in everything:
        assert KEY not in place and TOKEN not in place
    # Reassembling the streamed fragments must not reveal the key either.
    args = "".join(
        json.loads(f)["data"].get("arguments", "") for f in frames if '"TOOL_CALL_GENERATING"' in f
    )
    text = "".join(json.loads(f)["data"].get("text", "") for f in frames if '"TEXT_DELTA"' in f)
    assert KEY not in args and KEY not in text and "[redacted]" in args
    # The stored events (what every later replay sends) and the stored conversation are clean too.
    with sqlite3.connect(tmp_path / "neta-data" / "neta.sqlite3") as db:
        stored = "".join(row[0] for row in db.execute("SELECT payload FROM events"))
        stored += "".join(row[0] for row in db.execute("SELECT message FROM entries"))
    assert KEY not in stored and TOKEN not in stored


# --- every secret the configuration names, wherever it lands -----------------------------------

LOCAL_KEY = "lk-LOCALconfiguredKEY-4242424242"
"""The key of an endpoint whose ``api_key_env`` has no telling suffix (``LOCAL_KEY``)."""


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One chat.completion.chunk event, as an OpenAI-compatible server streams it."""
    body = {
        "id": "chatcmpl-echo",
        "object": "chat.completion.chunk",
        "model": "echo",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


def _pieces(text: str, size: int = 5) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _echo_stream(*, reasoning: str, text: str, call: tuple[str, str, str] | None) -> Reply:
    """A stand-in model that says ``reasoning`` and ``text`` (and calls a tool) in small pieces."""
    body = _chunk({"role": "assistant", "content": ""})
    body += b"".join(_chunk({"reasoning_content": p}) for p in _pieces(reasoning))
    body += b"".join(_chunk({"content": p}) for p in _pieces(text))
    if call is not None:
        call_id, name, arguments = call
        head = {"index": 0, "id": call_id, "type": "function"}
        body += _chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
        for piece in _pieces(arguments, 4):
            body += _chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    body += _chunk({}, "tool_calls" if call is not None else "stop")
    return Reply(body=body + b"data: [DONE]\n\n", chunk_size=7)


@pytest.fixture
def provider() -> Iterator[ProviderServer]:
    yield from serve()


@pytest.fixture
def keyed_server(tmp_path: Path, provider: ProviderServer) -> Iterator[ServerProcess]:
    endpoint = {"base_url": provider.url + "/v1", "api_key_env": "LOCAL_KEY"}
    os.environ["LOCAL_KEY"] = LOCAL_KEY
    try:
        proc = ServerProcess(tmp_path, {"endpoints": {"local": endpoint}})
        proc.start()
    finally:
        os.environ.pop("LOCAL_KEY", None)
    yield proc
    proc.stop()


async def _chat_over_websocket(server: ServerProcess, body: dict[str, Any]) -> tuple[str, str]:
    """Start a run over the WebSocket; (requestId, every frame received until it ended)."""
    url = server.url.replace("http://", "ws://") + "neta/ws"
    frames: list[str] = []
    async with websockets.connect(url, additional_headers=server.headers, max_size=None) as ws:
        await ws.send(json.dumps({"type": "chat", **body}))
        while True:
            frame = await asyncio.wait_for(ws.recv(), 30)
            assert isinstance(frame, str)
            frames.append(frame)
            decoded = json.loads(frame)
            if isinstance(decoded, dict) and decoded.get("type") == "started":
                rid = decoded["requestId"]
            batch = decoded if isinstance(decoded, list) else []
            if any(e.get("eventType", "").startswith("MESSAGE_") for e in batch):
                return rid, "\n".join(frames)


def _around(text: str, *secrets: str) -> list[str]:
    """Where in ``text`` each secret shows (for the assertion message)."""
    return [text[max(0, text.find(s) - 200) : text.find(s) + 40] for s in secrets if s in text]


def _store_bytes(data_dir: Path) -> bytes:
    """The SQLite file and its write-ahead log, byte for byte."""
    return b"".join(p.read_bytes() for p in sorted(data_dir.glob("neta.sqlite3*")))


def test_configured_key_and_jupyter_token_are_absent_everywhere(
    keyed_server: ServerProcess, provider: ProviderServer, tmp_path: Path
) -> None:
    server, token = keyed_server, keyed_server.token
    # A file the agent reads: both secrets, long enough for the output to become an attachment.
    filler = "\n".join(f"row {i}: nothing to see here" for i in range(900))
    creds = f"LOCAL_KEY={LOCAL_KEY}\nJUPYTER_TOKEN={token}\n{filler}\nagain {LOCAL_KEY} {token}\n"
    (server.root / "creds.txt").write_text(creds)
    echo = f"the key is {LOCAL_KEY} and the token is {token}"
    # The path names the key too (no such file: the second call reads the real one).
    arguments = json.dumps({"path": f"creds.txt#{LOCAL_KEY}/{token}"})
    provider.reply(
        _echo_stream(reasoning=echo, text=echo, call=("call_1", "read_file", arguments)),
        _echo_stream(
            reasoning="again",
            text="",
            call=("call_2", "read_file", '{"path": "creds.txt", "max_bytes": 60000}'),
        ),
        _echo_stream(reasoning="done", text=f"Read it: {echo}.", call=None),
    )
    rid, websocket = asyncio.run(
        _chat_over_websocket(
            server, {"content": f"read creds.txt ({LOCAL_KEY})", "model": "local:echo"}
        )
    )
    # The stand-in model really was called with this key.
    assert provider.requests[0].headers["authorization"] == f"Bearer {LOCAL_KEY}"
    frames = events_of(server, rid)
    envelopes = [json.loads(f) for f in frames]
    assert envelopes[-1]["eventType"] == "MESSAGE_COMPLETED"
    stream = "\n".join(frames)
    assert "[redacted]" in stream
    # Reassembled fragments: the answer, the reasoning and the tool arguments.
    joined = {
        kind: "".join(str(e["data"].get(field, "")) for e in envelopes if e["eventType"] == kind)
        for kind, field in (
            ("TEXT_DELTA", "text"),
            ("REASONING_DELTA", "text"),
            ("TOOL_CALL_GENERATING", "arguments"),
        )
    }
    assert all("[redacted]" in text for text in joined.values()), joined
    attachments = [
        e["data"]["virtualPath"] for e in envelopes if e["eventType"] == "ATTACHMENT_CHANGED"
    ]
    assert attachments, "the long tool output became an attachment"
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http:
        downloads = [
            http.get("neta/api/agent/attachment/download", params={"virtualPath": path})
            for path in attachments
        ]
        assert all(d.status_code == 200 for d in downloads)
        assert "row 899" in downloads[0].text
        session_id = http.get("neta/api/agent/run/status", params={"requestId": rid}).json()[
            "sessionId"
        ]
        answers = [
            http.get(path, params=params).text
            for path, params in (
                ("neta/api/agent/run/status", {"requestId": rid}),
                ("neta/api/agent/runs", {}),
                ("neta/api/agent/runs", {"sessionId": session_id}),
                ("neta/api/sessions", {}),
                ("neta/api/sessions/tree", {"sessionId": session_id}),
            )
        ]
        # An error answer (and its log line) that would echo both back.
        bad = http.post(
            "neta/api/agent/run/async", json={"content": "x", "model": f"{LOCAL_KEY}:{token}"}
        )
        assert bad.status_code == 400
        answers.append(bad.text)
    assert "[redacted]" in answers[4], "the session tree holds the conversation, redacted"
    places = {
        "websocket": websocket,
        "sse": stream,
        **{f"rest {i}": a for i, a in enumerate(answers)},
        **{f"attachment {i}": d.text for i, d in enumerate(downloads)},
        **{str(p): p.read_text(errors="replace") for p in server.workdir.rglob("*.jsonl")},
    }
    for name, text in places.items():
        assert LOCAL_KEY not in text and token not in text, (name, _around(text, LOCAL_KEY, token))
    store = _store_bytes(tmp_path / "neta-data")
    assert LOCAL_KEY.encode() not in store and token.encode() not in store
    for path in (tmp_path / "neta-data").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert LOCAL_KEY.encode() not in data and token.encode() not in data, path
    server.stop()
    log = server.log_text()
    assert LOCAL_KEY not in log and token not in log


def test_redactor_cuts_secrets_from_json_values_and_file_bytes() -> None:
    redactor = Redactor([LOCAL_KEY])
    # A secret right after a character JSON escapes is still found (searched before encoding).
    value = {"text": f"line\n{LOCAL_KEY}", LOCAL_KEY: [f'"{LOCAL_KEY}"', 3, None]}
    assert redactor.value(value) == {
        "text": "line\n[redacted]",
        "[redacted]": ['"[redacted]"', 3, None],
    }
    data = f"k={LOCAL_KEY}\n".encode() + bytes(range(256))
    assert redactor.data(data) == b"k=[redacted]\n" + bytes(range(256))


def test_process_log_files_lose_known_secrets(tmp_path: Path) -> None:
    log = ProcessLog(tmp_path, Redactor([LOCAL_KEY]))
    event = ProcessData(
        operation_id="op",
        target_type="tool",
        source="tool",
        status="running",
        message=f"using {LOCAL_KEY}",
        payload={"note": LOCAL_KEY},
    )
    ref = log.append("s1", event)
    text = (tmp_path / ref).read_text()
    assert LOCAL_KEY not in text and log.read(ref)[0]["message"] == "using [redacted]"


@pytest.fixture
def neta_config(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The in-process server of this module knows an endpoint keyed by ``LOCAL_KEY``."""
    monkeypatch.setenv("LOCAL_KEY", LOCAL_KEY)
    return {
        "endpoints": {"local": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "LOCAL_KEY"}}
    }


def test_log_lines_lose_the_configured_key_and_the_token(jp_serverapp: Any) -> None:
    token = jp_serverapp.identity_provider.token
    assert token
    (log_filter,) = [f for f in jp_serverapp.log.filters if isinstance(f, RedactingFilter)]

    def logged(pathname: str) -> str:
        record = logging.LogRecord(
            "ServerApp", logging.WARNING, pathname, 1, "seen %s and %s", (LOCAL_KEY, token), None
        )
        log_filter.filter(record)
        return record.getMessage()

    assert logged("/site-packages/neta_jupyter/runtime/manager.py") == (
        "seen [redacted] and [redacted]"
    )
    # Jupyter's own login URL keeps the token for its owner; keys are cut there too.
    assert logged("/site-packages/jupyter_server/serverapp.py") == f"seen [redacted] and {token}"
