"""The run API of a runtime in this process: the server's routes, answered without a server.

Bodies are validated with the server's models and answered with the server's JSON, and the
runtime's refusals become the same errors an HTTP client gets, so a client cannot tell the two
transports apart (``tests/client/test_transports.py`` holds them to that).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..runtime import RunApiError, Runtime, reads
from ..runtime.actions import ACTIONS, Action
from ..runtime.answers import (
    events_expired,
)
from ..runtime.queries import QUERIES
from ..runtime.requests import describe_validation
from ..store import StorageError, finish_now
from ._errors import refusal
from ._transport import Call, Received

B = TypeVar("B", bound=BaseModel)
UPLOAD = "agent/attachment/upload"
Answer = dict[str, Any]
_AFTER_AN_ENDING = frozenset({"resume", "retry"})
"""Actions a client sends as soon as it reads a run's terminal event."""


def _refused(status: int, code: str, message: str, request_id: str | None = None) -> Exception:
    return refusal(status, {"errCode": code, "message": message, "requestId": request_id})


def _parsed(model: type[B], body: dict[str, Any] | None) -> B:
    """The body as ``model``; the server's 400 ``INVALID_FIELDS`` otherwise."""
    raw = body or {}
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        request_id = raw.get("requestId") if isinstance(raw.get("requestId"), str) else None
        raise _refused(400, "INVALID_FIELDS", describe_validation(exc), request_id) from exc


def _param(call: Call, name: str, required: bool = True) -> str:
    value = call.params.get(name, "")
    if required and not value:
        raise _refused(400, "MISSING_PARAMETER", f"query parameter {name!r} is required")
    return value


class InProcessTransport:
    """Runs of ``runtime`` in this process, as ``principal`` (the user the runs belong to)."""

    def __init__(self, runtime: Runtime, principal: str) -> None:
        self.runtime = runtime
        self.principal = principal
        self._actions = {action.route: action for action in ACTIONS}
        self._queries = {query.route: query for query in QUERIES}

    async def send(self, call: Call) -> dict[str, Any]:
        """Answer the call on this loop."""
        if call.method == "POST" and call.path in self._actions:
            return await self._answered(self._act(self._actions[call.path], call.body))
        if call.method == "POST" and call.path == UPLOAD and call.file is not None:
            return await self._answered(self._upload(*call.file))
        return self.send_blocking(call)

    def send_blocking(self, call: Call) -> dict[str, Any]:
        """Answer a query at once (actions run on the event loop: use :meth:`send`).

        The runtime's store answers at once when it is a local one (SQLite, in-memory), which
        in-process runtimes are.
        """
        query = self._queries.get(call.path) if call.method == "GET" else None
        if query is None:
            if call.path in self._actions:
                raise TypeError(f"{call.method} {call.path} runs on the event loop: use send()")
            raise _refused(404, "NOT_FOUND", f"no route {call.method} {call.path}")
        params = {p.name: _param(call, p.name, p.required) for p in query.params}
        try:
            # No settling first (Query.settles): that would wait on the store's commit.
            return {
                "success": True,
                **finish_now(query.answer(self.runtime, self.principal, params)),
            }
        except (RunApiError, StorageError) as exc:
            raise _refused(exc.status, exc.code, exc.message) from exc

    async def _answered(self, work: Awaitable[Answer]) -> Answer:
        try:
            return {"success": True, **await work}
        except (RunApiError, StorageError) as exc:
            raise _refused(exc.status, exc.code, exc.message) from exc

    # --- actions

    async def _act(self, action: Action[Any], body: dict[str, Any] | None) -> Answer:
        request = _parsed(action.request, body)
        request_id = getattr(request, "request_id", None)
        if action.name in _AFTER_AN_ENDING and isinstance(request_id, str):
            await self._wound_down(request_id)
        return await action.answer(self.runtime, self.principal, request)

    async def _upload(self, name: str, content: bytes) -> Answer:
        return await reads.upload_file(self.runtime, self.principal, name, content, None)

    async def _wound_down(self, request_id: str) -> None:
        """Let an activation whose terminal event is stored finish winding down.

        A client acts on the terminal event as soon as it reads it, a moment before the runtime
        lets go of the activation; a resume in that moment would find the run still active.
        """
        last = await self.runtime.last_event(request_id)
        while last is not None and last.terminal and self.runtime.is_active(request_id):
            await self.runtime.wait(request_id)
            await asyncio.sleep(0)

    # --- the stream

    async def stream(self, request_id: str, after: int) -> AsyncGenerator[Received, None]:
        """The log after ``after``, then its tail, up to a terminal event (as the server's SSE)."""
        await self._check_stream(request_id, after)
        if await self.runtime.at_rest(request_id, after):
            return  # nothing will follow
        batches = self.runtime.follow(request_id, after)
        try:
            async for batch in batches:
                for seq, kind, payload in batch:
                    item = Received(seq, kind, payload)
                    yield item
                    if item.terminal:
                        return
        except StorageError as exc:  # the server ends its stream with an error event
            raise _refused(exc.status, exc.code, exc.message, request_id) from exc
        finally:
            # follow() tails forever; close it now rather than whenever it is collected.
            await batches.aclose()  # type: ignore[attr-defined]

    async def _check_stream(self, request_id: str, after: int) -> None:
        try:
            run = await self.runtime.get_run(self.principal, request_id)
        except (RunApiError, StorageError) as exc:
            raise _refused(exc.status, exc.code, exc.message) from exc
        if run.imported:
            raise _refused(
                409,
                "IMPORTED_RUN",
                "this run was imported from history and has no event stream; "
                "read its messages from the session tree",
                request_id,
            )
        if await events_expired(self.runtime, run):
            raise _refused(
                410,
                "EVENTS_EXPIRED",
                f"the events of run {request_id} were deleted once the time they are kept after "
                "a run ends had passed; its status and its messages in the session tree remain",
                request_id,
            )
        last_seq = await self.runtime.last_seq(request_id)
        if after > last_seq:
            raise _refused(
                416,
                "LAST_EVENT_ID_OUT_OF_RANGE",
                f"lastEventId {after} is past the end of the run, whose last event is {last_seq}",
                request_id,
            )

    async def aclose(self) -> None:
        """Nothing to release: the runtime belongs to whoever built it."""
