"""Frames written straight to a follower's socket, from the commit that made them durable.

At a model's pace every token is a batch of its own, and each write through tornado's layers (the
handler's flush, the connection's chunking, the stream's futures) costs more than the event's
own encoding; a hundred followers pay that a hundred times per token. A caught-up follower whose
socket has taken everything sent before gets the batch's bytes with one ``send()``; tornado's
stream only sees what the socket did not take, so bytes keep their order and a client that stops
reading is served by the usual path, which waits for it.
"""

from __future__ import annotations

import struct

from tornado.iostream import IOStream
from tornado.web import OutputTransform

from ..events.encoding import sse_frames
from ..store import EventRow
from .following import until_terminal


class SocketWriter:
    """Bytes to one plain TCP connection, ahead of tornado's buffer only while it is empty."""

    __slots__ = ("stream",)

    def __init__(self, stream: IOStream) -> None:
        self.stream = stream

    @classmethod
    def of(cls, stream: object) -> SocketWriter | None:
        """A writer for ``stream`` when it is a plain socket stream (not TLS), else None."""
        return cls(stream) if type(stream) is IOStream else None

    def ready(self) -> bool:
        """Whether everything written before has reached the socket (the client keeps up)."""
        stream = self.stream
        return not stream.writing() and not stream.closed()

    def write(self, data: bytes) -> None:
        """Send ``data`` now; what the socket does not take waits in tornado's buffer."""
        stream = self.stream
        if not stream.writing():
            try:
                sent = stream.socket.send(data)
            except OSError:  # would block, or a fault tornado's own write meets and handles
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
        stream.write(data)  # its future reports a fault to itself; the follower's task sees it


class SsePush:
    """A follower's SSE frames written from the commit (:data:`~neta_jupyter.store.fanout.Push`).

    ``transforms`` are the response's output transforms (gzip), applied in order with the
    handler's own flushes; ``chunked``: the response uses HTTP/1.1 chunked framing.
    """

    __slots__ = ("chunked", "segment", "transforms", "writer")

    def __init__(
        self,
        writer: SocketWriter,
        transforms: list[OutputTransform],
        *,
        chunked: bool,
        segment: bool,
    ) -> None:
        self.writer = writer
        self.transforms = transforms
        self.chunked = chunked
        self.segment = segment

    def __call__(self, rows: list[EventRow]) -> bool:
        """Write ``rows`` if the client keeps up and they do not end the followed segment."""
        if not self.writer.ready() or (self.segment and until_terminal(rows)[1]):
            return False  # the handler's task sends them (and waits for the client, or ends)
        data = sse_frames(rows).encode()
        for transform in self.transforms:
            data = transform.transform_chunk(data, False)
        if self.chunked:
            if not data:
                return True
            data = b"%x\r\n%b\r\n" % (len(data), data)
        self.writer.write(data)
        return True


def websocket_frame(payload: bytes, *, compressed: bool) -> bytes:
    """One final text frame from the server (unmasked), RFC 6455 §5.2."""
    first = 0xC1 if compressed else 0x81  # FIN, RSV1 for permessage-deflate, opcode text
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", first, size)
    elif size <= 0xFFFF:
        head = struct.pack("!BBH", first, 126, size)
    else:
        head = struct.pack("!BBQ", first, 127, size)
    return head + payload
