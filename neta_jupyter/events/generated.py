"""The event types and the union of bodies: generated from the bodies' declarations.

Written by ``python -m neta_jupyter.events --write`` from each body's ``event_types``
(:class:`~.wire.EventBody`); do not edit.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from .accounting import (
    BudgetData,
    LedgerData,
    TokenUsageData,
)
from .content import (
    ReasoningData,
    TextData,
)
from .crews import (
    CrewEscalationData,
    CrewIndexData,
    CrewLogData,
    CrewStatusData,
    CrewTaskData,
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
)
from .side import (
    AttachmentData,
    CompactionData,
    ProcessData,
    SkillData,
    TodoData,
)
from .subagents import (
    SubagentData,
)
from .tools import (
    ClarifyData,
    PermissionAskData,
    PermissionResolvedData,
    ToolData,
    ToolSideData,
)
from .tree import (
    SessionEntryData,
    SessionLeafData,
)


class EventType(StrEnum):
    """Every ``eventType`` the server emits (DESIGN §3)."""

    SESSION_CREATED = "SESSION_CREATED"
    """The run began: the first event of every run. Carries :class:`.SessionData`."""

    TEXT_START = "TEXT_START"
    """The answer's text began (with its first characters). Carries :class:`.TextData`."""

    TEXT_DELTA = "TEXT_DELTA"
    """More characters of the answer. Carries :class:`.TextData`."""

    TEXT_END = "TEXT_END"
    """The answer's text ended. Carries :class:`.TextData`."""

    REASONING_START = "REASONING_START"
    """The model's reasoning began. Carries :class:`.ReasoningData`."""

    REASONING_DELTA = "REASONING_DELTA"
    """More characters of the reasoning. Carries :class:`.ReasoningData`."""

    REASONING_END = "REASONING_END"
    """The reasoning ended. Carries :class:`.ReasoningData`."""

    TOOL_CALL_GENERATING = "TOOL_CALL_GENERATING"
    """The model is writing a tool call. Carries :class:`.ToolData`."""

    TOOL_START = "TOOL_START"
    """A tool call is about to run. Carries :class:`.ToolData`."""

    TOOL_RUNNING = "TOOL_RUNNING"
    """A tool call is running. Carries :class:`.ToolData`."""

    TOOL_COMPLETED = "TOOL_COMPLETED"
    """A tool call ended with its result. Carries :class:`.ToolData`."""

    TOOL_FAILED = "TOOL_FAILED"
    """A tool call failed, was refused or denied. Carries :class:`.ToolData`."""

    TOOL_EVENT = "TOOL_EVENT"
    """Something a running tool did (an output, a cell changed). Carries :class:`.ToolSideData`."""

    PERMISSION_ASK = "PERMISSION_ASK"
    """A tool call waits for a person's approval. Carries :class:`.PermissionAskData`."""

    PERMISSION_ASK_RESOLVED = "PERMISSION_ASK_RESOLVED"
    """The approval was decided. Carries :class:`.PermissionResolvedData`."""

    MESSAGE_COMPLETED = "MESSAGE_COMPLETED"
    """The run answered (terminal). Carries :class:`.MessageData`."""

    MESSAGE_SUSPENDED = "MESSAGE_SUSPENDED"
    """The run waits for someone or something (terminal). Carries :class:`.MessageData`."""

    MESSAGE_FAILED = "MESSAGE_FAILED"
    """The run failed (terminal). Carries :class:`.MessageData`."""

    ATTACHMENT_CHANGED = "ATTACHMENT_CHANGED"
    """An attachment of the run was added or changed. Carries :class:`.AttachmentData`."""

    ATTACHMENT_SENT = "ATTACHMENT_SENT"
    """An attachment was sent to the model. Carries :class:`.AttachmentData`."""

    SUPPLEMENTARY_INPUT_CONSUMED = "SUPPLEMENTARY_INPUT_CONSUMED"
    """Input added while the run ran was given to the model. Carries
    :class:`.SupplementaryInputData`."""

    HEARTBEAT = "HEARTBEAT"
    """Keep-alive of a quiet stream; never stored, has no seq. Carries :class:`.HeartbeatData`."""

    AGENT_STATUS = "AGENT_STATUS"
    """A transient signal of the runtime, shown as a toast. Carries :class:`.AgentStatusData`."""

    PROCESS_EVENT = "PROCESS_EVENT"
    """A process the run started (a tool's server, a command) said something. Carries
    :class:`.ProcessData`."""

    BUDGET_CHECKED = "BUDGET_CHECKED"
    """The request was checked against the token budget before a model call. Carries
    :class:`.BudgetData`."""

    LEDGER_RECONCILED = "LEDGER_RECONCILED"
    """A model call's usage was settled against the run's ledger. Carries :class:`.LedgerData`."""

    TOKEN_USAGE = "TOKEN_USAGE"
    """Tokens a model call used, and the run's total so far. Carries :class:`.TokenUsageData`."""

    COMPACTION_START = "COMPACTION_START"
    """Older turns are being summarised. Carries :class:`.CompactionData`."""

    COMPACTION_APPLIED = "COMPACTION_APPLIED"
    """The summary replaced the older turns. Carries :class:`.CompactionData`."""

    COMPACTION_ERROR = "COMPACTION_ERROR"
    """The summary could not be made. Carries :class:`.CompactionData`."""

    SKILL_ACTIVATED = "SKILL_ACTIVATED"
    """A skill's instructions were given to the model. Carries :class:`.SkillData`."""

    SKILL_DEACTIVATED = "SKILL_DEACTIVATED"
    """A skill's instructions were taken away. Carries :class:`.SkillData`."""

    SKILL_MISSING = "SKILL_MISSING"
    """A skill that was named could not be found. Carries :class:`.SkillData`."""

    CLARIFY_REQUEST = "CLARIFY_REQUEST"
    """The model asks the person a question. Carries :class:`.ClarifyData`."""

    TODO_UPDATE = "TODO_UPDATE"
    """The run's to-do list, whole, as it is now. Carries :class:`.TodoData`."""

    SUBAGENT_RUN_STARTED = "SUBAGENT_RUN_STARTED"
    """A sub-agent's run began. Carries :class:`.SubagentData`."""

    SUBAGENT_EVENT = "SUBAGENT_EVENT"
    """A sub-agent's run moved on. Carries :class:`.SubagentData`."""

    SUBAGENT_RUN_COMPLETED = "SUBAGENT_RUN_COMPLETED"
    """A sub-agent's run ended. Carries :class:`.SubagentData`."""

    SESSION_ENTRY_ADDED = "SESSION_ENTRY_ADDED"
    """An entry was added to the session tree. Carries :class:`.SessionEntryData`."""

    SESSION_ENTRY_UPDATED = "SESSION_ENTRY_UPDATED"
    """An entry of the session tree changed. Carries :class:`.SessionEntryData`."""

    SESSION_LEAF_CHANGED = "SESSION_LEAF_CHANGED"
    """The session tree's current leaf moved. Carries :class:`.SessionLeafData`."""

    PHASE_CHANGED = "PHASE_CHANGED"
    """The loop moved to another phase. Carries :class:`.PhaseData`."""

    PROGRESS_EVALUATED = "PROGRESS_EVALUATED"
    """After a model step: whether the run got anywhere. Carries :class:`.ProgressData`."""

    STOP_REASON_DECIDED = "STOP_REASON_DECIDED"
    """Why the loop ended; the terminal event follows. Carries :class:`.StopReasonData`."""

    CREW_RUN_STATUS = "crew:run:status"
    """A crew's status changed (its stream's first event says how it began). Carries
    :class:`.CrewStatusData`."""

    CREW_INDEX = "crew:index"
    """A crew was made, or has ended (in the index of crews, not its own stream). Carries
    :class:`.CrewIndexData`."""

    CREW_TASK_STATUS = "crew:task:status"
    """A crew's task changed: all of its state, as it is now. Carries :class:`.CrewTaskData`."""

    CREW_ESCALATION = "crew:escalation"
    """A crew waits for a person's decision, or it was decided. Carries
    :class:`.CrewEscalationData`."""

    CREW_LOG = "crew:log"
    """A line of a crew's log. Carries :class:`.CrewLogData`."""


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
    | StopReasonData
    | CrewStatusData
    | CrewIndexData
    | CrewTaskData
    | CrewEscalationData
    | CrewLogData,
    Field(discriminator="type"),
]
"""An event's body, by ``data.type``."""
