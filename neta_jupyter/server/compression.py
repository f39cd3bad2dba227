"""Compressed event streams: gzip for SSE and permessage-deflate for the WebSocket.

A long answer streams as thousands of small deltas whose envelopes repeat the same keys and ids,
so a compressor that keeps its window across the whole stream shrinks each one to a few bytes.
Both flush at every write the handlers flush (one durable batch), so nothing waits in a buffer:
latency is what it was without compression.
"""

from __future__ import annotations

import zlib
from typing import Any

from tornado import httputil
from tornado.web import OutputTransform

LEVEL = 1
"""zlib's fastest level: the stream repeats itself so much that higher levels gain little (a few
per cent of the bytes) and cost twice the CPU per event."""

WINDOW_BITS, MEM_LEVEL = 12, 4
"""A 4 KiB window and a small hash: 24 KiB per stream instead of zlib's default 256 KiB (a server
following a thousand runs holds a thousand compressors), for the same size within a per cent or
two: what an envelope repeats is in the few hundred bytes before it."""

WEBSOCKET_COMPRESSION: dict[str, Any] = {"compression_level": LEVEL, "mem_level": MEM_LEVEL}
"""What ``RunSocket.get_compression_options`` returns: permessage-deflate when the client offers
it (browsers do), with the window kept across messages unless the client asks otherwise (its
size is the client's to offer: tornado does not negotiate it)."""


POLICIES = ("auto", "always", "never")
"""``c.NetaApp.stream_compression``: "auto" compresses for every client but one on this machine
reached directly (a loopback peer with no proxy's ``Forwarded``/``X-Forwarded-For``), where
bytes cost nothing and compressing only costs CPU (B3's replay over SSE: 0.70 → 0.55 of the bare
server with gzip)."""
_LOOPBACK = ("127.", "::1", "::ffff:127.")


def worth_compressing(request: httputil.HTTPServerRequest, policy: str) -> bool:
    """Whether the policy compresses the streams of ``request``'s client."""
    if policy != "auto":
        return policy == "always"
    proxied = "Forwarded" in request.headers or "X-Forwarded-For" in request.headers
    return proxied or not (request.remote_ip or "").startswith(_LOOPBACK)


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` header admits gzip (``gzip;q=0`` refuses it)."""
    for item in accept_encoding.split(","):
        name, _, params = item.strip().partition(";")
        if name.strip().lower() not in ("gzip", "x-gzip", "*"):
            continue
        quality = params.strip().lower()
        if quality.startswith("q="):
            try:
                return float(quality[2:]) > 0
            except ValueError:
                return False
        return True
    return False


class StreamGzip(OutputTransform):
    """gzip for one event stream, flushed (``Z_SYNC_FLUSH``) at every flush of the handler.

    Unlike tornado's ``GZipContentEncoding`` it needs no buffer file between writes and honours
    ``q=0``; a response that already has a ``Content-Encoding`` is left as it is.
    """

    def __init__(self, request: httputil.HTTPServerRequest, policy: str = "always") -> None:
        self._on = worth_compressing(request, policy) and accepts_gzip(
            request.headers.get("Accept-Encoding", "")
        )
        self._zip: Any = None

    def transform_first_chunk(
        self, status_code: int, headers: httputil.HTTPHeaders, chunk: bytes, finishing: bool
    ) -> tuple[int, httputil.HTTPHeaders, bytes]:
        """Decide once, from the headers of the response."""
        vary = headers.get("Vary")
        headers["Vary"] = f"{vary}, Accept-Encoding" if vary else "Accept-Encoding"
        self._on = self._on and "Content-Encoding" not in headers and status_code == 200
        if self._on:
            headers["Content-Encoding"] = "gzip"
            headers.pop("Content-Length", None)
            self._zip = zlib.compressobj(LEVEL, zlib.DEFLATED, 16 + WINDOW_BITS, MEM_LEVEL)
        return status_code, headers, self.transform_chunk(chunk, finishing)

    def transform_chunk(self, chunk: bytes, finishing: bool) -> bytes:
        """Compress what the handler flushes; all of it leaves now."""
        if not self._on:
            return chunk
        flush = zlib.Z_FINISH if finishing else zlib.Z_SYNC_FLUSH
        out: bytes = self._zip.compress(chunk) + self._zip.flush(flush)
        return out
