"""B9 bytes per client: what an 80,000-character answer costs each follower on the network.

One answer of 20,000 four-character deltas (varied text, not one token repeated), paced at
2,000 deltas per second so that each delta is a batch of its own, as at a real model's pace, is
followed by four clients at once, each through its own counting TCP proxy (so HTTP headers and
WebSocket framing count too):

* SSE accepting gzip (what httpx and browsers send) against SSE asking for ``identity``;
* the WebSocket offering permessage-deflate (as browsers do) against one offering none.

The plain clients, in the same run, are the baselines; the target is on the compressed ones.
The server compresses for every client that accepts it (``stream_compression = "always"``): by
default it does not for a client on its own machine, as the proxies here are.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid

from .clients import sse_count, ws_events
from .harness import NetaServer, Row, Settings, http_client, neta_server

CHARS, CHUNK, RATE = 80_000, 4, 2_000
TARGET_MB = 1.0
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "from",
    "at",
    "or",
    "an",
    "which",
    "notebook",
    "kernel",
    "cell",
    "output",
    "value",
    "array",
    "frame",
    "column",
    "index",
    "result",
    "function",
    "model",
    "data",
    "plot",
    "figure",
    "error",
    "file",
    "line",
    "return",
    "import",
    "print",
    "loop",
    "table",
    "query",
    "server",
]


class CountingProxy:
    """A TCP proxy to the server that counts the bytes it carries back to the client."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.down = 0
        self._server: asyncio.Server | None = None
        self._open: dict[asyncio.StreamWriter, asyncio.Future[tuple[object, object]]] = {}
        """The connections it carries (a client's kept-alive one outlives the stream), each
        with its two pipes."""

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, count: bool) -> None:
            while data := await src.read(65536):
                if count:
                    self.down += len(data)
                dst.write(data)
                await dst.drain()
            dst.close()

        pipes = asyncio.gather(
            pipe(reader, up_writer, False), pipe(up_reader, writer, True), return_exceptions=True
        )
        self._open[writer] = pipes
        try:
            await pipes
        finally:
            self._open.pop(writer, None)
            up_writer.close()

    async def stop(self) -> None:
        """Stop listening and end the connections still open (else they die with the loop)."""
        assert self._server is not None
        self._server.close()
        for writer, pipes in list(self._open.items()):
            writer.close()
            await asyncio.wait([pipes], timeout=5)


def _answer(server: NetaServer, chars: int) -> str:
    """A scripted, paced answer of varied words in ``CHUNK``-character deltas: its model spec."""
    rng = random.Random(9)
    text = ""
    while len(text) < chars:
        text += rng.choice(WORDS) + rng.choice((" ", " ", " ", ", ", ". ", "\n\n"))
    chunks = [text[i : i + CHUNK] for i in range(0, chars, CHUNK)]
    path = server.dir / f"b9-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps({"turns": [{"text": chunks, "delay": 1 / RATE}]}))
    return f"scripted:{path}"


async def _one(server: NetaServer, chars: int) -> dict[str, int]:
    """Wire bytes of each of the four clients following one paced answer."""
    names = ("sse-gzip", "sse-plain", "ws-deflate", "ws-plain")
    proxies = {name: CountingProxy(server.port) for name in names}
    ports = {name: await proxy.start() for name, proxy in proxies.items()}
    base = {name: f"http://127.0.0.1:{port}/" for name, port in ports.items()}
    async with http_client() as client:
        rid = await server.start_run(client, _answer(server, chars))
        subscribe = {"type": "subscribe", "requestId": rid}
        params = {"requestId": rid}
        stream = "neta/api/agent/run/stream"
        plain = {**server.headers, "Accept-Encoding": "identity"}
        ws = {n: base[n].replace("http://", "ws://") + "neta/ws" for n in names}
        await asyncio.gather(
            sse_count(client, base["sse-gzip"] + stream, params, server.headers),
            sse_count(client, base["sse-plain"] + stream, params, plain),
            ws_events(ws["ws-deflate"], subscribe, server.headers, compression="deflate"),
            ws_events(ws["ws-plain"], subscribe, server.headers),
        )
    for proxy in proxies.values():
        await proxy.stop()
    return {name: proxy.down for name, proxy in proxies.items()}


async def run(settings: Settings) -> list[Row]:
    chars = settings.size(CHARS, 8_000)
    found: list[dict[str, int]] = []
    with neta_server(settings, stream_compression="always") as server:
        for _ in range(settings.repeats):
            found.append(await _one(server, chars))
    mb = 1e6
    rows = []
    for label, zipped, plain in (
        ("SSE, gzip (baseline: the same stream plain)", "sse-gzip", "sse-plain"),
        ("WebSocket, permessage-deflate (baseline: plain)", "ws-deflate", "ws-plain"),
    ):
        row = Row(
            f"B9 bytes per client, {chars:,}-character answer in {CHUNK}-character deltas, {label}",
            "MB",
            [f[zipped] / mb for f in found],
            [f[plain] / mb for f in found],
            target=f"<= {TARGET_MB:g} MB",
        )
        row.met = (row.median or 0) <= TARGET_MB * chars / CHARS
        rows.append(row)
    return rows
