"""Streams as Server-Sent Events (seed 003): a run's, and a session's tree events.

``GET /neta/api/agent/run/stream`` follows a run, ``GET /neta/api/agent/session/stream`` a session.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from ..events import sse_error_frame, sse_frame
from ..events.encoding import sse_frames
from ..runtime import RunNotFound, Runtime
from ..runtime.answers import events_expired
from ..runtime.data.runs import Run
from ..store import EventRow, StorageError
from .base import NetaHandler
from .compression import StreamGzip
from .errors import ApiError
from .following import heartbeat_json, until_terminal
from .wire import SocketWriter, SsePush


def parse_last_event_id(value: str | None) -> int:
    """``lastEventId`` / ``Last-Event-ID``: -1 when absent; a clear 400 when not an integer."""
    if value is None or value == "":
        return -1
    try:
        seq = int(value)
    except ValueError as exc:
        raise ApiError(
            400, "INVALID_LAST_EVENT_ID", f"lastEventId must be an integer, got {value!r}"
        ) from exc
    if seq < -1:
        raise ApiError(400, "INVALID_LAST_EVENT_ID", "lastEventId must be -1 or more")
    return seq


async def check_within_log(
    runtime: Runtime, request_id: str, after: int, what: str = "run", run: Run | None = None
) -> None:
    """A ``lastEventId`` past the stream's last event names events that never existed: 416.

    Followed, it would wait for them forever (a client whose stored position outlived the log).
    ``what`` names the stream in the message (``run``, ``session``). A finished ``run`` whose
    events were deleted after the retention: 410 (:func:`check_kept`), whatever ``after`` is.
    """
    if run is not None:
        await check_kept(runtime, run)
    last = await runtime.last_seq(request_id)
    if after > last:
        raise ApiError(
            416,
            "LAST_EVENT_ID_OUT_OF_RANGE",
            f"lastEventId {after} is past the end of the {what}'s stream, whose last event is "
            f"{last}; reconnect without it (or with -1) to read the {what} from the start",
            request_id if what == "run" else None,
        )


async def check_kept(runtime: Runtime, run: Run) -> None:
    """A finished run whose log is empty had its events deleted after the retention: 410.

    A client's position in a deleted log is not wrong, the log is gone. The store is asked, not
    what this process remembers of the stream: that may predate the deletion.
    """
    if await events_expired(runtime, run):
        raise ApiError(
            410,
            "EVENTS_EXPIRED",
            f"the events of run {run.request_id} were deleted once the time they are kept after "
            "a run ends had passed; its status and its messages in the session tree remain",
            run.request_id,
        )


class StreamHandler(NetaHandler):
    """Replays the log after ``lastEventId`` then tails it, ending after a terminal event."""

    _closed = False
    _pump_task: asyncio.Task[None] | None = None

    def on_connection_close(self) -> None:
        """The client went away: stop following at once, even while waiting for events."""
        self._closed = True
        if self._pump_task is not None:
            self._pump_task.cancel()

    @web.authenticated
    @authorized
    async def get(self) -> None:
        request_id = self.query("requestId") or ""
        after = self._last_event_id()
        try:
            run = await self.runtime.get_run(self.principal, request_id)
        except RunNotFound as exc:
            self._start_stream()
            self.finish(sse_error_frame(exc.message))
            return
        if run.imported:
            raise ApiError(
                409,
                "IMPORTED_RUN",
                "this run was imported from history and has no "
                "event stream; read its messages from the session tree",
                request_id,
            )
        await check_within_log(self.runtime, request_id, after, run=run)
        if await self.runtime.at_rest(request_id, after):
            self.set_status(204)  # nothing will follow: EventSource stops reconnecting
            self.finish()
            return
        await self._follow(request_id, after, segment=True)

    def _start_stream(self) -> None:
        if not any(isinstance(t, StreamGzip) for t in self._transforms):
            # Before the first flush, which is when transforms read the headers.
            policy = self.settings.get("neta_stream_compression", "auto")
            self._transforms.append(StreamGzip(self.request, policy))
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        stream = getattr(self.request.connection, "stream", None)
        if stream is not None:
            # Nagle's algorithm adds ~20 ms to small-frame delivery on loopback.
            stream.set_nodelay(True)

    def _last_event_id(self) -> int:
        return parse_last_event_id(
            self.get_query_argument("lastEventId", None)
            or self.request.headers.get("Last-Event-ID")
        )

    async def _follow(self, stream: str, after: int, *, segment: bool) -> None:
        """Send the stream after ``after`` until the client leaves (or a segment's end)."""
        self._start_stream()
        self._pump_task = asyncio.ensure_future(self._pump(stream, after, segment=segment))
        try:
            await self._pump_task
        except asyncio.CancelledError:
            if not self._closed:
                raise  # the server is stopping, not the client
            return
        if not self._closed:
            self.finish()

    async def _pump(self, request_id: str, after: int, *, segment: bool) -> None:
        interval = float(self.settings.get("neta_heartbeat_interval", 15.0))
        ticks: AsyncIterator[list[EventRow]] | None = None
        try:
            await self.flush()  # the headers: what is pushed from the commit follows them
            push = self._push(segment)
            ticks = self.runtime.follow(request_id, after, heartbeat=interval, push=push)
            async for tick in ticks:
                if not tick:
                    self.write(sse_frame("HEARTBEAT", heartbeat_json(request_id), None))
                    await self.flush()
                    continue
                batch, ended = self._cut(tick) if segment else (tick, False)
                self.write(sse_frames(batch))
                await self.flush()
                if ended:
                    break
        except StreamClosedError:
            pass
        except StorageError as exc:  # the stream cannot go on: say so rather than go quiet
            self.write(sse_error_frame(exc.message, exc.code))
        finally:
            if ticks is not None:
                await ticks.aclose()  # type: ignore[attr-defined]

    def _push(self, segment: bool) -> SsePush | None:
        """Writes batches from the commit once this follower has caught up, if it can."""
        connection = self.request.connection
        writer = SocketWriter.of(getattr(connection, "stream", None))
        # Tornado's HTTP/1 connection decides the framing with the headers; other connections
        # (none today) are written through the handler only.
        chunked = getattr(connection, "_chunking_output", None)
        if writer is None or chunked is None or self.request.method == "HEAD":
            return None
        return SsePush(writer, self._transforms, chunked=bool(chunked), segment=segment)

    def _cut(self, batch: list[EventRow]) -> tuple[list[EventRow], bool]:
        """The batch up to the end of the followed segment, and whether it ended there."""
        return until_terminal(batch)


class SessionStreamHandler(StreamHandler):
    """``GET /neta/api/agent/session/stream``: a session's tree events.

    Replayed after ``lastEventId``, then tailed until the client leaves (the stream has no end).
    """

    @web.authenticated
    @authorized
    async def get(self) -> None:
        session_id = self.query("sessionId") or ""
        after = self._last_event_id()
        # Unlike a run's stream, a plain 404: EventSource then stops instead of reconnecting.
        stream = await self.runtime.session_stream(self.principal, session_id)
        await check_within_log(self.runtime, stream, after, "session")
        await self._follow(stream, after, segment=False)
