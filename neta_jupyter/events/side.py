"""Bodies of side events: what a run produces or goes through besides its reply.

Attachments, process progress, compaction, skills, the todo list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from .wire import EventBody, _Wire


class AttachmentData(EventBody):
    """A file the agent produced or the user uploaded."""

    type: Literal["attachment"] = "attachment"
    event_types: ClassVar[Mapping[str, str]] = {
        "ATTACHMENT_CHANGED": "An attachment of the run was added or changed.",
        "ATTACHMENT_SENT": "An attachment was sent to the model.",
    }
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


class ProcessData(EventBody):
    """Progress of a long tool, skill or runtime operation (seed 000)."""

    type: Literal["process"] = "process"
    event_types: ClassVar[Mapping[str, str]] = {
        "PROCESS_EVENT": "A process the run started (a tool's server, a command) said something.",
    }
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


CompactionScope = Literal["in-loop", "turn-level", "manual", "reactive"]


class CompactionData(EventBody):
    """Context compaction progress."""

    type: Literal["compaction"] = "compaction"
    event_types: ClassVar[Mapping[str, str]] = {
        "COMPACTION_START": "Older turns are being summarised.",
        "COMPACTION_APPLIED": "The summary replaced the older turns.",
        "COMPACTION_ERROR": "The summary could not be made.",
    }
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


class SkillData(EventBody):
    """Skill lifecycle."""

    type: Literal["skill"] = "skill"
    event_types: ClassVar[Mapping[str, str]] = {
        "SKILL_ACTIVATED": "A skill's instructions were given to the model.",
        "SKILL_DEACTIVATED": "A skill's instructions were taken away.",
        "SKILL_MISSING": "A skill that was named could not be found.",
    }
    skill_name: str
    """Skill name."""
    description: str | None = None
    """What it does."""
    operation_id: str | None = None
    """Process operation of its run."""
    message: str | None = None
    """Text to show."""


class TodoItem(_Wire):
    """One todo entry."""

    id: str
    """Stable id."""
    content: str
    """What to do."""
    status: Literal["pending", "in_progress", "completed"] = "pending"
    """Progress."""


class TodoData(EventBody):
    """The agent's todo list, whole."""

    type: Literal["todo"] = "todo"
    event_types: ClassVar[Mapping[str, str]] = {
        "TODO_UPDATE": "The run's to-do list, whole, as it is now.",
    }
    items: list[TodoItem]
    """Every item, in order."""
