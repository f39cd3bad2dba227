"""The public event catalogue: one small model per ``data.type``, inside the seed-003 envelope.

Names here are the wire contract. Types, codes and fields are only ever added, never renamed
or removed; every client ignores what it does not know. The bodies live in modules by what they
are about, each naming the event types that carry it; the ``EventType`` enum and the union of
bodies are generated from those declarations (:mod:`.generate`). This module joins them into
the envelope and re-exports them.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import Field

from .accounting import (
    BudgetData,
    LedgerData,
    TokenUsageData,
    Usage,
)
from .codes import (
    ErrorCode,
    FinishReason,
    StatusCode,
    SuspendType,
)
from .content import (
    ReasoningData,
    TextData,
)
from .generated import EventData, EventType
from .lifecycle import (
    AgentStatusData,
    HeartbeatData,
    MessageData,
    SessionData,
    SupplementaryInputData,
    SuspendReason,
)
from .side import (
    AttachmentData,
    CompactionData,
    CompactionScope,
    ProcessData,
    SkillData,
    TodoData,
    TodoItem,
)
from .subagents import (
    SUBAGENT_ANSWER_PREVIEW,
    SubagentChild,
    SubagentData,
    SubagentStatus,
)
from .tools import (
    ClarifyData,
    PermissionAskData,
    PermissionResolvedData,
    ToolData,
    ToolSideData,
)
from .tree import (
    EntrySubagent,
    EntryToolCall,
    SessionEntryData,
    SessionLeafData,
)
from .wire import EventBody, _Wire

__all__ = [
    "DATA_TYPES",
    "SUBAGENT_ANSWER_PREVIEW",
    "TERMINAL_EVENT_TYPES",
    "AgentEvent",
    "AgentStatusData",
    "AttachmentData",
    "BudgetData",
    "ClarifyData",
    "CompactionData",
    "CompactionScope",
    "EntrySubagent",
    "EntryToolCall",
    "ErrorCode",
    "EventBody",
    "EventData",
    "EventType",
    "FinishReason",
    "HeartbeatData",
    "LedgerData",
    "MessageData",
    "PermissionAskData",
    "PermissionResolvedData",
    "ProcessData",
    "ReasoningData",
    "SessionData",
    "SessionEntryData",
    "SessionLeafData",
    "SkillData",
    "StatusCode",
    "SubagentChild",
    "SubagentData",
    "SubagentStatus",
    "SupplementaryInputData",
    "SuspendReason",
    "SuspendType",
    "TextData",
    "TodoData",
    "TodoItem",
    "TokenUsageData",
    "ToolData",
    "ToolSideData",
    "Usage",
    "now_iso",
]


TERMINAL_EVENT_TYPES = frozenset(
    {EventType.MESSAGE_COMPLETED, EventType.MESSAGE_SUSPENDED, EventType.MESSAGE_FAILED}
)
"""The event types a stream segment ends with: exactly one ends every activation of a run."""

DATA_TYPES: frozenset[str] = frozenset(
    m.model_fields["type"].default
    for m in EventData.__origin__.__args__  # type: ignore[attr-defined]
)


def now_iso() -> str:
    """UTC timestamp with milliseconds, as on the wire."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AgentEvent(_Wire):
    """The envelope every event travels in (seed 003 §1)."""

    event_type: EventType
    """Event type; equals the SSE ``event`` field."""
    seq: int | None = None
    """Position in the run's log, from 0; None only for HEARTBEAT."""
    request_id: str
    """The run."""
    data: EventData
    """Body, discriminated by ``data.type``."""
    timestamp: str = Field(default_factory=now_iso)
    """When the event was produced (UTC)."""
    step: int | None = None
    """Agent step number."""
    total_tokens: int | None = None
    """Tokens used by the run so far."""

    @property
    def is_terminal(self) -> bool:
        """Whether this event ends a stream segment."""
        return self.event_type in TERMINAL_EVENT_TYPES
