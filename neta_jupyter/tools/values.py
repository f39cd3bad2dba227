"""The values a tool exchanges with its run: its result and files, its failure, a sub-agent's task.

They are plain data, so the run's scope (:mod:`.scope`), the registry and the tools can all name
them without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field


class ToolError(Exception):
    """A tool could not do what was asked; the message is shown to the user and the model."""


@dataclass(frozen=True, slots=True)
class ToolFile:
    """A file a tool produced; the runtime stores it as an attachment."""

    name: str
    content: bytes
    content_type: str
    sent: bool = False
    """Handed to the user (ATTACHMENT_SENT) rather than only stored (ATTACHMENT_CHANGED)."""


@dataclass(slots=True)
class ToolResult:
    """What a tool returns: text for the model, files for the user."""

    output: str
    files: list[ToolFile] = field(default_factory=list)
    images: list[ToolFile] = field(default_factory=list)
    """Images to show in the tool card (also stored as attachments)."""


class SubTask(BaseModel):
    """One part of the work, for one sub-agent."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=8000, description="what this sub-agent must do")
    name: str | None = Field(
        default=None, max_length=80, description="a short name for it, e.g. the file it handles"
    )
    role: str | None = Field(
        default=None,
        max_length=4000,
        description="a role prompt: who the sub-agent is and how it should work",
    )
    tools: list[str] | None = Field(
        default=None, description="the tools it may use (default: the same as yours)"
    )
    model: str | None = Field(default=None, description="the model it runs on (default: yours)")
    max_steps: int | None = Field(
        default=None, ge=1, le=50, description="model replies it may make at most"
    )
