"""The catalogue's closed vocabularies: the codes events carry.

Values are the wire contract: only ever added, never renamed or removed; every client ignores
what it does not know.
"""

from __future__ import annotations

from enum import StrEnum


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
    REPLY_TOO_LONG = "REPLY_TOO_LONG"
    """The model's reply went past max_reply_tokens or max_reply_bytes and was stopped there."""


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
