"""Resume: random disconnects of a live 5,000-event run; reassembled streams equal the log."""

from __future__ import annotations

import json
import random
from typing import Any

import websockets

from neta_jupyter.providers import ScriptedModel, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, stored

EVENTS = 5_000
CUTS = 50


def long_run(runtime: Runtime) -> None:
    # The deltas plus the run's own events (session, budget, ledger, …) make a little over EVENTS.
    deltas = [f"t{i} " for i in range(EVENTS - 6)]
    runtime.models.register("long", ScriptedModel([ScriptedTurn(text=deltas, delay=0.0002)]))


def cut_points(seed: int) -> list[int]:
    rng = random.Random(seed)
    return sorted(rng.sample(range(1, EVENTS - 10), CUTS))


async def test_sse_resume_at_random_points_loses_and_repeats_nothing(
    api: ApiClient, runtime: Runtime
) -> None:
    long_run(runtime)
    rid = (await api.start("stream a lot", model="long"))["requestId"]
    received: list[dict[str, Any]] = []
    last: int | None = None
    for cut in [*cut_points(1), 2 * EVENTS]:
        frames = await api.frames(rid, last, limit=cut - len(received))
        for frame in frames:
            if frame.event == "HEARTBEAT":
                continue
            assert frame.id == str(frame.json["seq"])
            received.append(frame.json)
        last = received[-1]["seq"]
        if received[-1]["eventType"] == "MESSAGE_COMPLETED":
            break
    assert len(received) >= EVENTS
    assert [e["seq"] for e in received] == list(range(len(received)))
    assert [json.dumps(e, separators=(",", ":")) for e in received] == await stored(runtime, rid)


async def test_websocket_resume_at_random_points_loses_and_repeats_nothing(
    api: ApiClient, runtime: Runtime, server_url: str, jp_auth_header: dict[str, str]
) -> None:
    long_run(runtime)
    rid = (await api.start("stream a lot", model="long"))["requestId"]
    ws_url = server_url.replace("http://", "ws://") + "neta/ws"
    received: list[dict[str, Any]] = []
    for cut in [*cut_points(2), 2 * EVENTS]:
        async with websockets.connect(ws_url, additional_headers=jp_auth_header) as ws:
            subscribe: dict[str, Any] = {"type": "subscribe", "requestId": rid}
            if received:
                subscribe["lastEventId"] = received[-1]["seq"]
            await ws.send(json.dumps(subscribe))
            ack = json.loads(await ws.recv())
            assert ack["type"] == "subscribed"
            while len(received) < cut and not (
                received and received[-1]["eventType"] == "MESSAGE_COMPLETED"
            ):
                frame = json.loads(await ws.recv())
                assert isinstance(frame, list)
                # A batch may run past the cut; the client keeps what it got, as a real one does.
                received += [e for e in frame if e["eventType"] != "HEARTBEAT"]
        if received and received[-1]["eventType"] == "MESSAGE_COMPLETED":
            break
    assert len(received) >= EVENTS
    assert [e["seq"] for e in received] == list(range(len(received)))
    assert [json.dumps(e, separators=(",", ":")) for e in received] == await stored(runtime, rid)
