"""The public event catalogue: one small model per ``data.type``, inside the seed-003 envelope.

Names here are the wire contract. Types, codes and fields are only ever added, never renamed
or removed; every client ignores what it does not know. The bodies live in modules by what they
are about; this one joins them into the envelope and re-exports them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import Field

from .accounting import (
    BudgetData,
    LedgerData,
    TokenUsageData,
    Usage,
)
from .codes import (
    TERMINAL_EVENT_TYPES,
    ErrorCode,
    EventType,
    FinishReason,
    StatusCode,
    SuspendType,
)
from .content import (
    ReasoningData,
    TextData,
)
from .decisions import (
    PhaseData,
    ProgressData,
    StopReasonData,
)
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
from .wire import _Wire

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

EventData = Annotated[
    SessionData
    | TextData
    | ReasoningData
    | ToolData
    | ToolSideData
    | PermissionAskData
    | PermissionResolvedData
    | MessageData
    | AttachmentData
    | SupplementaryInputData
    | HeartbeatData
    | AgentStatusData
    | ProcessData
    | BudgetData
    | LedgerData
    | TokenUsageData
    | CompactionData
    | SkillData
    | ClarifyData
    | TodoData
    | SubagentData
    | SessionEntryData
    | SessionLeafData
    | PhaseData
    | ProgressData
    | StopReasonData,
    Field(discriminator="type"),
]

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
