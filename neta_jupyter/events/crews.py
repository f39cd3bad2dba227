"""Bodies of a crew's events: its status, each task's state, its escalations, its log lines.

A crew's stream in the event log is keyed by the crew's requestId and numbered and followed like
a run's, in the same envelope. Its ``crew:task:status`` and ``crew:escalation`` events carry the
whole of what they describe, so folding the stream in order gives the crew back after a restart
(:mod:`neta_jupyter.crews.log`). The index of crews (the ``crews:index`` stream) says when each
was made and when it ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from .wire import EventBody, _Wire

CrewStatus = Literal["queued", "running", "paused", "waiting", "completed", "failed", "stopped"]
"""Where a crew is; ``completed``, ``failed`` and ``stopped`` end it (a retry may go on)."""

TaskStatus = Literal[
    "pending",
    "ready",
    "running",
    "waiting_approval",
    "retrying",
    "completed",
    "failed",
    "skipped",
]
"""Where a task is; ``completed`` and ``skipped`` give its dependents an output."""

EscalationKind = Literal[
    "task_failed", "question", "permission", "approval_before", "approval_after"
]
"""What a crew asks a person about."""

Decision = Literal["retry", "skip", "answer", "stop"]
"""How an escalation may be decided."""


class CrewStatusData(EventBody):
    """The crew's status, with counts of its tasks' statuses.

    The first of a crew's stream also carries what it was started with.
    """

    type: Literal["crew_status"] = "crew_status"
    event_types: ClassVar[Mapping[str, str]] = {
        "crew:run:status": "A crew's status changed (its stream's first event says how it began).",
    }
    status: CrewStatus
    """Where the crew is now."""
    message: str | None = None
    """Why, in words."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Tasks per status."""
    definition: dict[str, Any] | None = None
    """The crew's definition (first event only)."""
    inputs: dict[str, str] | None = None
    """The values of its inputs (first event only)."""
    principal: str | None = None
    """Who started it (first event only)."""
    created: float | None = None
    """When it was made, in seconds since the epoch (first event only)."""
    approve: str | None = None
    """``ask``, ``auto`` or ``deny``: what its tasks' runs do with a tool call that asks (first
    event only)."""


class CrewIndexData(EventBody):
    """An entry of the index of crews: how a restarted server finds them."""

    type: Literal["crew_index"] = "crew_index"
    event_types: ClassVar[Mapping[str, str]] = {
        "crew:index": "A crew was made, or has ended (in the index of crews, not its own stream).",
    }
    crew_id: str
    """The crew's requestId."""
    principal: str
    """Who started it."""
    ended: bool | None = None
    """It has ended: a restart need not look at it again."""


class CrewTaskUsage(_Wire):
    """Tokens of every attempt of a task."""

    prompt_tokens: int = 0
    """Prompt tokens."""
    completion_tokens: int = 0
    """Completion tokens."""
    total_tokens: int = 0
    """Both."""


class CrewTaskData(EventBody):
    """The whole of one task's state."""

    type: Literal["crew_task"] = "crew_task"
    event_types: ClassVar[Mapping[str, str]] = {
        "crew:task:status": "A crew's task changed: all of its state, as it is now.",
    }
    task_id: str
    """The task, as the definition names it."""
    agent: str
    """The agent that does it."""
    status: TaskStatus = "pending"
    """Where it is."""
    child_request_id: str | None = None
    """Its current attempt's child run."""
    attempt: int = 0
    """1 for the first attempt; retries count on."""
    child_request_ids: list[str] = Field(default_factory=list)
    """The child runs of every attempt."""
    started: float | None = None
    """When its first attempt started, in seconds since the epoch."""
    duration_ms: int | None = None
    """How long it took, once completed."""
    usage: CrewTaskUsage = Field(default_factory=CrewTaskUsage)
    """Tokens of every attempt."""
    output: str | None = None
    """Its output, once completed or skipped (at most 100,000 characters)."""
    error_code: str | None = None
    """Why its attempt failed (an ``ErrorCode``)."""
    error_message: str | None = None
    """Why, in words."""
    approved: bool = False
    """Its ``approval: before`` gate was passed."""
    note: str | None = None
    """What a person added when they had it retried."""


class CrewEscalationData(EventBody):
    """A decision the crew waits for, or how it was decided (retry, skip, answer or stop)."""

    type: Literal["crew_escalation"] = "crew_escalation"
    event_types: ClassVar[Mapping[str, str]] = {
        "crew:escalation": "A crew waits for a person's decision, or it was decided.",
    }
    escalation_id: str
    """The escalation."""
    task_id: str
    """The task it is about."""
    kind: EscalationKind
    """What it asks about."""
    message: str
    """The question, in words."""
    child_request_id: str | None = None
    """The task's run it is about."""
    ask_id: str | None = None
    """The ask of that run it passes on (a permission or a question)."""
    options: list[str] = Field(default_factory=list)
    """What may be decided."""
    state: Literal["open", "resolved"] = "open"
    """Waited for, or decided."""
    decision: Decision | None = None
    """How it was decided."""
    answer: str | None = None
    """The answer given."""
    output: str | None = None
    """The output given to a skipped task."""
    approved: bool | None = None
    """The decision on an approval."""


class CrewLogData(EventBody):
    """One bounded line of a crew's log, from its orchestrator or one of its tasks."""

    type: Literal["crew_log"] = "crew_log"
    event_types: ClassVar[Mapping[str, str]] = {
        "crew:log": "A line of a crew's log.",
    }
    source: str = "crew"
    """``crew``, or the task it is about."""
    level: str = "info"
    """``info``, ``warn`` or ``error``."""
    line: str
    """The line (at most 500 characters)."""
    at: float
    """When, in seconds since the epoch."""
