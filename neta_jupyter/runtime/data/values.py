"""Value types the run's state and steps hold: plain data, no behaviour that reaches outside.

The loop's behaviour (guards, the reply streamer, the budget, attachments, tool calls) works with
these values; keeping them here lets :mod:`.state` and :mod:`.steps` import nothing of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from ...providers.base import ToolCall, ToolDefinition, UsagePart

REPEAT_REMINDER = (
    "You made exactly the same tool call ({calls}) with the same arguments {count} times in a "
    "row; its result will not change. Do not call it again: answer the user from the results "
    "you already have, or try something different."
)


REPEAT_STOP_TEXT = (
    "I stopped here because I kept making the same tool call ({calls}) with the same arguments, "
    "{count} times in a row, without getting any further. Send a follow-up message to steer me."
)


class RepeatedCalls(BaseModel):
    """The calls of the latest step and how many steps in a row made exactly them."""

    signature: str = ""
    """The step's distinct calls, independent of order and JSON spacing."""
    count: int = 1
    """Steps in a row with that signature."""


class StepVerdict(BaseModel):
    """What happens to the calls of one reply."""

    step: int = 0
    """The step (model reply) it was decided for."""
    refused: dict[str, str] = Field(default_factory=dict)
    """Call id → why it is not run."""
    repeats: int = 1
    """Consecutive steps, this one included, that made exactly these calls."""
    remind: bool = False
    """Tell the model, with the next request, that it is repeating itself."""
    stop: bool = False
    """End the run after answering the calls (all refused)."""
    calls: str = ""
    """The repeated calls as the reminder names them."""

    def reminder(self) -> str:
        """The nudge for the model."""
        return REPEAT_REMINDER.format(calls=self.calls, count=self.repeats)

    def stop_text(self) -> str:
        """The synthetic answer of a run that ended for repeating itself."""
        return REPEAT_STOP_TEXT.format(calls=self.calls, count=self.repeats)


@dataclass(slots=True)
class Reply:
    """Everything one model reply produced."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: UsagePart | None = None
    cut: str | None = None
    """Why the reply was stopped before the model ended it (over a :class:`ReplyLimits`)."""

    @property
    def empty(self) -> bool:
        """No answer and no tool call: nothing the run can use."""
        return not self.text.strip() and not self.tool_calls

    def kept(self, step: int) -> KeptReply:
        """What the run's state keeps of a reply cut off (usage is not kept)."""
        return KeptReply(
            step=step, text=self.text, reasoning=self.reasoning, tool_calls=list(self.tool_calls)
        )


class KeptReply(BaseModel):
    """What clients saw of one step's reply before its activation ended."""

    step: int
    """The step (model reply) it belongs to."""
    text: str = ""
    """Answer text sent."""
    reasoning: str = ""
    """Reasoning text sent."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Tool calls sent, with the ids clients know them by."""

    def reply(self) -> Reply:
        """As a reply the next attempt continues."""
        return Reply(text=self.text, reasoning=self.reasoning, tool_calls=list(self.tool_calls))


@dataclass(frozen=True, slots=True)
class Estimate:
    """Estimated input tokens of a request and where the figure came from."""

    tokens: int
    source: str

    @property
    def gateable(self) -> bool:
        """A counted estimate may stop a run; a heuristic one only advises."""
        return self.source != "heuristic"


class AttachmentRef(BaseModel):
    """One attachment of a run request: an uploaded file's id, or a URL to import."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    attachment_id: str | None = None
    """An upload's id (``POST /neta/api/agent/attachment/upload``)."""
    url: str | None = None
    """An http(s) URL the server downloads when the run begins."""
    file_name: str | None = None
    """The name to store a URL's file under (default: the URL's last path segment)."""

    @model_validator(mode="after")
    def _one_source(self) -> AttachmentRef:
        if (self.attachment_id is None) == (self.url is None):
            raise ValueError("an attachment names either attachmentId or url")
        if self.url is not None and urlsplit(self.url).scheme not in ("http", "https"):
            raise ValueError(f"attachment url must be http:// or https://, not {self.url!r}")
        return self


class VirtualTool(BaseModel):
    """A tool the caller renders itself (seed 003 §8): never executed, answered with a mock."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )

    name: str
    """As the model calls it."""
    description: str = ""
    """As offered to the model."""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of its arguments (only their presence and JSON types are checked)."""
    mock_response: str | None = None
    """The tool's result for the model (``None``: a plain success receipt)."""

    @field_validator("parameters", mode="before")
    @classmethod
    def _object_schema(cls, value: Any) -> Any:
        return value or {"type": "object", "properties": {}}

    @property
    def definition(self) -> ToolDefinition:
        """As offered to the model."""
        return ToolDefinition(self.name, self.description, self.parameters)
