"""What starting and controlling a crew takes, as the REST API and the WebSocket receive it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..runtime.data.state import Approve
from .definition import CrewDefinition, checked
from .loading import parse_text


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class CrewRunRequest(_Body):
    """Start a crew: its definition (an object, or YAML/JSON text) and its inputs."""

    definition: dict[str, Any] | str
    inputs: dict[str, str] = Field(default_factory=dict)
    approve: Approve = "ask"
    """How its tasks' tool calls that need permission are decided (``ask``: escalated)."""

    def crew(self) -> CrewDefinition:
        """The checked definition (CrewDefinitionError naming the field otherwise)."""
        if isinstance(self.definition, str):
            return parse_text(self.definition)
        return checked(self.definition)


class CrewControlRequest(_Body):
    """``crew:control``: pause, resume, stop, retry, or decide an escalation."""

    request_id: str = Field(min_length=1)
    action: Literal["pause", "resume", "stop", "retry", "decide"]
    task_id: str | None = None
    """``retry``: this failed task only (default: every failed task)."""
    escalation_id: str | None = None
    decision: Literal["retry", "skip", "answer", "stop"] | None = None
    answer: str | None = Field(default=None, max_length=20_000)
    output: str | None = Field(default=None, max_length=100_000)
    """``skip``: the output the task's dependents get instead of its own."""
    approved: bool | None = None

    def fields(self) -> dict[str, Any]:
        """The control's own fields, as :meth:`Crews.control` takes them."""
        return self.model_dump(exclude={"request_id", "action"}, exclude_none=True)


class CrewRef(_Body):
    """A crew named by its requestId (a subscription may say where it was)."""

    request_id: str = Field(min_length=1)
    last_event_id: int | str | None = None
