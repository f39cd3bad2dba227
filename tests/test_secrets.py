"""A planted API key and token never reach an event, a log line or an error body."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse

from neta_jupyter.events import EventType
from neta_jupyter.events.redact import Redactor, StreamRedactor
from neta_jupyter.runtime.emitter import RunEmitter
from neta_jupyter.store import Store
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
    emitter = RunEmitter(store.events, "r_escapes")
    emitter.emit_text(EventType.TEXT_DELTA, "line\n" + secret[1:])
    emitter.emit_text(EventType.TEXT_DELTA, "plain " + secret[1:])
    await emitter.flush()
    stored = [event.payload for event in store.events.read_after("r_escapes", -1)]
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
    # The stored events (what every later replay sends) are clean too; the transcript the model
    # reads keeps the tool output as it was, which is where the user's own file put the key.
    with sqlite3.connect(tmp_path / "neta-data" / "neta.sqlite3") as db:
        stored = "".join(row[0] for row in db.execute("SELECT payload FROM events"))
    assert KEY not in stored and TOKEN not in stored
