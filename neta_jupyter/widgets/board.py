"""The crew board's contract with its views: its ``board`` trait and the messages its buttons send.

Part of the comm's JSON Schema (:func:`.schema.comm_schema`), from which ``js/src/crew-board.ts``
takes its types. The board also speaks the run widget's messages (``replay``, ``unsubscribe``,
``action``) for the tasks' runs a view opens; its own messages are told apart by ``type``:

View → kernel (:data:`BoardMessage`)
    ``decide``   decide what the crew waits for (an escalation)
    ``control``  pause, resume or stop the crew
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, ValidationError

from ..events.crews import CrewTaskData, Decision
from .comm import BadMessage, _Message

__all__ = [
    "BoardEscalation",
    "BoardMessage",
    "BoardTask",
    "ControlMessage",
    "CrewBoardState",
    "DecideMessage",
    "board_message",
    "board_task",
]


class DecideMessage(_Message):
    """Decide what the crew waits for: a button or an answer of the board."""

    type: Literal["decide"]
    escalation_id: str
    """The escalation decided."""
    decision: Decision
    """How."""
    answer: str | None = None
    """The person's words: the answer to a question, or a note for a retried task."""
    output: str | None = None
    """The output a skipped task gives its dependents."""
    approved: bool | None = None
    """The decision on an approval."""


class ControlMessage(_Message):
    """Pause, resume or stop the crew."""

    type: Literal["control"]
    action: Literal["pause", "resume", "stop"]
    """What to do."""


BoardMessage = Annotated[DecideMessage | ControlMessage, Field(discriminator="type")]
"""What a board's view sends of its own (besides the run widget's messages)."""


class BoardTask(_Message):
    """A row of the board: one task."""

    task_id: str
    """The task."""
    agent: str = ""
    """The agent that does it."""
    status: str = "pending"
    """Where it is (a ``crew:task:status`` status)."""
    attempt: int = 0
    """Its attempt (0 before the first)."""
    tokens: int = 0
    """Tokens of all its attempts."""
    child_request_id: str = ""
    """Its current attempt's run ("" when it has none)."""


class BoardEscalation(_Message):
    """A decision the crew waits for, with the buttons to take it."""

    escalation_id: str
    """The escalation."""
    task_id: str
    """The task it is about."""
    kind: str
    """What it asks about (a ``crew:escalation`` kind)."""
    message: str
    """The question, in words."""


class CrewBoardState(_Message):
    """The ``board`` trait: all a view draws."""

    name: str
    """The crew's name."""
    mode: Literal["server", "embedded"]
    """Where the tasks' runs are followed from: as the run widget's ``mode``."""
    status: str
    """Where the crew is (a ``crew:run:status`` status)."""
    message: str = ""
    """Why, or what went wrong."""
    tasks: list[BoardTask] = Field(default_factory=list)
    """Its tasks, in the definition's order."""
    escalations: list[BoardEscalation] = Field(default_factory=list)
    """The decisions it waits for."""
    log: list[str] = Field(default_factory=list)
    """Its latest log lines."""


def board_task(task: CrewTaskData) -> BoardTask:
    """A task's row, from what its latest ``crew:task:status`` said."""
    return BoardTask(
        task_id=task.task_id,
        agent=task.agent,
        status=task.status,
        attempt=task.attempt,
        tokens=task.usage.total_tokens,
        child_request_id=task.child_request_id or "",
    )


_BOARD_MESSAGE: TypeAdapter[BoardMessage] = TypeAdapter(BoardMessage)


def board_message(content: object) -> BoardMessage | None:
    """The board's own message a view sent; ``None`` for another (a run widget's message).

    Raises :class:`~.comm.BadMessage` for a ``decide`` or ``control`` with bad fields.
    """
    if not isinstance(content, dict) or content.get("type") not in ("decide", "control"):
        return None
    try:
        return _BOARD_MESSAGE.validate_python(content)
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in e["loc"][1:]) or "body" for e in exc.errors())
        raise BadMessage(f"a {content['type']} message with bad fields: {fields}", "") from exc
