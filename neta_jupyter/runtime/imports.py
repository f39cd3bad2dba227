"""History runs registered with their messages and no event stream (their stream answers 409).

A history run may bring the tool calls it made, as another system recorded them (arguments,
output, how each ended, how long it took, its process timeline): they join the session tree like
a live run's calls, so a view rebuilds the run — tool cards and timeline — from the tree alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..events import ProcessData
from ..store import new_id
from .activation.process import sanitize_payload
from .data.runs import Run, Runs
from .log.tree import CALL_META, CALL_OUTCOMES, SessionTree

MAX_IMPORTED_CALLS = 100
MAX_IMPORTED_PROCESS = 60


class ImportedCall(BaseModel):
    """One tool call of a history run."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    name: str = Field(min_length=1, max_length=64)
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: str = ""
    status: Literal["completed", "failed"] = "completed"
    duration_ms: int | None = Field(default=None, ge=0)
    error_message: str | None = None
    process: list[ProcessData] = Field(default_factory=list, max_length=MAX_IMPORTED_PROCESS)
    """Its process timeline (PROCESS_EVENT data), oldest first."""


ImportedCalls = Sequence[ImportedCall]


async def import_run(
    runs: Runs,
    tree: SessionTree,
    principal: str,
    session_name: str,
    prompt: str,
    answer: str,
    calls: ImportedCalls = (),
) -> Run:
    """Register a history run that has messages (and tool calls) but no event stream."""
    session = await runs.records.get_or_create_session(principal, session_name)
    run = Run(
        request_id=new_id("r"),
        principal=principal,
        session_id=session.session_id,
        status="completed",
        model="imported",
        created=time.time(),
        prompt=prompt,
        imported=True,
    )
    await runs.create(run)

    async def add(role: Any, message: dict[str, Any], parent: str | None) -> str:
        entry = await tree.add(
            session.session_id, role, message, request_id=run.request_id, parent_id=parent
        )
        return entry.entry_id

    leaf = await add("user", {"role": "user", "content": prompt}, session.leaf_entry_id)
    if calls:
        leaf = await _add_calls(add, calls, leaf)
    await add("assistant", {"role": "assistant", "content": answer}, leaf)
    return run


async def _add_calls(add: Any, calls: Sequence[ImportedCall], parent: str) -> str:
    """The assistant entry that made the calls, finished, and one result entry per call."""
    ids = [new_id("call") for _ in calls]
    reply = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": i, "name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}
            for i, c in zip(ids, calls, strict=True)
        ],
        CALL_OUTCOMES: {i: c.status for i, c in zip(ids, calls, strict=True)},
        CALL_META: {i: _meta(c, i) for i, c in zip(ids, calls, strict=True)},
    }
    leaf = await add("assistant", reply, parent)
    for call_id, call in zip(ids, calls, strict=True):
        result = {
            "role": "tool",
            "content": call.output,
            "tool_call_id": call_id,
            "name": call.name,
        }
        leaf = await add("tool", result, leaf)
    return str(leaf)


def _meta(call: ImportedCall, call_id: str) -> dict[str, Any]:
    process = [
        p.model_copy(
            update={"tool_call_id": call_id, "payload": sanitize_payload(p.payload or {}) or None}
        ).model_dump(mode="json", by_alias=True, exclude_none=True)
        for p in call.process
    ]
    meta = {
        "durationMs": call.duration_ms,
        "errorMessage": call.error_message if call.status == "failed" else None,
        "process": process or None,
    }
    return {k: v for k, v in meta.items() if v is not None}
