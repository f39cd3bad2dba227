"""A crew run's durable log: its events, and the state they fold back into.

The crew's stream in the event log is keyed by its requestId, numbered and followed like a run's;
it is the crew's only record. Its events are of the event protocol (:mod:`neta_jupyter.events.crews`
declares their bodies) and are encoded by its encoder. Every ``crew:task:status`` and
``crew:escalation`` event carries the whole of what it describes, so folding the log in order
(:meth:`CrewState.apply`) gives the crew back exactly as it was after a restart.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..events import AgentEvent, EventData, EventType
from ..events.crews import (
    CrewEscalationData,
    CrewIndexData,
    CrewLogData,
    CrewStatus,
    CrewStatusData,
    CrewTaskData,
    CrewTaskUsage,
    Decision,
    EscalationKind,
    TaskStatus,
)
from ..events.encoding import envelope_rest
from ..store import EventLog, StoredEvent
from .definition import CrewDefinition

__all__ = [
    "CREW_EVENT_TYPES",
    "DONE_TASK",
    "ENDED_CREW",
    "ESCALATION",
    "INDEX",
    "INDEX_STREAM",
    "LOG",
    "RUN_STATUS",
    "TASK_STATUS",
    "CrewLog",
    "CrewState",
    "CrewStatus",
    "Decision",
    "Escalation",
    "EscalationKind",
    "TaskState",
    "TaskStatus",
    "TaskUsage",
    "load",
]

RUN_STATUS = EventType.CREW_RUN_STATUS
TASK_STATUS = EventType.CREW_TASK_STATUS
LOG = EventType.CREW_LOG
ESCALATION = EventType.CREW_ESCALATION
INDEX = EventType.CREW_INDEX
CREW_EVENT_TYPES = frozenset({RUN_STATUS, TASK_STATUS, LOG, ESCALATION})

INDEX_STREAM = "crews:index"
"""One ``crew:index`` per crew created, and one when it has ended: how a restarted server finds
the crews (entries before ``crew:index`` existed are ``crew:run:status`` events)."""

ENDED_CREW: frozenset[str] = frozenset({"completed", "failed", "stopped"})
DONE_TASK: frozenset[str] = frozenset({"completed", "skipped"})
"""A task whose output its dependents may use."""
MAX_LOG_LINE = 500
MAX_OUTPUT = 100_000

TaskUsage = CrewTaskUsage


class TaskState(CrewTaskData):
    """Where one task stands: what its ``crew:task:status`` events carry, changed in place."""

    model_config = ConfigDict(frozen=False)


class Escalation(CrewEscalationData):
    """A decision the crew waits for, changed in place once decided."""

    model_config = ConfigDict(frozen=False)


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class CrewState(_Model):
    """A crew run: what it was started with, and where it and each task stand."""

    request_id: str
    principal: str
    created: float
    definition: CrewDefinition
    inputs: dict[str, str]
    approve: str = "ask"
    status: CrewStatus = "queued"
    message: str | None = None
    tasks: dict[str, TaskState] = Field(default_factory=dict)
    escalations: dict[str, Escalation] = Field(default_factory=dict)
    seq: int = -1

    @property
    def ended(self) -> bool:
        """Completed, failed or stopped: nothing more happens unless retried."""
        return self.status in ENDED_CREW

    def counts(self) -> dict[str, int]:
        """Tasks per status."""
        out: dict[str, int] = {}
        for task in self.tasks.values():
            out[task.status] = out.get(task.status, 0) + 1
        return out

    def open_escalations(self) -> list[Escalation]:
        """The decisions still waited for."""
        return [e for e in self.escalations.values() if e.state == "open"]

    def apply(self, event: StoredEvent) -> None:
        """Fold in one event of the crew's log."""
        self.seq = event.seq
        data = json.loads(event.payload).get("data") or {}
        if event.event_type == RUN_STATUS:
            self.status, self.message = data["status"], data.get("message")
        elif event.event_type == TASK_STATUS:
            task = TaskState.model_validate(data)
            self.tasks[task.task_id] = task
        elif event.event_type == ESCALATION:
            escalation = Escalation.model_validate(data)
            self.escalations[escalation.escalation_id] = escalation

    def summary(self) -> dict[str, Any]:
        """What a status reply says of the crew."""
        return {
            "requestId": self.request_id,
            "name": self.definition.name,
            "status": self.status,
            "message": self.message,
            "counts": self.counts(),
            "tasks": [t.model_dump(by_alias=True, exclude={"output"}) for t in self.tasks.values()],
            "escalations": [e.model_dump(by_alias=True) for e in self.open_escalations()],
            "lastEventId": self.seq,
        }


class CrewLog:
    """Appends a crew's events: numbered, redacted and durable like a run's."""

    def __init__(self, log: EventLog, state: CrewState) -> None:
        self._log = log
        self.state = state
        self.changes = 0
        """Events appended that change the crew (log lines do not)."""

    async def open(self) -> None:
        """Ready to append (learns where the stream, and the index of crews, end)."""
        await self._log.open(self.state.request_id)
        await self._log.open(INDEX_STREAM)

    def indexed(self, *, ended: bool = False) -> None:
        """The crew in the index of crews: when it is made, and when it has ended."""
        entry = CrewIndexData(
            crew_id=self.state.request_id, principal=self.state.principal, ended=ended or None
        )
        event = AgentEvent(event_type=INDEX, request_id=INDEX_STREAM, data=entry)
        self._log.append_encoded_many(INDEX_STREAM, INDEX, [envelope_rest(event)])

    def _emit(self, event_type: EventType, data: EventData) -> None:
        if event_type != LOG:
            self.changes += 1
        event = AgentEvent(event_type=event_type, request_id=self.state.request_id, data=data)
        rest = envelope_rest(event)
        self.state.seq = self._log.append_encoded_many(self.state.request_id, event_type, [rest])

    def run_status(self, status: CrewStatus, message: str | None = None, **extra: Any) -> None:
        """``crew:run:status``: the crew's status, with counts of its tasks."""
        self.state.status, self.state.message = status, message
        counts = self.state.counts()
        self._emit(
            RUN_STATUS, CrewStatusData(status=status, message=message, counts=counts, **extra)
        )
        if status in ENDED_CREW:
            self.indexed(ended=True)  # a restart need not look at it again
            self._log.retire(self.state.request_id)  # kept the retention, as a finished run

    def task(self, task: TaskState) -> None:
        """``crew:task:status``: the whole of one task's state."""
        if task.output is not None and len(task.output) > MAX_OUTPUT:
            task.output = task.output[:MAX_OUTPUT]
        self.state.tasks[task.task_id] = task
        self._emit(TASK_STATUS, CrewTaskData.model_validate(task.model_dump()))

    def escalation(self, escalation: Escalation) -> None:
        """``crew:escalation``: a decision waited for, or how it was decided."""
        self.state.escalations[escalation.escalation_id] = escalation
        self._emit(ESCALATION, CrewEscalationData.model_validate(escalation.model_dump()))

    def line(self, text: str, source: str = "crew", level: str = "info") -> None:
        """``crew:log``: one bounded line, from the orchestrator or a task."""
        clipped = text if len(text) <= MAX_LOG_LINE else text[: MAX_LOG_LINE - 1] + "…"
        self._emit(LOG, CrewLogData(source=source, level=level, line=clipped, at=time.time()))

    async def flush(self) -> None:
        """Until everything appended is durable."""
        await self._log.flush()


async def load(log: EventLog, request_id: str) -> CrewState | None:
    """The crew as its log has it (``None``: no such crew)."""
    first = await log.read_after(request_id, -1, 1)
    if not first or first[0].event_type != RUN_STATUS:
        return None
    data = json.loads(first[0].payload).get("data") or {}
    if "definition" not in data:
        return None
    state = CrewState(
        request_id=request_id,
        principal=data["principal"],
        created=data["created"],
        definition=CrewDefinition.model_validate(data["definition"]),
        inputs=data.get("inputs") or {},
        approve=data.get("approve") or "ask",
    )
    after = -1
    while page := await log.read_after(request_id, after, 4096):
        for event in page:
            state.apply(event)
        after = page[-1].seq
        if len(page) < 4096:
            break
    return state
