"""``{base_url}neta/mcp``: the MCP server over streamable HTTP, behind Jupyter's auth.

A thin Tornado handler: it checks the Host and the Origin, authenticates the request with the
server's identity provider (the token header, as the run API), and hands it to the SDK's ASGI
application with the principal in its scope; the answer streams back as it comes (SSE).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlparse

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import origin_matches_pat
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from tornado import web
from tornado.iostream import StreamClosedError

from ..notebook_mcp.server import PRINCIPAL_KEY, McpDoor
from .base import NetaHandler
from .errors import ApiError

Message = MutableMapping[str, Any]
_VERSION_HEADER = "Mcp-Protocol-Version"
_DROPPED = frozenset({"content-length", "transfer-encoding", "connection"})
"""Framing headers Tornado sets itself for what it sends."""


class McpHandler(NetaHandler):
    """Bridges one HTTP request of an MCP client to the SDK's session manager."""

    async def prepare(self) -> None:  # type: ignore[override]
        """Host, Origin, then the user; each refusal a 4xx saying which."""
        if not self.check_host():
            raise ApiError(
                403,
                "HOST_NOT_ALLOWED",
                f"the Host {self.request.host!r} is not one this server answers "
                "(c.ServerApp.allow_remote_access, c.ServerApp.local_hostnames)",
            )
        origin = self.request.headers.get("Origin")
        if origin and not self._same_or_allowed(origin):
            raise ApiError(
                403,
                "ORIGIN_NOT_ALLOWED",
                f"requests from the origin {origin!r} are not allowed (c.ServerApp.allow_origin)",
            )
        try:
            await super().prepare()
        except web.HTTPError as exc:
            if exc.status_code == 403 and not self.current_user:
                raise ApiError(
                    403,
                    "NOT_AUTHENTICATED",
                    "a valid Jupyter token is required: send the header "
                    "'Authorization: token <token>' (neta-jupyter mcp config prints it)",
                ) from exc
            raise

    def _same_or_allowed(self, origin: str) -> bool:
        """A browser's request from this server's pages or an allowed origin.

        Stricter than the run API's check, which a token lets pass: an MCP endpoint answers no
        page of another origin, token or not (DNS rebinding, a leaked token).
        """
        if self.allow_origin == "*" or urlparse(origin.lower()).netloc == self.request.host:
            return True
        if self.allow_origin:
            return bool(self.allow_origin == origin)
        pattern = self.allow_origin_pat
        return pattern is not None and bool(pattern) and origin_matches_pat(pattern, origin)

    async def _door(self) -> McpDoor:
        keeper: DoorKeeper | None = self.settings.get("neta_mcp")
        if keeper is None or not await keeper.started():
            raise ApiError(503, "MCP_UNAVAILABLE", "the MCP server is not running")
        return keeper.door

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """The session's stream of server messages."""
        await self._bridge()

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """A client message (a request, a notification or a response)."""
        await self._bridge()

    @web.authenticated
    @authorized
    async def delete(self) -> None:
        """The client ends its session."""
        await self._bridge()

    def on_connection_close(self) -> None:
        """The client went away: the SDK hears ``http.disconnect``."""
        gone: asyncio.Event | None = getattr(self, "_gone", None)
        if gone is not None:
            gone.set()

    async def _bridge(self) -> None:
        if self.request.headers.get(_VERSION_HEADER) in MODERN_PROTOCOL_VERSIONS:
            # The sessionless protocol has no session to make a run of: clients fall back to
            # the handshake, whose session is one run.
            raise ApiError(
                400,
                "MCP_SESSIONS_ONLY",
                "this server speaks the MCP protocol versions with sessions (initialize first)",
            )
        if self._body_over_limit:
            raise self._too_large()
        door = await self._door()
        self._gone = asyncio.Event()
        await door.manager.handle_request(self._scope(), self._receive(), self._send)
        if not self._finished:
            self.finish()

    def _scope(self) -> dict[str, Any]:
        request, principal = self.request, self.principal
        host, _, port = request.host.partition(":")
        user = AuthenticatedUser(AccessToken(token="jupyter", client_id=principal, scopes=[]))
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.protocol,
            "path": request.path,
            "raw_path": request.path.encode(),
            "query_string": request.query.encode(),
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in request.headers.get_all()],
            "client": (request.remote_ip, 0),
            "server": (host, int(port) if port.isdigit() else 80),
            "user": user,
            PRINCIPAL_KEY: principal,
        }

    def _receive(self) -> Callable[[], Awaitable[Message]]:
        body = b"".join(self._body)
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await self._gone.wait()
            return {"type": "http.disconnect"}

        return receive

    async def _send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.set_status(message["status"])
            self.clear_header("Content-Type")
            for raw_name, raw_value in message.get("headers", []):
                name = raw_name.decode("latin-1")
                if name.lower() not in _DROPPED:
                    self.add_header(name, raw_value.decode("latin-1"))
        elif message["type"] == "http.response.body" and not self._finished:
            chunk = message.get("body", b"")
            if chunk:
                self.write(chunk)
            if message.get("more_body", False):
                with contextlib.suppress(StreamClosedError):
                    await self.flush()


class DoorKeeper:
    """Runs the MCP server's session manager from the server's start to its stop."""

    def __init__(self, door: McpDoor) -> None:
        self.door = door
        self._stop = asyncio.Event()
        self._up = asyncio.Event()
        self._task: asyncio.Future[None] | None = None

    def start(self) -> None:
        """Once the event loop runs (or at the first request, whichever comes first)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._serve())

    async def started(self) -> bool:
        """Whether it runs, once it has started; ``False`` once stopped."""
        self.start()
        assert self._task is not None
        up: asyncio.Future[Any] = asyncio.ensure_future(self._up.wait())
        waited: list[asyncio.Future[Any]] = [up, self._task]
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        up.cancel()
        return self._up.is_set() and not self._stop.is_set()

    async def _serve(self) -> None:
        async with self.door.running():
            self._up.set()
            await self._stop.wait()

    async def stop(self) -> None:
        """End every MCP session (and its run)."""
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
