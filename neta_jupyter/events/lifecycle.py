"""Bodies of a run's own lifecycle: its start and end, and what it says while it runs.

Its session, its terminal events, input added while it runs, keep-alives and transient status
signals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from .accounting import Usage
from .wire import EventBody, _Wire


class SessionData(EventBody):
    """First event of a run: where its messages live."""

    type: Literal["session"] = "session"
    event_types: ClassVar[Mapping[str, str]] = {
        "SESSION_CREATED": "The run began: the first event of every run.",
    }
    session_id: str
    """Session the run belongs to."""
    user_message_id: str | None = None
    """Entry id of this turn's user message."""
    assistant_message_id: str | None = None
    """Entry id reserved for this turn's assistant message."""


class SuspendReason(_Wire):
    """Why a run is suspended and what resumes it."""

    type: str
    """A :class:`SuspendType` value."""
    ask_id: str | None = None
    """Pending permission ask or clarify id."""
    message: str | None = None
    """Human explanation."""


class MessageData(EventBody):
    """Terminal events: completed, suspended or failed."""

    type: Literal["message"] = "message"
    event_types: ClassVar[Mapping[str, str]] = {
        "MESSAGE_COMPLETED": "The run answered (terminal).",
        "MESSAGE_SUSPENDED": "The run waits for someone or something (terminal).",
        "MESSAGE_FAILED": "The run failed (terminal).",
    }
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


class SupplementaryInputData(EventBody):
    """Input added while running, injected at a step boundary."""

    type: Literal["supplementary_input"] = "supplementary_input"
    event_types: ClassVar[Mapping[str, str]] = {
        "SUPPLEMENTARY_INPUT_CONSUMED": "Input added while the run ran was given to the model.",
    }
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


class HeartbeatData(EventBody):
    """Keep-alive; carries no id and is never stored."""

    type: Literal["heartbeat"] = "heartbeat"
    event_types: ClassVar[Mapping[str, str]] = {
        "HEARTBEAT": "Keep-alive of a quiet stream; never stored, has no seq.",
    }


class AgentStatusData(EventBody):
    """A transient runtime signal: show as a toast, never in the transcript."""

    type: Literal["agent_status"] = "agent_status"
    event_types: ClassVar[Mapping[str, str]] = {
        "AGENT_STATUS": "A transient signal of the runtime, shown as a toast.",
    }
    code: str
    """A :class:`StatusCode` (unknown ones are ignored)."""
    level: Literal["INFO", "WARN", "ERROR"] = "INFO"
    """Severity."""
    message: str = ""
    """Text to show."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Code-specific attributes."""
