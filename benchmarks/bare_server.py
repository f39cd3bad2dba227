"""The bare baseline: a plain tornado app sending pre-serialised frames, nothing else.

``python -m benchmarks.bare_server PORT DIR``. ``GET /load?name=N`` reads ``DIR/N.jsonl`` (rows of
``[seq, eventType, envelope]``) and pre-serialises it as SSE text and as WebSocket array frames,
cut into batches of ``batch`` events. Then:

* ``GET /sse?name=N&batch=512`` writes the SSE batches, flushing after each (the real handler
  writes and flushes once per durable batch);
* ``WS /ws`` with ``{"type": "subscribe", "name": N}`` sends the array frames;
* ``GET /paced?n=&interval=`` (or ``{"type": "paced", "n", "interval"}`` on the WebSocket) sends
  one freshly stamped event every ``interval`` seconds, each written and flushed on its own;
* ``GET /relay?port=P`` POSTs to ``127.0.0.1:P`` and passes the reply's body on as it comes,
  flushing after each read: one process between a provider and its client, doing nothing else;
* ``GET /lag?action=start|stop`` drives the event-loop lag monitor.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tornado import web
from tornado.iostream import StreamClosedError
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from benchmarks.lag import MONITOR

_FRAMES: dict[str, list[tuple[int, str, str]]] = {}
_SSE: dict[tuple[str, int], list[bytes]] = {}
_WS: dict[tuple[str, int], list[str]] = {}


def _sse_batches(name: str, batch: int) -> list[bytes]:
    key = (name, batch)
    if key not in _SSE:
        rows = _FRAMES[name]
        frames = [f"id: {seq}\nevent: {kind}\ndata: {payload}\n\n" for seq, kind, payload in rows]
        _SSE[key] = ["".join(frames[i : i + batch]).encode() for i in range(0, len(frames), batch)]
    return _SSE[key]


def _ws_batches(name: str, batch: int) -> list[str]:
    key = (name, batch)
    if key not in _WS:
        payloads = [payload for _, _, payload in _FRAMES[name]]
        _WS[key] = [
            "[" + ",".join(payloads[i : i + batch]) + "]" for i in range(0, len(payloads), batch)
        ]
    return _WS[key]


class Ready(web.RequestHandler):
    def get(self) -> None:
        self.write({"ready": True})


class Load(web.RequestHandler):
    def get(self) -> None:
        name = self.get_query_argument("name")
        path = Path(self.settings["frames_dir"]) / f"{name}.jsonl"
        with path.open(encoding="utf-8") as rows:
            _FRAMES[name] = [tuple(json.loads(line)) for line in rows]  # type: ignore[misc]
        for batch in (1, 512):
            _sse_batches(name, batch)
            _ws_batches(name, batch)
        self.write({"frames": len(_FRAMES[name])})


class Sse(web.RequestHandler):
    async def get(self) -> None:
        name = self.get_query_argument("name")
        batches = _sse_batches(name, int(self.get_query_argument("batch", "512")))
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.request.connection.stream.set_nodelay(True)  # type: ignore[attr-defined]
        try:
            for chunk in batches:
                self.write(chunk)
                await self.flush()
        except StreamClosedError:
            return
        self.finish()


async def _paced(count: int, interval: float) -> AsyncIterator[tuple[int, str, str]]:
    """``count`` envelopes ``interval`` apart, each stamped with the time it was made."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    for seq in range(count):
        delay = start + seq * interval - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        kind = "MESSAGE_COMPLETED" if seq == count - 1 else "TEXT_DELTA"
        envelope = {
            "eventType": kind,
            "seq": seq,
            "requestId": "r_bare",
            "data": {"type": "text", "text": f"{time.time():.6f} "},
        }
        yield seq, kind, json.dumps(envelope, separators=(",", ":"))


class Paced(web.RequestHandler):
    async def get(self) -> None:
        count = int(self.get_query_argument("n"))
        interval = float(self.get_query_argument("interval", "0.001"))
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.request.connection.stream.set_nodelay(True)  # type: ignore[attr-defined]
        try:
            async for seq, kind, payload in _paced(count, interval):
                self.write(f"id: {seq}\nevent: {kind}\ndata: {payload}\n\n")
                await self.flush()
        except StreamClosedError:
            return
        self.finish()


class Relay(web.RequestHandler):
    async def get(self) -> None:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", int(self.get_query_argument("port"))
        )
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nContent-Length: 0\r\n\r\n"
        )
        await reader.readuntil(b"\r\n\r\n")  # the provider's headers: ours are our own
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.request.connection.stream.set_nodelay(True)  # type: ignore[attr-defined]
        try:
            while data := await reader.read(65536):
                self.write(data)
                await self.flush()
        except StreamClosedError:
            return
        finally:
            writer.close()
        self.finish()


class Socket(WebSocketHandler):
    def open(self, *args: Any, **kwargs: Any) -> None:
        self.set_nodelay(True)

    async def on_message(self, message: str | bytes) -> None:
        frame = json.loads(message)
        try:
            if frame["type"] == "paced":
                async for _, _, payload in _paced(int(frame["n"]), float(frame["interval"])):
                    await self.write_message("[" + payload + "]")
                return
        except WebSocketClosedError:
            return
        batches = _ws_batches(frame["name"], int(frame.get("batch", 512)))
        try:
            for batch in batches:
                await self.write_message(batch)
        except WebSocketClosedError:
            return


class Lag(web.RequestHandler):
    def get(self) -> None:
        self.write(MONITOR.act(self.get_query_argument("action")))


async def main(port: int, frames_dir: str) -> None:
    app = web.Application(
        [
            (r"/ready", Ready),
            (r"/load", Load),
            (r"/sse", Sse),
            (r"/paced", Paced),
            (r"/relay", Relay),
            (r"/ws", Socket),
            (r"/lag", Lag),
        ],
        frames_dir=frames_dir,
    )
    app.listen(port, address="127.0.0.1")
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
