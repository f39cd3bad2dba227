"""The server's route table: each route, its handler and its operations (the OpenAPI document's).

The run API's actions come from :data:`~neta_jupyter.runtime.actions.ACTIONS` (one ``POST`` route
each, answered by :class:`~.handlers.ActionHandler`) and its queries from
:data:`~neta_jupyter.runtime.queries.QUERIES` (one ``GET`` route each, answered by
:class:`~.handlers.QueryHandler`); the routes here are the rest: streams, files, notebook edits,
crews, and the two WebSockets (which the document leaves out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from tornado.web import RequestHandler

from ..crews.requests import CrewControlRequest, CrewRunRequest
from ..events import AttachmentData
from ..runtime.actions import ACTIONS, Action
from ..runtime.queries import QUERIES, Query
from ..runtime.requests import InsertRequest, RevertRequest
from . import crew, handlers
from .mcp_endpoint import McpHandler
from .notebook_api import EditsHandler, InsertHandler, RevertHandler
from .sse import SessionStreamHandler, StreamHandler
from .ws import RunSocket

__all__ = ["ROUTES", "Operation", "Route", "routes"]


@dataclass(frozen=True, slots=True)
class Operation:
    """One method of one route."""

    method: str
    summary: str
    body: type[BaseModel] | None = None
    query: tuple[tuple[str, bool, str], ...] = ()
    """(name, required, JSON type)."""
    content: str = "application/json"
    extra_status: tuple[int, ...] = ()
    """Success statuses without a body."""
    extra_errors: tuple[int, ...] = ()
    """Error statuses beyond the ones every operation has."""
    response: type[BaseModel] | None = None
    """The success body's model, when it has one."""
    upload: bool = False
    """The body is a file: multipart/form-data (field ``file``) or the raw bytes."""


@dataclass(frozen=True, slots=True)
class Route:
    """A path under ``/neta/api/`` (or ``/neta/`` for a socket), its handler and its operations."""

    path: str
    handler: type[RequestHandler]
    operations: tuple[Operation, ...] = ()
    """Empty for a WebSocket: the document describes HTTP operations only."""
    kwargs: dict[str, Any] | None = None
    """What the handler's ``initialize`` takes."""
    socket: bool = False
    """Under ``/neta/`` rather than ``/neta/api/``."""


def _action_route(action: Action[Any]) -> Route:
    operation = Operation("post", action.summary, action.request, extra_errors=action.extra_errors)
    return Route(action.route, handlers.ActionHandler, (operation,), {"action": action})


def _query_route(query: Query) -> Route:
    params = tuple((p.name, p.required, p.kind) for p in query.params)
    operation = Operation("get", query.summary, query=params, response=query.response)
    return Route(query.route, handlers.QueryHandler, (operation,), {"query": query})


def _get(summary: str, *query: tuple[str, bool, str], **more: Any) -> tuple[Operation, ...]:
    return (Operation("get", summary, query=query, **more),)


_REQUEST_ID = ("requestId", True, "string")
_SESSION_ID = ("sessionId", True, "string")
_LAST_EVENT_ID = ("lastEventId", False, "integer")
_STREAM = "text/event-stream"

ROUTES: tuple[Route, ...] = (
    *(_action_route(action) for action in ACTIONS),
    *(_query_route(query) for query in QUERIES),
    Route(
        "agent/run/stream",
        StreamHandler,
        _get(
            "Follow a run as Server-Sent Events",
            _REQUEST_ID,
            _LAST_EVENT_ID,
            content=_STREAM,
            extra_status=(204,),
            extra_errors=(410, 416),
        ),
    ),
    Route(
        "agent/attachment/upload",
        handlers.UploadHandler,
        (
            Operation(
                "post",
                "Upload a file to attach to later runs (by its attachmentId); the raw body needs "
                "fileName",
                query=(("fileName", False, "string"),),
                upload=True,
                response=AttachmentData,
                extra_errors=(429,),
            ),
        ),
    ),
    Route(
        "agent/attachment/download",
        handlers.AttachmentHandler,
        _get(
            "Download an attachment",
            ("virtualPath", True, "string"),
            content="application/octet-stream",
        ),
    ),
    Route(
        "agent/session/stream",
        SessionStreamHandler,
        _get(
            "Follow a session's tree events (entries added and updated, leaf moves) as "
            "Server-Sent Events; resume after lastEventId (the tree's lastSeq)",
            _SESSION_ID,
            _LAST_EVENT_ID,
            content=_STREAM,
            extra_errors=(416,),
        ),
    ),
    Route(
        "notebook/revert",
        RevertHandler,
        (
            Operation(
                "post",
                "Revert a notebook edit of a run (editId), or the last one of the latest run "
                "from a notebook (notebookPath); 409 when the cell changed after the edit",
                RevertRequest,
                extra_errors=(409,),
            ),
        ),
    ),
    Route(
        "notebook/insert",
        InsertHandler,
        (
            Operation(
                "post",
                "Insert a run's answer (markdown) or code as a new cell at the end of a "
                "notebook, with the run as its provenance; one of the run's edits",
                InsertRequest,
            ),
        ),
    ),
    Route(
        "notebook/edits",
        EditsHandler,
        _get("A run's notebook edits, each with whether it was reverted", _REQUEST_ID),
    ),
    Route("openapi.json", handlers.OpenApiHandler, _get("This document")),
    Route(
        "crew/run",
        crew.CrewRunHandler,
        (Operation("post", "Start a crew", CrewRunRequest, extra_errors=(429,)),),
    ),
    Route(
        "crew/control",
        crew.CrewControlHandler,
        (
            Operation(
                "post",
                "Pause, resume, stop or retry a crew, or decide one of its escalations",
                CrewControlRequest,
            ),
        ),
    ),
    Route(
        "crew/status",
        crew.CrewStatusHandler,
        _get("A crew's status, its tasks and the decisions it waits for", _REQUEST_ID),
    ),
    Route(
        "crew/stream",
        crew.CrewStreamHandler,
        _get(
            "Follow a crew's log (crew:run:status, crew:task:status, crew:log, "
            "crew:escalation) as Server-Sent Events",
            _REQUEST_ID,
            _LAST_EVENT_ID,
            content=_STREAM,
            extra_status=(204,),
            extra_errors=(416,),
        ),
    ),
    Route("crews", crew.CrewListHandler, _get("The caller's crews")),
    Route("ws", RunSocket, socket=True),
    Route("crew", crew.CrewSocket, socket=True),
    Route("mcp", McpHandler, socket=True),  # MCP's streamable HTTP, not the run API's
)
"""Every route of the server."""


def routes(api: str = "/neta/api") -> list[tuple[Any, ...]]:
    """Tornado's rules for :data:`ROUTES` (the server prefixes its base_url)."""
    rules: list[tuple[Any, ...]] = []
    for route in ROUTES:
        pattern = f"/neta/{route.path}" if route.socket else f"{api}/{route.path}"
        rules.append(
            (pattern, route.handler, route.kwargs) if route.kwargs else (pattern, route.handler)
        )
    return rules
