"""The HTTP client of a streamable-HTTP MCP server, telling when the server has gone away.

A stdio server that exits closes its pipe, and the session sees it end. An HTTP server that goes
away closes nothing the session waits on: its listening stream is retried quietly and given up,
and the SDK resolves a call it loses without saying why. So the client's transport watches every
request itself: a refused connection, a response cut off half-way, or a server that no longer
knows the session (it was started afresh) all mean the server the session spoke to is gone.
"""

from __future__ import annotations

import asyncio
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator

import httpx2
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from .capped import capped

SESSION_HEADER = "mcp-session-id"
_LOST = (httpx2.NetworkError, httpx2.RemoteProtocolError)
"""Failures that mean nobody answers at the other end (not a slow server: no timeouts here)."""


def watched_client(
    url: str, headers: dict[str, str], gone: asyncio.Event, max_result_bytes: int
) -> httpx2.AsyncClient:
    """A client of ``url`` with the SDK's timeouts and ``headers`` that sets ``gone`` as above.

    Each message it receives is at most ``max_result_bytes`` long (see ``capped.py``); bodies
    are asked for uncompressed, so that what is counted is what is kept.
    """
    return httpx2.AsyncClient(
        headers={"Accept-Encoding": "identity"} | headers,
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        transport=_Watch(gone, environment_proxy(url), max(1, max_result_bytes)),
    )


def environment_proxy(url: str) -> str | None:
    """The proxy ``HTTP_PROXY``, ``HTTPS_PROXY`` or ``ALL_PROXY`` names for ``url``.

    A client given its own transport no longer reads them, and the SDK's client does: a server
    reached through the environment's proxy must stay reachable. ``NO_PROXY`` exempts hosts.
    """
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


class _Watch(httpx2.AsyncBaseTransport):
    def __init__(self, gone: asyncio.Event, proxy: str | None, limit: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport(proxy=proxy)
        self._gone = gone
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except _LOST:
            self._gone.set()
            raise
        if response.status_code == 404 and SESSION_HEADER in request.headers:
            self._gone.set()  # a server started afresh on the same address
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _WatchedStream(response.stream, self._gone)
        capped(response, request, self._limit)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _WatchedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, gone: asyncio.Event) -> None:
        self._inner = inner
        self._gone = gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except _LOST:
            self._gone.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()
