"""``WS /neta/ws``: several run subscriptions and the run actions multiplexed on one socket.

Client → server frames are objects with a ``type``: ``ping``, the subscriptions, and one frame
type per action of the run API (:data:`~neta_jupyter.runtime.actions.ACTIONS`: ``chat``,
``resume``, ``retry``, …, with the fields of the action's REST body). Server → client frames are
JSON arrays of envelopes (one array per durable batch), or objects with a ``type``: ``pong``,
``subscribed``, ``subscribed_session``, ``unsubscribed``, ``unsubscribed_session``, ``started`` (an
action that starts a run, which the socket then follows), ``ack`` (any other action, with the
fields of its REST answer), ``error``. A bad frame gets an ``error`` reply and the connection stays
open.

A session subscription follows the stream of the session's tree events, whose envelopes carry the
session's id as their ``requestId``; it is keyed by that id beside the run subscriptions.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from pydantic import BaseModel, ValidationError
from tornado import web
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from ..events import ws_batch
from ..runtime import RunApiError, Runtime
from ..runtime.actions import ACTIONS, Action
from ..runtime.log.tree import session_stream
from ..store import EventRow, StorageError
from .base import AUTH_RESOURCE, principal_of
from .compression import WEBSOCKET_COMPRESSION, worth_compressing
from .errors import ApiError, describe_validation
from .following import heartbeat_json
from .schemas import RequestRef, SessionRef, SessionSubscription, parse_json_object
from .sse import check_within_log, parse_last_event_id
from .wire import SocketWriter, websocket_frame

Reply = dict[str, Any]
M = TypeVar("M", bound=BaseModel)


MAX_FRAME_CHARS = 256 * 1024
"""Batches are split so that no frame trips a client's message-size limit (1 MiB is common)."""


def _frames(payloads: list[str]) -> list[str]:
    """JSON array frames of at most about MAX_FRAME_CHARS each (one event never splits)."""
    if sum(map(len, payloads)) + len(payloads) <= MAX_FRAME_CHARS:
        return [ws_batch(payloads)]  # the usual case, decided without a loop in Python
    frames: list[str] = []
    start, size = 0, 0
    for index, payload in enumerate(payloads):
        if size and size + len(payload) > MAX_FRAME_CHARS:
            frames.append(ws_batch(payloads[start:index]))
            start, size = index, 0
        size += len(payload) + 1
    frames.append(ws_batch(payloads[start:]))
    return frames


class _FrameError(Exception):
    def __init__(self, code: str, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.request_id = code, message, request_id


class _Subscribe(RequestRef):
    last_event_id: int | str | None = None


class RunSocket(WebSocketMixin, JupyterHandler, WebSocketHandler):
    """One client connection."""

    auth_resource = AUTH_RESOURCE

    async def get(self, *args: Any, **kwargs: Any) -> None:
        """Authenticate and authorise before upgrading."""
        user = self.current_user
        if not user:
            raise web.HTTPError(403, "authentication required")
        if self.authorizer is not None and not await ensure_async(
            self.authorizer.is_authorized(self, user, "execute", self.auth_resource)
        ):
            raise web.HTTPError(403, "not authorised")
        await super().get(*args, **kwargs)

    def get_compression_options(self) -> dict[str, Any] | None:
        """permessage-deflate when the client offers it, one message per durable batch."""
        policy = self.settings.get("neta_stream_compression", "auto")
        return WEBSOCKET_COMPRESSION if worth_compressing(self.request, policy) else None

    @property
    def runtime(self) -> Runtime:
        """The process's runtime."""
        runtime: Runtime = self.settings["neta_runtime"]
        return runtime

    @property
    def principal(self) -> str:
        """The Jupyter user of this connection."""
        return principal_of(self)

    def open(self, *args: Any, **kwargs: Any) -> None:
        """Start with no subscriptions."""
        self._subs: dict[str, asyncio.Task[None]] = {}
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[Reply | None]]] = {
            "ping": self._ping,
            "subscribe": self._subscribe,
            "unsubscribe": self._unsubscribe,
            "subscribe_session": self._subscribe_session,
            "unsubscribe_session": self._unsubscribe_session,
        }
        for action in ACTIONS:
            for frame_type in (action.frame, *action.also_frames):
                self._handlers[frame_type] = partial(self._act, action)
        # Small frames must not wait for Nagle's algorithm (the handler's own ``stream`` attribute
        # is not the connection's, so this goes through tornado).
        self.set_nodelay(True)
        connection = self.ws_connection
        self._writer = SocketWriter.of(getattr(connection, "stream", None))
        super().open(*args, **kwargs)

    def on_close(self) -> None:
        """Stop every subscription."""
        for task in self._subs.values():
            task.cancel()
        self._subs.clear()

    async def on_message(self, message: str | bytes) -> None:
        """Parse, dispatch, reply; errors become ``error`` frames."""
        reply_to: Any = None
        try:
            frame = self._parse(message)
            reply_to = frame.get("id")
            handler = self._handlers.get(str(frame.get("type")))
            if handler is None:
                known = ", ".join(sorted(self._handlers))
                raise _FrameError(
                    "UNKNOWN_TYPE", f"unknown message type {frame.get('type')!r}; known: {known}"
                )
            reply = await handler(frame)
        except _FrameError as exc:
            reply = {
                "type": "error",
                "errCode": exc.code,
                "message": exc.message,
                "requestId": exc.request_id,
            }
        except ApiError as exc:
            reply = {
                "type": "error",
                "errCode": exc.code,
                "message": exc.message,
                "requestId": exc.request_id,
            }
        except (RunApiError, StorageError) as exc:
            reply = {"type": "error", "errCode": exc.code, "message": exc.message}
        except Exception:  # a fault while answering one frame must not end the connection
            self.log.exception("neta: WebSocket frame failed")
            reply = {"type": "error", "errCode": "INTERNAL_ERROR", "message": "internal error"}
        if reply is not None:
            if reply_to is not None:
                reply["replyTo"] = reply_to
            text = json.dumps(reply)
            redact = self.settings.get("neta_redactor")
            await self._send(redact(text) if redact is not None else text)

    def _parse(self, message: str | bytes) -> dict[str, Any]:
        limit = int(self.settings.get("neta_max_ws_frame_bytes", 1_000_000))
        if len(message) > limit:
            raise _FrameError("FRAME_TOO_LARGE", f"frame is over the limit of {limit} bytes")
        return parse_json_object(message, "frame")

    @staticmethod
    def _validate(model: type[M], frame: dict[str, Any]) -> M:
        try:
            return model.model_validate(frame)
        except ValidationError as exc:
            rid = frame.get("requestId") if isinstance(frame.get("requestId"), str) else None
            raise _FrameError("INVALID_FIELDS", describe_validation(exc), rid) from exc

    async def _send(self, text: str) -> bool:
        """Write one frame and wait for the socket to take it (backpressure)."""
        try:
            await self.write_message(text)
        except WebSocketClosedError:
            return False
        return True

    # --- message handlers

    async def _ping(self, frame: dict[str, Any]) -> Reply:
        return {"type": "pong"}

    async def _subscribe(self, frame: dict[str, Any]) -> Reply:
        body = self._validate(_Subscribe, frame)
        rid = body.request_id
        after = parse_last_event_id(None if body.last_event_id is None else str(body.last_event_id))
        run = await self.runtime.get_run(self.principal, rid)
        if run.imported:
            raise _FrameError("IMPORTED_RUN", "this run was imported and has no event stream", rid)
        await check_within_log(self.runtime, rid, after, run=run)
        self._stop_subscription(rid)
        self._subs[rid] = asyncio.ensure_future(self._pump(rid, after))
        return {"type": "subscribed", "requestId": rid, "status": run.status}

    async def _unsubscribe(self, frame: dict[str, Any]) -> Reply:
        body = self._validate(RequestRef, frame)
        self._stop_subscription(body.request_id)
        return {"type": "unsubscribed", "requestId": body.request_id}

    async def _subscribe_session(self, frame: dict[str, Any]) -> Reply:
        body = self._validate(SessionSubscription, frame)
        last = None if body.last_event_id is None else str(body.last_event_id)
        after = parse_last_event_id(last)
        stream = await self.runtime.session_stream(self.principal, body.session_id)
        await check_within_log(self.runtime, stream, after, "session")
        self._stop_subscription(stream)
        self._subs[stream] = asyncio.ensure_future(self._pump(stream, after))
        return {"type": "subscribed_session", "sessionId": body.session_id}

    async def _unsubscribe_session(self, frame: dict[str, Any]) -> Reply:
        body = self._validate(SessionRef, frame)
        # Only a stream this socket follows can be stopped, and it was checked when followed.
        self._stop_subscription(session_stream(body.session_id))
        return {"type": "unsubscribed_session", "sessionId": body.session_id}

    def _stop_subscription(self, request_id: str) -> None:
        task = self._subs.pop(request_id, None)
        if task is not None:
            task.cancel()

    def _push(self, rows: list[EventRow]) -> bool:
        """A durable batch written from the commit while the socket keeps up (see ``wire``)."""
        connection = self.ws_connection
        writer = self._writer
        if connection is None or writer is None or not writer.ready() or connection.is_closing():
            return False
        # The connection's own compressor, in the order of every other message it sends.
        compressor = getattr(connection, "_compressor", None)
        for frame in _frames([payload for _, _, payload in rows]):
            data = frame.encode()
            if compressor is not None:
                data = compressor.compress(data)
            writer.write(websocket_frame(data, compressed=compressor is not None))
        return True

    async def _pump(self, request_id: str, after: int) -> None:
        interval = float(self.settings.get("neta_heartbeat_interval", 15.0))
        ticks = self.runtime.follow(request_id, after, heartbeat=interval, push=self._push)
        try:
            async for tick in ticks:
                payloads = (
                    [payload for _, _, payload in tick] if tick else [heartbeat_json(request_id)]
                )
                for frame in _frames(payloads):
                    if not await self._send(frame):
                        return
        except StorageError as exc:  # the stream cannot go on: say so rather than go quiet
            error = {"type": "error", "errCode": exc.code, "message": exc.message}
            await self._send(json.dumps({**error, "requestId": request_id}))
        finally:
            await ticks.aclose()  # type: ignore[attr-defined]

    async def _act(self, action: Action[Any], frame: dict[str, Any]) -> Reply:
        """One action of the run API's table, answered ``ack`` (or ``started``, then followed)."""
        answer = await action.answer(
            self.runtime, self.principal, self._validate(action.request, frame)
        )
        if action.follows:
            await self._subscribe({"requestId": answer["requestId"]})
            return {"type": "started", **answer}
        return {"type": "ack", "action": frame["type"], **answer}
