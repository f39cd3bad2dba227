"""The public event catalogue: one small model per ``data.type``, inside the seed-003 envelope.

Names here are the wire contract. Types, codes and fields are only ever added, never renamed
or removed; every client ignores what it does not know.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .decisions import PhaseData, ProgressData, StopReasonData


class _Wire(BaseModel):
    """Base of wire models: camelCase on the wire, snake_case in Python, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class EventType(StrEnum):
    """Every ``eventType`` the server emits (DESIGN §3)."""

    SESSION_CREATED = "SESSION_CREATED"
    TEXT_START = "TEXT_START"
    TEXT_DELTA = "TEXT_DELTA"
    TEXT_END = "TEXT_END"
    REASONING_START = "REASONING_START"
    REASONING_DELTA = "REASONING_DELTA"
    REASONING_END = "REASONING_END"
    TOOL_CALL_GENERATING = "TOOL_CALL_GENERATING"
    TOOL_START = "TOOL_START"
    TOOL_RUNNING = "TOOL_RUNNING"
    TOOL_COMPLETED = "TOOL_COMPLETED"
    TOOL_FAILED = "TOOL_FAILED"
    TOOL_EVENT = "TOOL_EVENT"
    PERMISSION_ASK = "PERMISSION_ASK"
    PERMISSION_ASK_RESOLVED = "PERMISSION_ASK_RESOLVED"
    MESSAGE_COMPLETED = "MESSAGE_COMPLETED"
    MESSAGE_SUSPENDED = "MESSAGE_SUSPENDED"
    MESSAGE_FAILED = "MESSAGE_FAILED"
    ATTACHMENT_CHANGED = "ATTACHMENT_CHANGED"
    ATTACHMENT_SENT = "ATTACHMENT_SENT"
    SUPPLEMENTARY_INPUT_CONSUMED = "SUPPLEMENTARY_INPUT_CONSUMED"
    HEARTBEAT = "HEARTBEAT"
    AGENT_STATUS = "AGENT_STATUS"
    PROCESS_EVENT = "PROCESS_EVENT"
    BUDGET_CHECKED = "BUDGET_CHECKED"
    LEDGER_RECONCILED = "LEDGER_RECONCILED"
    TOKEN_USAGE = "TOKEN_USAGE"
    COMPACTION_START = "COMPACTION_START"
    COMPACTION_APPLIED = "COMPACTION_APPLIED"
    COMPACTION_ERROR = "COMPACTION_ERROR"
    SKILL_ACTIVATED = "SKILL_ACTIVATED"
    SKILL_DEACTIVATED = "SKILL_DEACTIVATED"
    SKILL_MISSING = "SKILL_MISSING"
    CLARIFY_REQUEST = "CLARIFY_REQUEST"
    TODO_UPDATE = "TODO_UPDATE"
    SUBAGENT_RUN_STARTED = "SUBAGENT_RUN_STARTED"
    SUBAGENT_EVENT = "SUBAGENT_EVENT"
    SUBAGENT_RUN_COMPLETED = "SUBAGENT_RUN_COMPLETED"
    SESSION_ENTRY_ADDED = "SESSION_ENTRY_ADDED"
    SESSION_ENTRY_UPDATED = "SESSION_ENTRY_UPDATED"
    SESSION_LEAF_CHANGED = "SESSION_LEAF_CHANGED"
    PHASE_CHANGED = "PHASE_CHANGED"
    PROGRESS_EVALUATED = "PROGRESS_EVALUATED"
    STOP_REASON_DECIDED = "STOP_REASON_DECIDED"


TERMINAL_EVENT_TYPES = frozenset(
    {EventType.MESSAGE_COMPLETED, EventType.MESSAGE_SUSPENDED, EventType.MESSAGE_FAILED}
)


class ErrorCode(StrEnum):
    """``MESSAGE_FAILED.errorCode`` values (seed 003 §5)."""

    LLM_ERROR = "LLM_ERROR"
    LLM_INVALID_REQUEST = "LLM_INVALID_REQUEST"
    TOOL_FAILED = "TOOL_FAILED"
    TASK_TIMEOUT = "TASK_TIMEOUT"
    SYSTEM_CRASH = "SYSTEM_CRASH"
    USER_CANCELLED = "USER_CANCELLED"
    USER_NO_RESPONSE = "USER_NO_RESPONSE"
    RUN_SNAPSHOT_INVALID = "RUN_SNAPSHOT_INVALID"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    ATTACHMENT_IMPORT_FAILED = "ATTACHMENT_IMPORT_FAILED"
    """An attached URL could not be downloaded (recoverable when the server failed or was slow)."""


class SuspendType(StrEnum):
    """``MESSAGE_SUSPENDED.suspendReason.type`` values (seed 003 §3), plus clarify (seed 002)."""

    PERMISSION_ASK = "PERMISSION_ASK"
    MANUAL_SUSPEND = "MANUAL_SUSPEND"
    SHUTDOWN_INTERRUPT = "SHUTDOWN_INTERRUPT"
    ASYNC_TOOL_PENDING = "ASYNC_TOOL_PENDING"
    CLARIFY_REQUEST = "CLARIFY_REQUEST"


class FinishReason(StrEnum):
    """``MESSAGE_COMPLETED.finishReason`` values."""

    STOP = "STOP"
    MAX_STEPS = "MAX_STEPS"
    REPEATED_TOOL_CALLS = "REPEATED_TOOL_CALLS"
    """The model kept making the same tool calls after it was told they would not change."""


class StatusCode(StrEnum):
    """``AGENT_STATUS.code`` values (seed 003 §4)."""

    IMPORTING_ATTACHMENTS = "IMPORTING_ATTACHMENTS"
    LLM_RATE_LIMITED = "LLM_RATE_LIMITED"
    LLM_NETWORK_RETRYING = "LLM_NETWORK_RETRYING"
    LLM_AUTO_RECOVERING = "LLM_AUTO_RECOVERING"
    LLM_EMPTY_RESPONSE_RETRYING = "LLM_EMPTY_RESPONSE_RETRYING"
    CONTEXT_COMPACTING = "CONTEXT_COMPACTING"
    TOOL_CONSECUTIVE_FAILURES = "TOOL_CONSECUTIVE_FAILURES"
    TOOL_REPEATED_CALLS = "TOOL_REPEATED_CALLS"
    STORAGE_UNAVAILABLE = "STORAGE_UNAVAILABLE"
    """The server cannot save the run's events (a full disk): the stream is quiet until it can.

    Sent live only, without a seq, like HEARTBEAT: it is about the server, not the run."""


# --- data bodies, one per data.type -------------------------------------------------------


class SessionData(_Wire):
    """First event of a run: where its messages live."""

    type: Literal["session"] = "session"
    session_id: str
    """Session the run belongs to."""
    user_message_id: str | None = None
    """Entry id of this turn's user message."""
    assistant_message_id: str | None = None
    """Entry id reserved for this turn's assistant message."""


class TextData(_Wire):
    """Answer text: the initial text on START, an increment on DELTA, nothing on END."""

    type: Literal["text"] = "text"
    text: str = ""
    """Initial text (START) or increment (DELTA)."""
    synthetic: bool | None = None
    """True when the system wrote the text (START only)."""
    continues: bool | None = None
    """True when the segment goes on with the text segment before it (START only): the same
    reply, picked up again after it was cut off (a dropped stream, a server restart)."""
    replaces: bool | None = None
    """True when the segment takes the place of the text segment before it (START only): a reply
    that was cut off, asked for again, came out differently; clients drop the cut-off text."""


class ReasoningData(_Wire):
    """Reasoning text, shown apart from the answer."""

    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    """Initial text (START) or increment (DELTA)."""
    continues: bool | None = None
    """As ``TextData.continues``, for the reasoning segment before it."""
    replaces: bool | None = None
    """As ``TextData.replaces``, for the reasoning segment before it."""


class ToolData(_Wire):
    """One tool call's lifecycle, keyed by ``toolCallId``."""

    type: Literal["tool"] = "tool"
    tool_call_id: str
    """Shared by every event of one call."""
    tool_name: str | None = None
    """Tool name (first GENERATING frame and later events)."""
    title: str | None = None
    """Progress title (TOOL_RUNNING)."""
    arguments: str | None = None
    """Argument JSON: a fragment on GENERATING, the whole object on START."""
    output: str | None = None
    """Result text (TOOL_COMPLETED), truncated past the event size limit."""
    error_message: str | None = None
    """Why it failed (TOOL_FAILED)."""
    duration_ms: int | None = None
    """Execution time (COMPLETED / FAILED)."""
    truncated: bool | None = None
    """True when ``output`` was cut; ``outputRef`` points at the whole."""
    output_ref: str | None = None
    """Virtual path of the full output when truncated."""
    images: list[str] | None = None
    """Virtual paths of images the tool produced (download via the attachment API)."""


class ToolSideData(_Wire):
    """Side-channel structured information during a tool's execution."""

    type: Literal["tool_side"] = "tool_side"
    tool_call_id: str
    """The call it belongs to."""
    tool_name: str | None = None
    """Tool name."""
    category: str
    """``auth_required``, ``tool_stream_data``, … (unknown ones are ignored)."""
    payload: dict[str, Any] | None = None
    """Category-specific data."""
    user_message: str | None = None
    """A friendly message to show."""


class PermissionAskData(_Wire):
    """A tool call waits for the user's decision; ``MESSAGE_SUSPENDED`` follows."""

    type: Literal["permission_ask"] = "permission_ask"
    ask_id: str
    """Pass it back to ``resumeTask``."""
    principal_id: str | None = None
    """The user the run belongs to."""
    tool_name: str
    """Tool to be run."""
    tool_call_id: str
    """Call awaiting the decision."""
    arguments: str
    """Argument JSON that would run."""
    rule_description: str | None = None
    """Human description of the rule that matched."""
    rule_pattern: str | None = None
    """The pattern of the rule that matched."""


class PermissionResolvedData(_Wire):
    """The decision on a permission ask."""

    type: Literal["permission_ask_resolved"] = "permission_ask_resolved"
    ask_id: str
    """The ask decided."""
    approved: bool
    """Whether the call may run."""
    reason: str | None = None
    """Why (e.g. ``user``, ``always_allow``)."""
    resolve_type: str | None = None
    """``once`` or ``always``."""


class SuspendReason(_Wire):
    """Why a run is suspended and what resumes it."""

    type: str
    """A :class:`SuspendType` value."""
    ask_id: str | None = None
    """Pending permission ask or clarify id."""
    message: str | None = None
    """Human explanation."""


class Usage(_Wire):
    """Token usage of this assistant message (seed 003 §1)."""

    prompt_tokens: int = 0
    """Input tokens."""
    completion_tokens: int = 0
    """Output tokens."""
    cached_tokens: int = 0
    """Input tokens served from the provider's cache."""
    reasoning_tokens: int = 0
    """Output tokens spent on reasoning."""
    total_tokens: int = 0
    """Input plus output."""


class MessageData(_Wire):
    """Terminal events: completed, suspended or failed."""

    type: Literal["message"] = "message"
    message_id: str | None = None
    """Assistant message id."""
    finish_reason: str | None = None
    """``STOP`` or ``MAX_STEPS`` (COMPLETED)."""
    finish_message: str | None = None
    """Text of the finish reason (COMPLETED)."""
    error_message: str | None = None
    """What went wrong (FAILED)."""
    error_code: str | None = None
    """An :class:`ErrorCode` (FAILED)."""
    recoverable: bool | None = None
    """``retryTask`` can continue from the failure point (FAILED)."""
    network_error: bool | None = None
    """Transient network failure (FAILED)."""
    suspend_reason: SuspendReason | None = None
    """Why the run waits (SUSPENDED)."""
    usage: Usage | None = None
    """Usage snapshot of the assistant message."""


class AttachmentData(_Wire):
    """A file the agent produced or the user uploaded."""

    type: Literal["attachment"] = "attachment"
    attachment_id: str
    """Attachment id."""
    session_id: str
    """Session it belongs to."""
    message_id: str | None = None
    """Message it belongs to."""
    file_name: str
    """File name."""
    file_extension: str
    """Extension without the dot."""
    content_type: str
    """MIME type."""
    file_size: int
    """Size in bytes."""
    virtual_path: str
    """Pass to the download endpoint."""
    source: Literal["USER_UPLOAD", "AGENT_GENERATED"] = "AGENT_GENERATED"
    """Who produced it."""
    change_type: Literal["CREATED", "UPDATED"] = "CREATED"
    """New file or overwritten content."""


class SupplementaryInputData(_Wire):
    """Input added while running, injected at a step boundary."""

    type: Literal["supplementary_input"] = "supplementary_input"
    input_id: str
    """Id returned by ``addSupplementaryInput``."""
    content: str
    """The text injected."""
    user_message_id: str | None = None
    """Entry id of the user message it became."""
    assistant_message_id: str | None = None
    """Assistant message it informs."""
    attachment_ids: list[str] = Field(default_factory=list)
    """Attachments injected with it."""


class HeartbeatData(_Wire):
    """Keep-alive; carries no id and is never stored."""

    type: Literal["heartbeat"] = "heartbeat"


class AgentStatusData(_Wire):
    """A transient runtime signal: show as a toast, never in the transcript."""

    type: Literal["agent_status"] = "agent_status"
    code: str
    """A :class:`StatusCode` (unknown ones are ignored)."""
    level: Literal["INFO", "WARN", "ERROR"] = "INFO"
    """Severity."""
    message: str = ""
    """Text to show."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Code-specific attributes."""


class ProcessData(_Wire):
    """Progress of a long tool, skill or runtime operation (seed 000)."""

    type: Literal["process"] = "process"
    operation_id: str
    """Stable id of the operation."""
    parent_operation_id: str | None = None
    """Enclosing operation."""
    target_type: Literal["tool", "skill", "subagent", "task", "runtime"] = "tool"
    """What the operation is."""
    source: Literal["skill", "tool", "subagent", "runtime"] = "tool"
    """Who emitted it."""
    stage: str | None = None
    """Stage name."""
    status: Literal["queued", "started", "running", "completed", "failed", "cancelled", "skipped"]
    """Operation status."""
    level: Literal["debug", "info", "warning", "error"] = "info"
    """Severity."""
    message: str | None = None
    """Text to show."""
    current: float | None = None
    """Progress so far."""
    total: float | None = None
    """Progress target."""
    percent: float | None = None
    """Progress in percent."""
    tool_call_id: str | None = None
    """Tool call that runs the operation."""
    payload: dict[str, Any] | None = None
    """Sanitised, truncated details."""


class BudgetData(_Wire):
    """Budget decision before a provider request (seed 004)."""

    type: Literal["budget"] = "budget"
    attempt_seq: int
    """Provider attempt number within the run."""
    request_hash: str
    """Hash of the frozen request."""
    action: Literal["allow", "compact", "stop"]
    """Decision."""
    reason: str
    """Why."""
    estimated_input_tokens: int
    """Estimated input size."""
    prompt_budget: int
    """Input token budget."""
    estimate_source: str
    """``heuristic``, ``tokenizer`` or ``provider``."""
    estimate_gate_policy: Literal["gateable", "advisory"]
    """Whether the estimate may stop a run."""


class LedgerData(_Wire):
    """Usage reconciled after a provider attempt (seed 004)."""

    type: Literal["ledger"] = "ledger"
    attempt_seq: int
    """Provider attempt number."""
    request_hash: str
    """Hash of the request."""
    input_tokens: int
    """Input tokens."""
    input_source: Literal["observed", "estimated", "unknown"]
    """Where the input figure came from."""
    output_tokens: int
    """Output tokens."""
    output_source: Literal["observed", "estimated", "unknown"]
    """Where the output figure came from."""
    has_unknown_usage: bool
    """The session has had an attempt with unknown output usage."""


class TokenUsageData(_Wire):
    """Usage of a turn and of the session."""

    type: Literal["token_usage"] = "token_usage"
    input_tokens: int
    """Turn input tokens."""
    output_tokens: int
    """Turn output tokens."""
    input_source: str
    """Source of the input figure."""
    output_source: str
    """Source of the output figure."""
    has_unknown_usage: bool
    """Some usage of the session is unknown."""
    session_input_tokens: int
    """Session input total."""
    session_output_tokens: int
    """Session output total."""
    cached_tokens: int = 0
    """Turn cached input tokens."""
    reasoning_tokens: int = 0
    """Turn reasoning tokens."""
    subagent_request_id: str | None = None
    """The figures are a sub-agent's (this child run's whole usage), counted in this run's; the
    session totals already hold them."""


CompactionScope = Literal["in-loop", "turn-level", "manual", "reactive"]


class CompactionData(_Wire):
    """Context compaction progress."""

    type: Literal["compaction"] = "compaction"
    scope: CompactionScope = "in-loop"
    """What triggered it."""
    tokens_before: int | None = None
    """Estimated input before."""
    tokens_after: int | None = None
    """Estimated input after."""
    summary: str | None = None
    """The summary that replaced older turns (APPLIED)."""
    error_message: str | None = None
    """Why it failed (ERROR)."""


class SkillData(_Wire):
    """Skill lifecycle."""

    type: Literal["skill"] = "skill"
    skill_name: str
    """Skill name."""
    description: str | None = None
    """What it does."""
    operation_id: str | None = None
    """Process operation of its run."""
    message: str | None = None
    """Text to show."""


class ClarifyData(_Wire):
    """The agent asks the user a question; the run suspends until answered."""

    type: Literal["clarify"] = "clarify"
    clarify_id: str
    """Pass it back with the answer."""
    question: str
    """The question."""
    options: list[str] = Field(default_factory=list)
    """Suggested answers."""
    tool_call_id: str | None = None
    """The clarify tool call."""


class TodoItem(_Wire):
    """One todo entry."""

    id: str
    """Stable id."""
    content: str
    """What to do."""
    status: Literal["pending", "in_progress", "completed"] = "pending"
    """Progress."""


class TodoData(_Wire):
    """The agent's todo list, whole."""

    type: Literal["todo"] = "todo"
    items: list[TodoItem]
    """Every item, in order."""


SUBAGENT_ANSWER_PREVIEW = 2000
"""Characters of a child's answer the parent's stream carries; the child's own stream has all."""

SubagentStatus = Literal["queued", "running", "suspended", "completed", "failed"]
"""Where a child run is: ``queued`` (waiting for a free slot of the batch), ``running``,
``suspended`` (waiting for the user: its ``ask``), ``completed`` or ``failed``."""


class SubagentChild(_Wire):
    """One child run of a batch, as ``SUBAGENT_RUN_STARTED`` announces it."""

    request_id: str
    """The child run: follow its stream and act on it (resume, terminate) by this id."""
    agent_id: str | None = None
    """Its name within the batch (``SUBAGENT_EVENT.agentId``)."""
    task: str
    """What it was asked to do."""
    role: str | None = None
    """The role it plays (from its role prompt), when it was given one."""
    model: str | None = None
    """The model it runs on, when not the parent's."""
    status: SubagentStatus | None = None
    """Where it is at the start (``queued`` when the batch runs fewer at a time)."""


class SubagentData(_Wire):
    """Sub-agent batch lifecycle, in the parent run's stream.

    ``SUBAGENT_RUN_STARTED`` lists the ``children``; one ``SUBAGENT_EVENT`` follows per change of
    a child (``childRequestId`` and what changed); ``SUBAGENT_RUN_COMPLETED`` ends the batch.
    Each child is a full run with a stream of its own: what the parent's stream says of it is a
    bounded summary, and ``childRequestId`` is the reference to the whole.
    """

    type: Literal["subagent"] = "subagent"
    batch_id: str
    """Batch id."""
    agent_id: str | None = None
    """Sub-agent id (SUBAGENT_EVENT)."""
    status: str | None = None
    """Status text: a :data:`SubagentStatus` value on SUBAGENT_EVENT; the batch's outcome
    (``completed``, ``failed``, ``cancelled``) on SUBAGENT_RUN_COMPLETED."""
    message: str | None = None
    """Text to show: on SUBAGENT_EVENT, the child's live status line (what it is doing)."""
    payload: dict[str, Any] | None = None
    """Details."""
    children: list[SubagentChild] | None = None
    """The batch's child runs (SUBAGENT_RUN_STARTED)."""
    child_request_id: str | None = None
    """The child run this SUBAGENT_EVENT is about."""
    step: int | None = None
    """The child's step number."""
    total_tokens: int | None = None
    """Tokens the child has used so far."""
    duration_ms: int | None = None
    """How long the child has run so far (final once it ended)."""
    answer_preview: str | None = None
    """The start of the child's final answer (at most :data:`SUBAGENT_ANSWER_PREVIEW`
    characters; completed children)."""
    answer_truncated: bool | None = None
    """The answer is longer than ``answerPreview``: the child's stream has all of it."""
    error_code: str | None = None
    """Why the child failed (an :class:`ErrorCode` value)."""
    error_message: str | None = None
    """The child's failure, in words."""
    ask: Annotated[PermissionAskData | ClarifyData, Field(discriminator="type")] | None = None
    """What the suspended child waits for: its permission ask or its question, answered with
    ``resumeTask`` on ``childRequestId``. Absent once it moved on."""


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


class SessionEntryData(_Wire):
    """A node of the session tree was added (ADDED) or changed (UPDATED): the whole node."""

    type: Literal["session_entry"] = "session_entry"
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


class SessionLeafData(_Wire):
    """The session's current leaf moved: the conversation now continues from it."""

    type: Literal["session_leaf"] = "session_leaf"
    session_id: str
    """Session."""
    leaf_entry_id: str | None
    """New leaf."""
    previous_leaf_entry_id: str | None = None
    """Old leaf."""
    request_id: str | None = None
    """The run whose turn moved it; absent when it was switched through the API."""


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
