"""The run API's answers about runs and sessions, as JSON objects.

The server's handlers and the client's in-process transport answer with these, so a client reads
the same fields whether its runs live on a server or in its own process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .data.runs import events_expired as expired
from .errors import RunNotFound
from .log.tree import CALL_META, CALL_OUTCOMES, entry_data, session_stream

if TYPE_CHECKING:
    from ..store import Entry, SessionRecord
    from .data.runs import Run
    from .manager import Runtime

_TREE_ONLY = (CALL_OUTCOMES, CALL_META)
"""Keys of a message the tree keeps for itself: its ``toolCalls`` show them."""


def run_summary(run: Run, last_seq: int, *, events_expired: bool = False) -> dict[str, Any]:
    """What clients need to know about a run (:class:`~neta_jupyter.events.runs.RunSummary`)."""
    summary = run.summary(last_seq, events_expired=events_expired)
    return summary.model_dump(mode="json", by_alias=True)


async def events_expired(runtime: Runtime, run: Run) -> bool:
    """Whether the run's events were deleted once kept long enough after it ended."""
    return await expired(runtime.store.events, run)


async def run_summaries(
    runtime: Runtime, principal: str, session_id: str | None
) -> list[dict[str, Any]]:
    """The principal's runs (of one session when given), newest first."""
    return [
        run_summary(r, await runtime.last_seq(r.request_id))
        for r in await runtime.list_runs(principal, session_id)
    ]


def session_json(session: SessionRecord) -> dict[str, Any]:
    """A session as listed."""
    return {
        "sessionId": session.session_id,
        "name": session.name,
        "created": session.created,
        "leafEntryId": session.leaf_entry_id,
        "inputTokens": session.input_tokens,
        "outputTokens": session.output_tokens,
        "hasUnknownUsage": session.has_unknown_usage,
    }


def entry_json(entry: Entry) -> dict[str, Any]:
    """One entry of a session tree, with the status and tool calls its tree events show."""
    node = entry_data(entry)
    out: dict[str, Any] = {
        "entryId": entry.entry_id,
        "parentId": entry.parent_id,
        "role": entry.role,
        "message": {k: v for k, v in entry.message.items() if k not in _TREE_ONLY},
        "requestId": entry.request_id,
        "created": entry.created,
        "status": node.status,
    }
    if node.tool_calls:
        out["toolCalls"] = [
            c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in node.tool_calls
        ]
    if node.child_request_id:
        out["childRequestId"] = node.child_request_id
    if node.subagent is not None:
        out["subagent"] = node.subagent.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


async def session_snapshot(runtime: Runtime, principal: str, session_id: str) -> dict[str, Any]:
    """The session with its whole tree and active path; another principal's does not exist.

    ``lastSeq`` is the last event of the session's stream that the tree shows: a follower of the
    stream from it misses no change. A tree write is stored before its event is appended, so the
    events after it may repeat a change the tree already shows (applied in order, they change
    nothing); the fewer, the more of what was appended is durable (a transport flushes first).
    """
    records = runtime.store.records
    session = await records.get_session(session_id)
    if session is None or session.principal != principal:
        raise RunNotFound(f"no session with id {session_id!r}", code="SESSION_NOT_FOUND")
    path = await records.path(session_id, session.leaf_entry_id)
    return {
        **session_json(session),
        "entries": [entry_json(e) for e in await records.entries(session_id)],
        "activePath": [e.entry_id for e in path],
        "lastSeq": await runtime.last_seq(session_stream(session_id)),
    }


def models_json(runtime: Runtime) -> dict[str, Any]:
    """Configured models and the default."""
    return {"default": runtime.config.default_model, "models": runtime.models.names()}
