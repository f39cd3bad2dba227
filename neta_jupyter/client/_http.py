"""The run API of a Jupyter server: REST calls with httpx, the stream as Server-Sent Events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from ._errors import InvalidAnswer, StreamInterrupted, Unreachable, refusal
from ._transport import Call, Received

API = "neta/api/"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=90.0)
"""Reads wait longer than the server's heartbeat interval (15 s by default)."""


class HttpTransport:
    """A Jupyter server running the extension, at ``base_url`` (its base_url included).

    ``headers`` carry the authorization: the token travels there only, never in a URL, a message
    or a log line. ``trust_env`` lets httpx take proxies and certificates from the environment.
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        trust_env: bool = True,
    ) -> None:
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._options: dict[str, Any] = {
            "base_url": self.base_url,
            "headers": dict(headers or {}),
            "timeout": timeout,
            "trust_env": trust_env,
        }
        self._async: httpx.AsyncClient | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._blocking: httpx.Client | None = None

    def _client(self) -> httpx.AsyncClient:
        """The async client of the running loop (a kernel may run cells on more than one)."""
        loop = asyncio.get_running_loop()
        if self._async is None or self._async_loop is not loop:
            self._async = httpx.AsyncClient(**self._options)
            self._async_loop = loop
        return self._async

    async def send(self, call: Call) -> dict[str, Any]:
        """One REST request."""
        try:
            response = await self._client().request(call.method, API + call.path, **_content(call))
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        return self._answer(response)

    def send_blocking(self, call: Call) -> dict[str, Any]:
        """One REST request, without the event loop."""
        if self._blocking is None:
            self._blocking = httpx.Client(**self._options)
        try:
            response = self._blocking.request(call.method, API + call.path, **_content(call))
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        return self._answer(response)

    def _unreachable(self, exc: httpx.HTTPError) -> Unreachable:
        return Unreachable(f"cannot reach {self.base_url}: {type(exc).__name__} {exc}".rstrip())

    def _answer(self, response: httpx.Response) -> dict[str, Any]:
        body = _json_of(response)
        if response.status_code >= 400:
            raise refusal(response.status_code, body)
        if not isinstance(body, dict):
            raise InvalidAnswer(f"{self.base_url} did not answer like a neta_jupyter server")
        return body

    async def stream(self, request_id: str, after: int) -> AsyncGenerator[Received, None]:
        """``GET agent/run/stream`` with ``lastEventId``; heartbeats (no id) are dropped."""
        params = {"requestId": request_id}
        if after >= 0:
            params["lastEventId"] = str(after)
        try:
            async with aconnect_sse(
                self._client(), "GET", API + "agent/run/stream", params=params
            ) as source:
                response = source.response
                if response.status_code == 204:
                    return  # at rest: nothing will follow
                if response.status_code >= 400:
                    await response.aread()
                    raise refusal(response.status_code, _json_of(response))
                async for sse in source.aiter_sse():
                    if sse.event == "error":
                        raise _stream_error(sse.data, request_id)
                    if not sse.id:
                        continue
                    item = Received(int(sse.id), sse.event, sse.data)
                    yield item
                    if item.terminal:
                        return
        except (httpx.HTTPError, SSEError) as exc:
            raise StreamInterrupted(f"the stream broke: {type(exc).__name__}") from exc
        raise StreamInterrupted("the stream ended before a terminal event")

    async def aclose(self) -> None:
        """Close both HTTP clients."""
        if self._blocking is not None:
            self._blocking.close()
            self._blocking = None
        if self._async is not None:
            await self._async.aclose()
            self._async = None


def _content(call: Call) -> dict[str, Any]:
    """What httpx sends for the call: its query, and a JSON body or a file as a form."""
    sent: dict[str, Any] = {"params": call.params or None}
    if call.file is not None:
        sent["files"] = {"file": call.file}
    else:
        sent["json"] = call.body
    return sent


def _stream_error(data: str, request_id: str) -> Exception:
    """The stream's ``error`` event: the store failed (its data says how), or no such run."""
    try:
        body = json.loads(data) if data else None
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("errCode"):
        return refusal(503, body)
    # seed 003: the stream of a run that does not exist, or of another user's
    return refusal(404, {"errCode": "RUN_NOT_FOUND", "message": f"no run {request_id!r}"})


def _json_of(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
