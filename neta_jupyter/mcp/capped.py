"""A streamable-HTTP server's messages, none larger than a limit (the relay's cap for stdio).

An HTTP server answers a request with one JSON body or with an event stream whose events each
carry one JSON-RPC message. A message over the limit is never held: past the limit only its head
is kept, to find its request id, and it is replaced by the same JSON-RPC error the stdio relay
gives (:func:`._relay.refused`), so the call fails at once, saying why, and the session goes on.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator

import httpx2
from httpx2._decoders import MultiDecoder

from ._relay import refusal, refused

_HEAD = 4096
"""Bytes of a refused message kept to find its request id (and of an event's other fields)."""
_BREAK = re.compile(rb"\r\n|\r|\n")


def capped(response: httpx2.Response, request: httpx2.Request, limit: int) -> None:
    """Have ``response``'s body read through the cap, by its content type."""
    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind not in ("application/json", "text/event-stream"):
        return
    assert isinstance(response.stream, httpx2.AsyncByteStream)
    stream: httpx2.AsyncByteStream = response.stream
    if response.headers.get("content-encoding", "identity").lower() != "identity":
        stream = _Decoded(stream, response.headers["content-encoding"])
        del response.headers["content-encoding"]
    response.headers.pop("content-length", None)  # a refused body is shorter
    if kind == "application/json":
        response.stream = _CappedBody(stream, limit, _request_id(request))
    else:
        response.stream = _CappedEvents(stream, limit)


def _request_id(request: httpx2.Request) -> object:
    """The JSON-RPC id of the request a JSON body answers (``None`` for a notification)."""
    try:
        sent = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return None
    return sent.get("id") if isinstance(sent, dict) else None


class _Decoded(httpx2.AsyncByteStream):
    """A body sent compressed although asked not to be: measured as it is decoded."""

    def __init__(self, inner: httpx2.AsyncByteStream, encoding: str) -> None:
        self._inner = inner
        self._decoder = MultiDecoder([e.strip().lower() for e in encoding.split(",")])

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            for part in self._decoder.decode(chunk):
                yield part
        for part in self._decoder.flush():
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Message:
    """One message being read: its pieces while under the limit, only its head once over it."""

    def __init__(self, limit: int) -> None:
        self.limit, self.parts, self.size, self.over = limit, list[bytes](), 0, False

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.over:
            return
        self.parts.append(piece)
        if self.size > self.limit:
            self.over, self.parts = True, [b"".join(self.parts)[:_HEAD]]

    def refusal(self, request_id: object = None) -> bytes | None:
        """The error to pass on instead, answering the id in its head or else ``request_id``."""
        found = refusal(self.parts[0], self.size, self.limit)
        if found is None and request_id is not None:
            found = refused(request_id, self.size, self.limit)
        return found


class _CappedBody(httpx2.AsyncByteStream):
    """A JSON body: passed on whole when under the limit, else the refusal of its request."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, request_id: object) -> None:
        self._inner, self._limit, self._id = inner, limit, request_id

    async def __aiter__(self) -> AsyncIterator[bytes]:
        body = _Message(self._limit)
        async for chunk in self._inner:
            body.add(chunk)
        if not body.over:
            yield b"".join(body.parts)
        elif (out := body.refusal(self._id)) is not None:
            yield out

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedEvents(httpx2.AsyncByteStream):
    """An event stream: each event passed on when it ends, its data under the limit or refused."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._events = _Events(limit)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            for event in self._events.feed(chunk):
                yield event

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Events:
    """Server-sent events split from a byte stream, any line ending, any chunk boundary."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._after_cr = False
        self._new_line()
        self._new_event()

    def _new_line(self) -> None:
        self._kind: str | None = None  # "data", "other", or not known yet (its first bytes)
        self._line: list[bytes] = []
        self._line_size = 0
        self._strip_space = False

    def _new_event(self) -> None:
        self._fields: list[bytes] = []  # lines other than data (event, id, retry, comments)
        self._data: _Message | None = None

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the rest of a CRLF split between two chunks
        self._after_cr = chunk.endswith(b"\r")
        start = 0
        for end in _BREAK.finditer(chunk):
            self._piece(chunk[start : end.start()])
            start = end.end()
            if (event := self._end_line()) is not None:
                yield event
        self._piece(chunk[start:])

    def _piece(self, piece: bytes) -> None:
        """Part of the current line: a data line's value goes to the message as it arrives."""
        if not piece:
            return
        if self._kind is None:
            head = b"".join(self._line) + piece
            if len(head) < 5 and b"data:".startswith(head):
                self._line, self._line_size = [head], len(head)
                return
            self._line, self._line_size = [], 0
            if not head.startswith(b"data:"):
                self._kind = "other"
                self._keep(head)
                return
            self._start_data()
            piece = head[5:]
        if self._kind == "other":
            self._keep(piece)
            return
        if self._strip_space and piece:
            piece, self._strip_space = piece.removeprefix(b" "), False
        assert self._data is not None
        self._data.add(piece)

    def _start_data(self) -> None:
        self._kind, self._strip_space = "data", True
        if self._data is None:
            self._data = _Message(self._limit)
        else:
            self._data.add(b"\n")  # the data lines of one event are joined by a newline

    def _keep(self, piece: bytes) -> None:
        if self._line_size < _HEAD:
            self._line.append(piece[: _HEAD - self._line_size])
        self._line_size += len(piece)

    def _end_line(self) -> bytes | None:
        """The event to pass on when this line (an empty one) ends it."""
        kind, line = self._kind, b"".join(self._line)
        self._new_line()
        if kind is None and line == b"data":
            self._start_data()  # a data field without a colon: an empty value
        elif kind == "other" or (kind is None and line):
            self._fields.append(line)
        elif kind is None:
            return self._end_event()
        return None

    def _end_event(self) -> bytes | None:
        fields, data = b"".join(f + b"\n" for f in self._fields), self._data
        self._new_event()
        if data is None:
            return fields + b"\n" if fields else None
        if not data.over:
            value = b"".join(data.parts).replace(b"\n", b"\ndata: ")
            return fields + b"data: " + value + b"\n\n"
        out = data.refusal()
        if out is None:
            return None  # a notification nobody waits for: dropped, as the relay drops it
        return fields + b"data: " + out + b"\n"
