"""A model that does not stop: its reply is cut client-side, by tokens and by bytes.

The endpoint is the local stand-in speaking the OpenAI wire format over real HTTP; it ignores the
request's ``max_tokens`` and streams far more than that.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from neta_jupyter.providers import ModelRegistry
from neta_jupyter.runtime import Runtime, RuntimeConfig
from neta_jupyter.store import Store
from tests.provider_server import ProviderServer, Reply, guarded_client, openai_stream, serve

server = pytest.fixture(serve)
client = pytest.fixture(guarded_client)


async def _run(
    tmp_path: Path, server: ProviderServer, client: httpx.AsyncClient, **limits: int
) -> list[dict[str, Any]]:
    registry = ModelRegistry(
        environ={"LOCAL_KEY": "sk-local-0123456789"},
        http_client=client,
        endpoints={
            "local": {"base_url": f"{server.url}/v1", "api_key_env": "LOCAL_KEY", "models": ["m"]}
        },
    )
    store = Store(tmp_path / "db")
    config = RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path, retry_base_delay=0.0, **limits)
    runtime = Runtime(store, config, models=registry)
    try:
        run = await runtime.start("owner", "go on", model="local:m")
        await runtime.wait(run.request_id)
        rows = await store.events.read_after(run.request_id, -1)
        return [json.loads(e.payload) for e in rows]
    finally:
        store.close()


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")


async def test_a_reply_past_the_token_cap_is_stopped_with_a_clear_reason(
    tmp_path: Path, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    server.reply(Reply(body=openai_stream(text=["again "] * 20_000)))
    events = await _run(tmp_path, server, client, max_reply_tokens=1_000)
    assert server.requests[0].json["max_tokens"] < 20_000  # asked for less, and ignored it
    end = events[-1]
    assert end["eventType"] == "MESSAGE_COMPLETED"
    assert end["data"]["finishReason"] == "REPLY_TOO_LONG"
    stop = next(e["data"] for e in events if e["eventType"] == "STOP_REASON_DECIDED")
    assert stop["reason"] == "reply_too_long"
    shown = _text(events)
    assert shown.count("again ") <= 1_100  # read up to the cap, not the 20,000 sent
    notice = next(e["data"]["text"] for e in events if e["data"].get("synthetic"))
    assert "1,000 tokens (c.NetaApp.max_reply_tokens)" in notice


async def test_a_reply_past_the_byte_cap_is_stopped_and_its_tool_calls_not_run(
    tmp_path: Path, server: ProviderServer, client: httpx.AsyncClient
) -> None:
    huge = ["x" * 50_000] * 40  # 2 MB of arguments in 40 deltas
    stream = openai_stream(text=["writing"], calls=[("call_1", "python", ['{"code": "', *huge])])
    server.reply(Reply(body=stream))
    events = await _run(tmp_path, server, client, max_reply_bytes=200_000)
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert events[-1]["data"]["finishReason"] == "REPLY_TOO_LONG"
    assert not any(e["eventType"] == "TOOL_START" for e in events)
    generated = sum(
        len(e["data"].get("arguments") or "")
        for e in events
        if e["eventType"] == "TOOL_CALL_GENERATING"
    )
    assert generated < 300_000
    notice = next(e["data"]["text"] for e in events if e["data"].get("synthetic"))
    assert "200,000 bytes (c.NetaApp.max_reply_bytes)" in notice
    assert len(server.requests) == 1  # not asked again: the run ended
