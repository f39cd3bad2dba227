"""The OpenAPI document of the REST API, built from the same route table the server registers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..crews.requests import CrewControlRequest, CrewRunRequest
from ..events import AttachmentData
from ..events.runs import RunList, RunSummary
from .schemas import (
    CompactRequest,
    ImportRequest,
    InputRequest,
    LeafRequest,
    RequestRef,
    ResumeRequest,
    RevertRequest,
    RunRequest,
)


class ErrorBody(BaseModel):
    """Every 4xx body (seed 003)."""

    model_config = ConfigDict(populate_by_name=True)

    http_status_code: int = Field(alias="httpStatusCode")
    message: str
    data: None = None
    success: bool
    err_code: str = Field(alias="errCode")
    request_id: str | None = Field(alias="requestId")


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
    """A path and its operations."""

    path: str
    operations: tuple[Operation, ...] = field(default_factory=tuple)


_RUN = "/neta/api/agent/run"
ROUTES: tuple[Route, ...] = (
    Route(f"{_RUN}/async", (Operation("post", "Start a run", RunRequest, extra_errors=(429,)),)),
    Route(
        f"{_RUN}/stream",
        (
            Operation(
                "get",
                "Follow a run as Server-Sent Events",
                query=(("requestId", True, "string"), ("lastEventId", False, "integer")),
                content="text/event-stream",
                extra_status=(204,),
                extra_errors=(410, 416),
            ),
        ),
    ),
    Route(f"{_RUN}/resumeTask", (Operation("post", "Resume a suspended run", ResumeRequest),)),
    Route(f"{_RUN}/retryTask", (Operation("post", "Retry a recoverable failure", RequestRef),)),
    Route(f"{_RUN}/terminateTask", (Operation("post", "Cancel a run", RequestRef),)),
    Route(
        f"{_RUN}/suspendTask",
        (Operation("post", "Pause a running run at its next step boundary", RequestRef),),
    ),
    Route(
        f"{_RUN}/addSupplementaryInput",
        (Operation("post", "Add input to a running run", InputRequest),),
    ),
    Route(
        f"{_RUN}/import",
        (Operation("post", "Register a history run without a stream", ImportRequest),),
    ),
    Route(
        f"{_RUN}/status",
        (
            Operation(
                "get",
                "A run's status",
                query=(("requestId", True, "string"),),
                response=RunSummary,
            ),
        ),
    ),
    Route(
        "/neta/api/agent/runs",
        (
            Operation(
                "get",
                "The caller's runs",
                query=(("sessionId", False, "string"),),
                response=RunList,
            ),
        ),
    ),
    Route(
        "/neta/api/agent/attachment/upload",
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
        "/neta/api/agent/attachment/download",
        (
            Operation(
                "get",
                "Download an attachment",
                query=(("virtualPath", True, "string"),),
                content="application/octet-stream",
            ),
        ),
    ),
    Route(
        "/neta/api/agent/session/stream",
        (
            Operation(
                "get",
                "Follow a session's tree events (entries added and updated, leaf moves) as "
                "Server-Sent Events; resume after lastEventId (the tree's lastSeq)",
                query=(("sessionId", True, "string"), ("lastEventId", False, "integer")),
                content="text/event-stream",
                extra_errors=(416,),
            ),
        ),
    ),
    Route(
        "/neta/api/crew/run",
        (Operation("post", "Start a crew", CrewRunRequest, extra_errors=(429,)),),
    ),
    Route(
        "/neta/api/crew/control",
        (
            Operation(
                "post",
                "Pause, resume, stop or retry a crew, or decide one of its escalations",
                CrewControlRequest,
            ),
        ),
    ),
    Route(
        "/neta/api/crew/status",
        (
            Operation(
                "get",
                "A crew's status, its tasks and the decisions it waits for",
                query=(("requestId", True, "string"),),
            ),
        ),
    ),
    Route(
        "/neta/api/crew/stream",
        (
            Operation(
                "get",
                "Follow a crew's log (crew:run:status, crew:task:status, crew:log, "
                "crew:escalation) as Server-Sent Events",
                query=(("requestId", True, "string"), ("lastEventId", False, "integer")),
                content="text/event-stream",
                extra_status=(204,),
                extra_errors=(416,),
            ),
        ),
    ),
    Route("/neta/api/crews", (Operation("get", "The caller's crews"),)),
    Route("/neta/api/sessions", (Operation("get", "The caller's sessions"),)),
    Route(
        "/neta/api/sessions/tree",
        (
            Operation(
                "get", "A session's tree and active path", query=(("sessionId", True, "string"),)
            ),
        ),
    ),
    Route(
        "/neta/api/sessions/leaf",
        (Operation("post", "Move a session's current leaf", LeafRequest),),
    ),
    Route(
        "/neta/api/sessions/compact", (Operation("post", "Compact a session now", CompactRequest),)
    ),
    Route(
        "/neta/api/notebook/revert",
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
        "/neta/api/notebook/edits",
        (
            Operation(
                "get",
                "A run's notebook edits, each with whether it was reverted",
                query=(("requestId", True, "string"),),
            ),
        ),
    ),
    Route("/neta/api/models", (Operation("get", "Configured models"),)),
    Route("/neta/api/mcp", (Operation("get", "MCP servers, their state and their tools"),)),
    Route("/neta/api/openapi.json", (Operation("get", "This document"),)),
)


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")


def _component(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    """A reference to ``model``'s schema, which joins ``components`` with the models it uses."""
    schema = _schema(model)
    components.update(schema.pop("$defs", {}))
    components[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _operation(op: Operation, components: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": op.summary, "security": [{"token": []}]}
    if op.query:
        out["parameters"] = [
            {"name": name, "in": "query", "required": required, "schema": {"type": kind}}
            for name, required, kind in op.query
        ]
    if op.body is not None:
        out["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _component(op.body, components)}},
        }
    if op.upload:
        binary = {"type": "string", "format": "binary"}
        form = {"type": "object", "properties": {"file": binary}, "required": ["file"]}
        out["requestBody"] = {
            "required": True,
            "content": {
                "multipart/form-data": {"schema": form},
                "application/octet-stream": {"schema": binary},
            },
        }
    error = {
        "description": "refused",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    success = _component(op.response, components) if op.response is not None else {}
    responses: dict[str, Any] = {
        "200": {"description": "success", "content": {op.content: {"schema": success}}},
        "400": error,
        "403": error,
        "404": error,
        "409": error,
    }
    if op.body is not None or op.upload:
        responses["413"] = error
    for status in op.extra_status:
        responses[str(status)] = {"description": "no content"}
    for status in op.extra_errors:
        responses[str(status)] = error
    out["responses"] = responses
    return out


def document(base_url: str = "/") -> dict[str, Any]:
    """OpenAPI 3.1 of every REST route, with paths under ``base_url``."""
    components: dict[str, Any] = {"ErrorBody": _schema(ErrorBody)}
    prefix = base_url.rstrip("/")
    paths = {
        prefix + route.path: {op.method: _operation(op, components) for op in route.operations}
        for route in ROUTES
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "neta_jupyter run API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "token": {"type": "apiKey", "in": "header", "name": "Authorization"}
            },
        },
    }
