"""Records of runs, sessions, the session tree, supplementary inputs and attachments.

What each holds. The record store every part of the runtime writes them through, over any
backend, is :class:`~neta_jupyter.store.record_store.RecordStore`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

RunStatus = Literal["running", "suspended", "completed", "failed"]
EntryRole = Literal["user", "assistant", "tool", "summary", "subagent"]
"""``subagent``: a child run a run delegated to, and what became of it (its message holds the
child's ``childRequestId``); the child's own entries hang below it."""


def new_id(prefix: str) -> str:
    """A short random id with a readable prefix."""
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


@dataclass(slots=True)
class RunRecord:
    """One run (one requestId)."""

    request_id: str
    principal: str
    session_id: str
    status: RunStatus
    model: str
    created: float
    prompt: str = ""
    imported: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    """What the run was started with: the runtime's ``RunOptions`` as a JSON document (with its
    ``version``; the store never reads it)."""
    state: dict[str, Any] = field(default_factory=dict)
    """Where its loop is: the runtime's ``RunState`` as a JSON document (likewise)."""
    parent_request_id: str | None = None
    """The run that started this one as a sub-agent (``None`` for a run a user started)."""


UNREADABLE = "__unreadable__"
"""The key of the document a backend reads for a stored document that is not a JSON object,
holding why: the runtime then refuses the run (RUN_SNAPSHOT_INVALID) instead of every query of
runs failing on it."""


def newest_matching(
    runs: Iterable[RunRecord],
    *,
    principal: str | None,
    session_id: str | None,
    status: RunStatus | None,
    parent_request_id: str | None,
    limit: int,
) -> list[RunRecord]:
    """The runs matching every filter given (None: any), newest first, at most ``limit``."""
    found = [
        run
        for run in runs
        if run_matches(
            run,
            principal=principal,
            session_id=session_id,
            status=status,
            parent_request_id=parent_request_id,
        )
    ]
    found.sort(key=lambda run: run.created, reverse=True)
    return found[:limit]


def run_matches(
    run: RunRecord,
    *,
    principal: str | None,
    session_id: str | None,
    status: RunStatus | None,
    parent_request_id: str | None,
) -> bool:
    """Whether ``run`` matches every filter given (None: any)."""
    return (
        principal in (None, run.principal)
        and session_id in (None, run.session_id)
        and status in (None, run.status)
        and parent_request_id in (None, run.parent_request_id)
    )


@dataclass(slots=True)
class SessionRecord:
    """A conversation: a tree of entries with a current leaf."""

    session_id: str
    principal: str
    name: str
    created: float
    leaf_entry_id: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    has_unknown_usage: bool = False
    always_allow: list[str] = field(default_factory=list)
    todo: list[dict[str, Any]] = field(default_factory=list)
    thinking_level: str | None = None
    """How hard the model thinks in this session's runs (``None``: the endpoint's default)."""


@dataclass(slots=True)
class Entry:
    """A node of the session tree: one message."""

    entry_id: str
    session_id: str
    parent_id: str | None
    role: EntryRole
    message: dict[str, Any]
    request_id: str | None
    created: float


@dataclass(slots=True)
class AttachmentRecord:
    """A stored file and who may download it."""

    attachment_id: str
    principal: str
    session_id: str
    request_id: str
    virtual_path: str
    file_name: str
    content_type: str
    file_size: int
    disk_path: str
    """Where the bytes are: relative to the attachment directory (absolute in older records)."""
