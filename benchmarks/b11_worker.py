"""One client process of B11: starts its share of the runs, follows each over SSE, reports.

``python -m benchmarks.b11_worker BASE TOKEN MODEL COUNT``: prints ``started`` once its runs are
started and the server has answered each stream's request, then one JSON line: the delivery
latencies (ms, stamp to parse) of every delta, and how many runs ended. With ``MODEL`` =
``bare:<count>:<interval>`` it follows the bare server's ``/paced`` streams instead (B11's
baseline), which need no start.

Each follower is an ``asyncio.Protocol`` on its own socket that undoes the chunked framing and
cuts the SSE messages out of it, reading only the event's name and, for a delta, its stamp. It
is what a browser's ``EventSource`` does, in a few microseconds per event: httpx-sse spent
90 to 170 µs of CPU per event here, so with a thousand streams the clients, which share the
server's two cores, would have been the limit and not the server.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from urllib.parse import urlencode, urlsplit

import httpx

_STAMP = b'"text":"'
_ENDS = (b"event: MESSAGE_COMPLETED\n", b"event: MESSAGE_SUSPENDED\n", b"event: MESSAGE_FAILED\n")


class Follower(asyncio.Protocol):
    """Reads one SSE response: delivery latencies of the stamped deltas, until a terminal event."""

    def __init__(self, request: bytes, out: list[float]) -> None:
        self.request = request
        self.out = out
        loop = asyncio.get_running_loop()
        self.done: asyncio.Future[bool] = loop.create_future()
        self.answered: asyncio.Future[None] = loop.create_future()
        """The server has answered: its handler for the stream has run."""
        self.raw = b""
        self.text = b""
        self.opened = 0.0
        """When the response's head came: deltas stamped before (replayed) are not timed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = time.time()
        raw = self.raw + data
        if not self.opened:
            head, found, raw = raw.partition(b"\r\n\r\n")
            if not found:
                self.raw = head
                return
            if not head.startswith(b"HTTP/1.1 200"):
                self._end(False)
                return
            self.opened = now
            self.answered.set_result(None)
        self.raw = self._unchunk(raw)
        *messages, self.text = self.text.split(b"\n\n")
        for message in messages:
            at = message.find(_STAMP)
            if at >= 0 and b"event: TEXT_DELTA\n" in message:
                start = at + len(_STAMP)
                stamp = float(message[start : message.index(b" ", start)])
                if stamp >= self.opened:
                    self.out.append(round((now - stamp) * 1000, 2))
            elif message.startswith(_ENDS, kind := message.find(b"event: ")):
                self._end(message.startswith(_ENDS[0], kind))

    def _unchunk(self, raw: bytes) -> bytes:
        """Moves whole chunks of the chunked body into ``text``; returns the rest."""
        while (line := raw.find(b"\r\n")) >= 0:
            size = int(raw[:line], 16)
            end = line + 2 + size
            if len(raw) < end + 2:
                break
            self.text += raw[line + 2 : end]
            raw = raw[end + 2 :]
        return raw

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(False)

    def _end(self, completed: bool) -> None:
        if not self.answered.done():
            self.answered.set_result(None)
        if not self.done.done():
            self.done.set_result(completed)
            self.transport.close()


async def _start(client: httpx.AsyncClient, model: str, count: int) -> list[str]:
    """Starts ``count`` runs, a few requests at a time; their request ids."""
    gate = asyncio.Semaphore(8)

    async def one() -> str:
        async with gate:
            body = {"content": "go", "model": model}
            answer = await client.post("neta/api/agent/run/async", json=body)
            answer.raise_for_status()
            return str(answer.json()["requestId"])

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def main(base: str, token: str, model: str, count: int) -> None:
    where = urlsplit(base)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    if model.startswith("bare:"):
        _, n, interval = model.split(":")
        paths = [f"/paced?{urlencode({'n': n, 'interval': interval})}"] * count
    else:
        headers = {"Authorization": f"token {token}"}
        async with httpx.AsyncClient(
            base_url=base, headers=headers, timeout=120, trust_env=False
        ) as client:
            rids = await _start(client, model, count)
        stream = f"{where.path}neta/api/agent/run/stream"
        paths = [f"{stream}?{urlencode({'requestId': rid})}" for rid in rids]
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    followers = []
    for path in paths:
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: token {token}\r\n"
            "Accept: text/event-stream\r\n\r\n"
        ).encode()
        follower = Follower(request, latencies)
        await loop.create_connection(lambda f=follower: f, host, port)  # type: ignore[misc]
        followers.append(follower)
    # Started once the server has answered every stream: handling the requests is not streaming.
    await asyncio.gather(*(f.answered for f in followers))
    print("started", flush=True)
    done = await asyncio.gather(*(f.done for f in followers))
    print(json.dumps({"latencies": latencies, "completed": sum(done)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
