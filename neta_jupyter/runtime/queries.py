"""The run API's queries: one table, beside the actions', that every transport and document reads.

Each query is declared once: its name, its ``GET`` route under ``neta/api/``, its query
parameters and its answer for a principal. The server registers its query routes from this
table, the OpenAPI document describes them, and the client's in-process transport answers them.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..events.runs import RunList, RunSummary
from ..mcp import servers_of
from . import reads
from .answers import (
    events_expired,
    models_json,
    run_summaries,
    run_summary,
    session_json,
    session_snapshot,
)

if TYPE_CHECKING:
    from .manager import Runtime

__all__ = ["QUERIES", "Param", "Query", "query_named"]

Answer = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Param:
    """One query parameter."""

    name: str
    required: bool = True
    kind: str = "string"
    """Its JSON type."""


@dataclass(frozen=True, slots=True)
class Query:
    """One query of the run API, as every transport answers it."""

    name: str
    """The client's word for it."""
    route: str
    """The REST route under ``neta/api/`` (``GET``)."""
    answer: Callable[[Runtime, str, Mapping[str, str]], Coroutine[Any, Any, Answer]]
    """The answer for a principal, from parameters a transport checked against :attr:`params`."""
    summary: str
    """One line for the OpenAPI document."""
    params: tuple[Param, ...] = ()
    response: type[BaseModel] | None = None
    """The answer's model, when it has one."""
    settles: bool = False
    """A transport that can wait makes what was appended durable first (see ``lastSeq``)."""


async def _status(runtime: Runtime, principal: str, params: Mapping[str, str]) -> Answer:
    run = await runtime.get_run(principal, params["requestId"])
    if await events_expired(runtime, run):
        return run_summary(run, -1, events_expired=True)
    return run_summary(run, await runtime.last_seq(run.request_id))


async def _runs(runtime: Runtime, principal: str, params: Mapping[str, str]) -> Answer:
    session_id = params.get("sessionId") or None
    return {"runs": await run_summaries(runtime, principal, session_id)}


async def _sessions(runtime: Runtime, principal: str, _params: Mapping[str, str]) -> Answer:
    return {"sessions": [session_json(s) for s in await reads.sessions(runtime, principal)]}


async def _tree(runtime: Runtime, principal: str, params: Mapping[str, str]) -> Answer:
    return await session_snapshot(runtime, principal, params["sessionId"])


async def _models(runtime: Runtime, _principal: str, _params: Mapping[str, str]) -> Answer:
    return models_json(runtime)


async def _mcp(runtime: Runtime, _principal: str, _params: Mapping[str, str]) -> Answer:
    servers = servers_of(runtime.tools)
    return servers.as_json() if servers else {"servers": [], "problems": []}


QUERIES: tuple[Query, ...] = (
    Query(
        "status",
        "agent/run/status",
        _status,
        "A run's status",
        (Param("requestId"),),
        response=RunSummary,
    ),
    Query(
        "runs",
        "agent/runs",
        _runs,
        "The caller's runs",
        (Param("sessionId", required=False),),
        response=RunList,
    ),
    Query("sessions", "sessions", _sessions, "The caller's sessions"),
    Query(
        "tree",
        "sessions/tree",
        _tree,
        "A session's tree and active path",
        (Param("sessionId"),),
        settles=True,
    ),
    Query("models", "models", _models, "Configured models"),
    Query("mcp", "mcp", _mcp, "MCP servers, their state and their tools"),
)
"""Every query of the run API answered from the runtime alone."""

_BY_NAME = {query.name: query for query in QUERIES}


def query_named(name: str) -> Query:
    """The query called ``name`` (a ``KeyError`` for none)."""
    return _BY_NAME[name]
