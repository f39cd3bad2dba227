"""A loopback stand-in for the vendors' HTTP APIs, and an HTTP client that can reach nothing else.

:class:`ProviderServer` listens on a free 127.0.0.1 port in a background thread (stdlib
``http.server``, so it needs no event loop and works from pytest-jupyter's sync fixtures). Each
request is recorded and answered with the next scripted :class:`Reply`: a fixture stream from
``tests/fixtures/providers`` replayed byte for byte (event by event, or in tiny chunks that split
lines and UTF-8 characters), a stream built with :func:`openai_stream`, optionally cut off
mid-stream, or an HTTP error with headers. Rules (``server.rules``) look at each request first
and may answer it instead, the way a real server's checks do: :func:`like_llama_cpp` refuses a
history with broken tool-call arguments exactly as llama.cpp's server does.

:func:`loopback_client` is the only client the provider tests hand to a model: its transport
refuses any host but 127.0.0.1, so a test cannot reach the internet even by mistake.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

FIXTURES = Path(__file__).parent / "fixtures" / "providers"


def fixture_bytes(name: str) -> bytes:
    """The raw bytes of ``tests/fixtures/providers/<name>.txt``."""
    return (FIXTURES / f"{name}.txt").read_bytes()


@dataclass
class Reply:
    """One scripted answer."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/event-stream"
    chunk_size: int | None = None
    """Bytes per write; None writes one SSE event at a time."""
    cut_after: int | None = None
    """Drop the connection after this many body bytes (no end of body is ever sent)."""
    chunked: bool = True
    """Chunked transfer encoding; False ends the body by closing the connection."""
    delay: float = 0.0
    """Seconds to wait after the headers, before the first byte of the body."""

    @classmethod
    def stream(cls, fixture: str, **options: Any) -> Reply:
        """Replay a fixture stream."""
        return cls(body=fixture_bytes(fixture), **options)

    @classmethod
    def error(
        cls, status: int, body: dict[str, Any] | str, headers: dict[str, str] | None = None
    ) -> Reply:
        """An error status with a JSON (or plain text) body."""
        text = body if isinstance(body, str) else json.dumps(body)
        return cls(
            status=status,
            body=text.encode(),
            headers=headers or {},
            content_type="text/plain" if isinstance(body, str) else "application/json",
            chunked=False,
        )

    def pieces(self) -> list[bytes]:
        """The body as it is written: events (blank-line terminated) or fixed-size chunks."""
        if self.chunk_size:
            size = self.chunk_size
            return [self.body[i : i + size] for i in range(0, len(self.body), size)]
        return [p for p in re.split(rb"(?<=\n\n)", self.body) if p]


@dataclass
class Received:
    """A request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def raw(self) -> str:
        """Everything the client sent, for asserting a secret went nowhere else."""
        head = "\n".join(f"{k}: {v}" for k, v in self.headers.items())
        return f"{self.method} {self.path}\n{head}\n\n{self.body.decode()}"


Rule = Callable[[Received], "Reply | None"]
"""Looks at a request and answers it (a Reply), or lets the scripted replies do (None)."""


class ProviderServer:
    """Scripted replies on ``http://127.0.0.1:<port>``; every request is kept in ``requests``."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.rules: list[Rule] = []
        """Consulted in order before the scripted replies."""
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                server._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """Base URL, without a trailing slash."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def reply(self, *replies: Reply) -> None:
        """Queue answers for the next requests, in order."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """Replies not used yet."""
        return len(self._replies)

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length)
        headers = {k.lower(): v for k, v in handler.headers.items()}
        received = Received(handler.command, handler.path, headers, body)
        with self._lock:
            self.requests.append(received)
            reply = next((r for rule in self.rules if (r := rule(received)) is not None), None)
            if reply is None and self._replies:
                reply = self._replies.popleft()
        if reply is None:
            reply = Reply.error(599, {"error": {"message": "no reply was scripted"}})
        # The client may give up first (a timeout test), which is its right.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            _send(handler, reply)


def _send(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
    handler.send_response(reply.status)
    handler.send_header("Content-Type", reply.content_type)
    for name, value in reply.headers.items():
        handler.send_header(name, value)
    if reply.chunked:
        handler.send_header("Transfer-Encoding", "chunked")
    elif reply.cut_after is None:
        handler.send_header("Content-Length", str(len(reply.body)))
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.close_connection = True
    handler.wfile.flush()
    if reply.delay:
        time.sleep(reply.delay)
    sent = 0
    for piece in reply.pieces():
        if reply.cut_after is not None and sent + len(piece) > reply.cut_after:
            piece = piece[: reply.cut_after - sent]
            _write(handler, piece, reply.chunked)
            _drop(handler)
            return
        _write(handler, piece, reply.chunked)
        sent += len(piece)
    if reply.cut_after is not None:
        _drop(handler)
    elif reply.chunked:
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()


def _write(handler: BaseHTTPRequestHandler, piece: bytes, chunked: bool) -> None:
    if not piece:
        return
    if chunked:
        piece = b"%x\r\n%s\r\n" % (len(piece), piece)
    handler.wfile.write(piece)
    handler.wfile.flush()


def _drop(handler: BaseHTTPRequestHandler) -> None:
    handler.wfile.flush()
    handler.connection.shutdown(socket.SHUT_RDWR)


# --- misbehaving like real servers ----------------------------------------------------------

LLAMA_CPP_JSON_ERROR = (
    "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at "
    "line 1, column {column}: syntax error while parsing value - invalid string: missing closing "
    "quote; last read: '{last}'"
)


def like_llama_cpp(received: Received) -> Reply | None:
    """llama.cpp's server parses the tool-call arguments of the history it is sent; one that is
    not JSON fails the whole request with HTTP 500, every time it is sent."""
    for message in received.json.get("messages", []):
        for call in message.get("tool_calls") or []:
            arguments = call["function"]["arguments"]
            try:
                json.loads(arguments)
            except ValueError:
                text = LLAMA_CPP_JSON_ERROR.format(column=len(arguments) + 1, last=arguments)
                body = {"error": {"code": 500, "message": text, "type": "server_error"}}
                return Reply.error(500, body)
    return None


CONTEXT_TOKENS = 6_000
"""What a looping model generates when nothing caps its reply: until its context is full."""


def like_a_looping_model(received: Received) -> Reply:
    """A small model stuck in a loop: it writes the same token until the request's output cap
    (``max_tokens`` / ``max_completion_tokens``) stops it, or its context is full."""
    body = received.json
    cap = body.get("max_tokens") or body.get("max_completion_tokens") or CONTEXT_TOKENS
    tokens = min(int(cap), CONTEXT_TOKENS)
    stream = openai_stream(
        text=["again "] * tokens, finish_reason="length", completion_tokens=tokens
    )
    return Reply(body=stream)


def openai_stream(
    *,
    text: list[str] | None = None,
    calls: list[tuple[str, str, list[str]]] | None = None,
    finish_reason: str | None = None,
    completion_tokens: int | None = None,
) -> bytes:
    """A chat-completion stream as llama.cpp's server writes it: ``text`` deltas, then each call
    ``(id, name, argument fragments)``, the finish reason, usage and ``[DONE]``."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": None}]
    deltas += [{"content": piece} for piece in text or []]
    for index, (call_id, name, fragments) in enumerate(calls or []):
        first = {"name": name, "arguments": fragments[0] if fragments else ""}
        deltas.append(
            {"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": first}]}
        )
        deltas += [
            {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            for piece in fragments[1:]
        ]
    finish = finish_reason or ("tool_calls" if calls else "stop")
    produced = completion_tokens if completion_tokens is not None else len(deltas)
    chunks = [_chunk([{"index": 0, "delta": d, "finish_reason": None}]) for d in deltas]
    chunks.append(_chunk([{"index": 0, "delta": {}, "finish_reason": finish}]))
    usage = {"prompt_tokens": 100, "completion_tokens": produced, "total_tokens": 100 + produced}
    chunks.append(_chunk([], usage=usage))
    return b"".join(f"data: {c}\n\n".encode() for c in [*chunks, "[DONE]"])


def _chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
    return json.dumps(
        {
            "choices": choices,
            "created": 1753350000,
            "id": "chatcmpl-llama",
            "model": "qwen2.5-coder-1.5b",
            "system_fingerprint": "b6000-llama",
            "object": "chat.completion.chunk",
            **extra,
        }
    )


# --- the client side --------------------------------------------------------------------------


def anthropic_stream(
    *, text: str | None = None, calls: list[tuple[str, str, dict[str, Any]]] | None = None
) -> bytes:
    """A Messages API stream: a ``text`` block, then a ``tool_use`` block for each call
    ``(id, name, input)``, the stop reason and ``message_stop``."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_standin",
                "type": "message",
                "role": "assistant",
                "model": "claude-standin",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 100, "output_tokens": 1},
            },
        }
    ]
    blocks: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if text:
        blocks.append(({"type": "text", "text": ""}, {"type": "text_delta", "text": text}))
    for call_id, name, arguments in calls or []:
        start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        blocks.append((start, {"type": "input_json_delta", "partial_json": json.dumps(arguments)}))
    for index, (start, delta) in enumerate(blocks):
        events += [
            {"type": "content_block_start", "index": index, "content_block": start},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
    stop = "tool_use" if calls else "end_turn"
    events += [
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


class NonLoopbackRequest(AssertionError):
    """A test tried to send a request off this machine."""


class LoopbackOnlyTransport(httpx.AsyncBaseTransport):
    """Sends requests to 127.0.0.1 only; anything else fails the test before a byte is sent."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host != "127.0.0.1":
            raise NonLoopbackRequest(f"tests must not leave 127.0.0.1: refused {request.url}")
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def loopback_client() -> httpx.AsyncClient:
    """A client that can reach nothing but 127.0.0.1 (and ignores proxy settings)."""
    return httpx.AsyncClient(
        transport=LoopbackOnlyTransport(), trust_env=False, timeout=httpx.Timeout(10.0)
    )


# --- fixture bodies (wrap with pytest.fixture in a test module) --------------------------------


def serve() -> Iterator[ProviderServer]:
    """A running server, closed after the test."""
    server = ProviderServer()
    try:
        yield server
    finally:
        server.close()


def guarded_client(jp_asyncio_loop: Any) -> Iterator[httpx.AsyncClient]:
    """A loopback-only client, closed on pytest-jupyter's loop after the test."""
    client = loopback_client()
    yield client
    jp_asyncio_loop.run_until_complete(_close(client))


async def _close(client: httpx.AsyncClient) -> None:
    await client.aclose()
    await settle()


async def settle() -> None:
    """Let pending tasks finish before pytest-jupyter closes the loop.

    A stream left at its end marker leaves httpx's inner byte generators to the garbage
    collector, whose finalizers run as tasks; a long-lived loop runs them at once, a test's loop
    must be given the chance.
    """
    me = asyncio.current_task()
    for _ in range(100):
        if not [t for t in asyncio.all_tasks() if t is not me and not t.done()]:
            return
        await asyncio.sleep(0)
