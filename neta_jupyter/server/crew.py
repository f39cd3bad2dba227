"""Crews over HTTP: start and control (REST), follow (SSE), and the ``/neta/crew`` WebSocket.

The crew's stream is its log in the event store, read and tailed like a run's: replayed after
``lastEventId``, then live; an SSE stream ends after the crew's final ``crew:run:status``.
WebSocket frames (client → server): ``crew:trigger``, ``crew:control``, ``subscribe``,
``unsubscribe``, ``ping``; server → client: arrays of envelopes, ``crew:started``,
``crew:control`` replies, ``subscribed``, ``unsubscribed``, ``pong``, ``error``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..crews import CrewDefinition
from ..crews.log import ENDED_CREW, RUN_STATUS
from ..crews.manager import Crews
from ..crews.requests import CrewControlRequest, CrewRef, CrewRunRequest
from ..store import EventRow
from .base import NetaHandler
from .sse import StreamHandler, check_within_log, parse_last_event_id
from .ws import RunSocket


def crews_of(settings: dict[str, Any]) -> Crews:
    """The process's crews."""
    crews: Crews = settings["neta_crews"]
    return crews


def until_crew_end(batch: list[EventRow]) -> tuple[list[EventRow], bool]:
    """The batch cut after the crew's final status, and whether it was found."""
    for index, (_, kind, payload) in enumerate(batch):
        if kind == RUN_STATUS and json.loads(payload)["data"]["status"] in ENDED_CREW:
            return batch[: index + 1], True
    return batch, False


async def checked_off_loop(body: CrewRunRequest) -> CrewDefinition:
    """The request's definition, parsed and checked in a worker thread.

    A definition near the body limit takes a while to parse (YAML especially); other requests
    are served meanwhile.
    """
    return await asyncio.to_thread(body.crew)


class CrewRunHandler(NetaHandler):
    """``POST /neta/api/crew/run``: start a crew; its requestId and status."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.parse_body(CrewRunRequest)
        crews = crews_of(self.settings)
        definition = await checked_off_loop(body)
        state = await crews.start(self.principal, definition, body.inputs, approve=body.approve)
        self.reply({"requestId": state.request_id, "status": state.status})


class CrewControlHandler(NetaHandler):
    """``POST /neta/api/crew/control``: pause, resume, stop, retry, decide."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.parse_body(CrewControlRequest)
        crews = crews_of(self.settings)
        self.reply(
            await crews.control(self.principal, body.request_id, body.action, **body.fields())
        )


class CrewStatusHandler(NetaHandler):
    """``GET /neta/api/crew/status?requestId=``: the crew, its tasks, its open escalations."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        crew = await crews_of(self.settings).get(self.principal, self.query("requestId") or "")
        self.reply(crew.state.summary())


class CrewListHandler(NetaHandler):
    """``GET /neta/api/crews``: the principal's crews."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.reply({"crews": await crews_of(self.settings).summaries(self.principal)})


class CrewStreamHandler(StreamHandler):
    """``GET /neta/api/crew/stream?requestId=&lastEventId=``: the crew's log, then live."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        request_id = self.query("requestId") or ""
        after = self._last_event_id()
        crew = await crews_of(self.settings).get(self.principal, request_id)
        await check_within_log(self.runtime, request_id, after, "crew")
        if crew.state.ended and after >= await self.runtime.last_seq(request_id):
            self.set_status(204)  # nothing will follow: EventSource stops reconnecting
            self.finish()
            return
        await self._follow(request_id, after, segment=True)

    def _cut(self, batch: list[EventRow]) -> tuple[list[EventRow], bool]:
        return until_crew_end(batch)


class CrewSocket(RunSocket):
    """``WS /neta/crew``: trigger, control and follow crews on one socket."""

    def open(self, *args: Any, **kwargs: Any) -> None:
        """The crew namespace's messages instead of the run socket's."""
        super().open(*args, **kwargs)
        self._handlers = {
            "ping": self._ping,
            "crew:trigger": self._trigger,
            "crew:control": self._control,
            "subscribe": self._crew_subscribe,
            "unsubscribe": self._crew_unsubscribe,
        }

    @property
    def crews(self) -> Crews:
        """The process's crews."""
        return crews_of(self.settings)

    @staticmethod
    def _body(frame: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in frame.items() if k not in ("type", "id")}

    async def _trigger(self, frame: dict[str, Any]) -> dict[str, Any]:
        body = self._validate(CrewRunRequest, self._body(frame))
        definition = await checked_off_loop(body)
        state = await self.crews.start(
            self.principal, definition, body.inputs, approve=body.approve
        )
        await self._crew_subscribe({"requestId": state.request_id})
        return {"type": "crew:started", "requestId": state.request_id, "status": state.status}

    async def _control(self, frame: dict[str, Any]) -> dict[str, Any]:
        body = self._validate(CrewControlRequest, self._body(frame))
        result = await self.crews.control(
            self.principal, body.request_id, body.action, **body.fields()
        )
        return {"type": "crew:control", **result}

    async def _crew_subscribe(self, frame: dict[str, Any]) -> dict[str, Any]:
        body = self._validate(CrewRef, self._body(frame))
        rid = body.request_id
        after = parse_last_event_id(None if body.last_event_id is None else str(body.last_event_id))
        crew = await self.crews.get(self.principal, rid)
        await check_within_log(self.runtime, rid, after, "crew")
        self._stop_subscription(rid)
        self._subs[rid] = asyncio.ensure_future(self._pump(rid, after))
        return {"type": "subscribed", "requestId": rid, "status": crew.state.status}

    async def _crew_unsubscribe(self, frame: dict[str, Any]) -> dict[str, Any]:
        body = self._validate(CrewRef, self._body(frame))
        self._stop_subscription(body.request_id)
        return {"type": "unsubscribed", "requestId": body.request_id}
