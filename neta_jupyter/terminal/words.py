"""What both terminal displays say of an event, unstyled: each styles the words its own way.

The plain renderer (:mod:`neta_jupyter.cli_render`) and the live one (:mod:`.live`) tell a run
in the same words, so a log of a run reads like its live display.
"""

from __future__ import annotations

from collections.abc import Callable

from ..events import (
    AgentStatusData,
    AttachmentData,
    ErrorCode,
    EventType,
    MessageData,
    PermissionResolvedData,
    SuspendType,
)
from .text import clean, one_line, usage_text


def session_words(request_id: str, session_id: str) -> str:
    """The run's first line: which run, in which session."""
    return f"● run {request_id} · session {session_id}"


_FINISHED = {"STOP": "", "MAX_STEPS": "stopped at the step limit"}
"""How a completed run finished, in words (an answer, the usual end, needs none)."""
_PLAIN_STOP = ("the run was cancelled", "the run was stopped", "stopped by the user")
"""What the server says of a plain Stop: "stopped" says it already."""


def was_stopped(kind: EventType, data: MessageData) -> bool:
    """The run ended because it was stopped (Stop, or a prompt that took its place): no fault."""
    return kind == EventType.MESSAGE_FAILED and data.error_code == ErrorCode.USER_CANCELLED


def outcome_words(kind: EventType, data: MessageData, *, waiting: str) -> tuple[str, str]:
    """A terminal event as a headline and its secondary detail (the reason, the usage).

    ``waiting``: the word for a run that waits for someone (not for one the user paused).
    """
    usage = usage_text(data.usage)
    if kind == EventType.MESSAGE_COMPLETED:
        reason = data.finish_reason or "STOP"
        words = [_FINISHED.get(reason, reason), one_line(data.finish_message or "")]
        said = ": ".join(w for w in words if w)
        return "■ completed", (f" ({said})" if said else "") + usage
    if was_stopped(kind, data):
        message = one_line(data.error_message or "")
        why = f": {message}" if message and message.lower().rstrip(".") not in _PLAIN_STOP else ""
        return f"■ stopped{why}", usage
    if kind == EventType.MESSAGE_FAILED:
        hint = " (recoverable: retry it from the last step)" if data.recoverable else ""
        message = one_line(data.error_message or "the run failed")
        return f"✗ run failed [{data.error_code or 'ERROR'}]: {message}{hint}", usage
    suspend = data.suspend_reason
    why = suspend.type if suspend else "UNKNOWN"
    text = f": {one_line(suspend.message)}" if suspend and suspend.message else ""
    state = "paused" if why == SuspendType.MANUAL_SUSPEND else f"{waiting} ({why})"
    return f"⏸ {state}{text}", ""


def resolution_words(data: PermissionResolvedData) -> str:
    """The decision on a permission ask, indented under the ask."""
    if data.approved:
        always = " (always, for this session)" if data.resolve_type == "always" else ""
        return f"  approved{always}"
    return "  denied"


def attachment_words(kind: EventType, data: AttachmentData, locate: Callable[[str], str]) -> str:
    """A file of the run, and where the user can open it."""
    verb = "sent" if kind == EventType.ATTACHMENT_SENT else data.change_type.lower()
    where = clean(locate(data.virtual_path))
    return f"📎 {clean(data.file_name)} ({data.file_size} bytes, {verb}) → {where}"


def status_words(data: AgentStatusData) -> str:
    """A transient runtime signal, with its level."""
    return f"[{data.level}] {one_line(data.message or data.code)}"
