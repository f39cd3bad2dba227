"""Bodies of the session tree: an entry added or changed, the leaf moved."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from .side import ProcessData
from .wire import EventBody, _Wire


class EntryToolCall(_Wire):
    """A tool call of an assistant entry, and how it ended."""

    tool_call_id: str
    """The call (``toolCallId`` of its TOOL_* events)."""
    tool_name: str
    """Tool called."""
    status: Literal["pending", "completed", "failed", "not_run"] = "pending"
    """``pending`` until its result is in the tree; ``failed`` also when it was refused or denied;
    ``not_run`` when the run ended before it ran."""
    arguments: str | None = None
    """The call's argument JSON (as its TOOL_START had it)."""
    duration_ms: int | None = None
    """How long it ran (as its TOOL_COMPLETED / TOOL_FAILED said)."""
    error_message: str | None = None
    """Why it failed."""
    output_ref: str | None = None
    """Virtual path of its whole output when the event had to cut it."""
    images: list[str] | None = None
    """Virtual paths of the images it produced."""
    mcp_server: str | None = None
    """The MCP server of the tool (as its TOOL_START said); absent for neta's own tools."""
    mcp_tool: str | None = None
    """The tool's own name on that server."""
    process: list[ProcessData] | None = None
    """Its process timeline, sampled: the last event of each stage of each operation."""
    process_logs: list[str] | None = None
    """Its full process logs (paths under the data dir, one JSONL file per operation)."""


class EntrySubagent(_Wire):
    """What a ``subagent`` entry's child run did, as its result came back to the parent."""

    status: str
    """``queued``, ``running``, ``suspended``, ``completed``, ``failed`` (or one added later)."""
    agent_id: str | None = None
    """The child's name in its batch."""
    task: str | None = None
    """What it was asked to do."""
    answer_preview: str | None = None
    """The start of its answer (at most :data:`SUBAGENT_ANSWER_PREVIEW` characters)."""
    answer_truncated: bool | None = None
    """True when its answer is longer (the child's own entries have all of it)."""
    error_code: str | None = None
    """Why it failed (an ``errorCode`` of MESSAGE_FAILED)."""


class SessionEntryData(EventBody):
    """A node of the session tree was added (ADDED) or changed (UPDATED): the whole node."""

    type: Literal["session_entry"] = "session_entry"
    event_types: ClassVar[Mapping[str, str]] = {
        "SESSION_ENTRY_ADDED": "An entry was added to the session tree.",
        "SESSION_ENTRY_UPDATED": "An entry of the session tree changed.",
    }
    session_id: str
    """Session."""
    entry_id: str
    """Entry id."""
    parent_id: str | None = None
    """Parent entry (None at the root)."""
    role: Literal["user", "assistant", "tool", "summary", "subagent"]
    """Who the entry is from; ``subagent``: a child run the run delegated a task to (the
    child's own entries hang below it)."""
    preview: str | None = None
    """First characters of its content."""
    request_id: str | None = None
    """The run the entry belongs to."""
    status: Literal["pending", "complete"] | None = None
    """``pending`` while some of an assistant entry's tool calls have no result (they run, or
    wait for the user); ``complete`` once the entry changes no more."""
    tool_calls: list[EntryToolCall] | None = None
    """An assistant entry's tool calls and how each ended so far."""
    child_request_id: str | None = None
    """A ``subagent`` entry's child run (``pending`` until that run has ended)."""
    subagent: EntrySubagent | None = None
    """A ``subagent`` entry's child run: its status and, once it ended, its result."""


class SessionLeafData(EventBody):
    """The session's current leaf moved: the conversation now continues from it."""

    type: Literal["session_leaf"] = "session_leaf"
    event_types: ClassVar[Mapping[str, str]] = {
        "SESSION_LEAF_CHANGED": "The session tree's current leaf moved.",
    }
    session_id: str
    """Session."""
    leaf_entry_id: str | None
    """New leaf."""
    previous_leaf_entry_id: str | None = None
    """Old leaf."""
    request_id: str | None = None
    """The run whose turn moved it; absent when it was switched through the API."""
