"""Bodies of a sub-agent batch, as the parent run's stream tells it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from .tools import ClarifyData, PermissionAskData
from .wire import EventBody, _Wire

SUBAGENT_ANSWER_PREVIEW = 2000
"""Characters of a child's answer the parent's stream carries; the child's own stream has all."""

SubagentStatus = Literal["queued", "running", "suspended", "completed", "failed"]
"""Where a child run is: ``queued`` (waiting for a free slot of the batch), ``running``,
``suspended`` (waiting for the user: its ``ask``), ``completed`` or ``failed``."""


class SubagentChild(_Wire):
    """One child run of a batch, as ``SUBAGENT_RUN_STARTED`` announces it."""

    request_id: str
    """The child run: follow its stream and act on it (resume, terminate) by this id."""
    agent_id: str | None = None
    """Its name within the batch (``SUBAGENT_EVENT.agentId``)."""
    task: str
    """What it was asked to do."""
    role: str | None = None
    """The role it plays (from its role prompt), when it was given one."""
    model: str | None = None
    """The model it runs on, when not the parent's."""
    status: SubagentStatus | None = None
    """Where it is at the start (``queued`` when the batch runs fewer at a time)."""


class SubagentData(EventBody):
    """Sub-agent batch lifecycle, in the parent run's stream.

    ``SUBAGENT_RUN_STARTED`` lists the ``children``; one ``SUBAGENT_EVENT`` follows per change of
    a child (``childRequestId`` and what changed); ``SUBAGENT_RUN_COMPLETED`` ends the batch.
    Each child is a full run with a stream of its own: what the parent's stream says of it is a
    bounded summary, and ``childRequestId`` is the reference to the whole.
    """

    type: Literal["subagent"] = "subagent"
    event_types: ClassVar[Mapping[str, str]] = {
        "SUBAGENT_RUN_STARTED": "A sub-agent's run began.",
        "SUBAGENT_EVENT": "A sub-agent's run moved on.",
        "SUBAGENT_RUN_COMPLETED": "A sub-agent's run ended.",
    }
    batch_id: str
    """Batch id."""
    agent_id: str | None = None
    """Sub-agent id (SUBAGENT_EVENT)."""
    status: str | None = None
    """Status text: a :data:`SubagentStatus` value on SUBAGENT_EVENT; the batch's outcome
    (``completed``, ``failed``, ``cancelled``) on SUBAGENT_RUN_COMPLETED."""
    message: str | None = None
    """Text to show: on SUBAGENT_EVENT, the child's live status line (what it is doing)."""
    payload: dict[str, Any] | None = None
    """Details."""
    children: list[SubagentChild] | None = None
    """The batch's child runs (SUBAGENT_RUN_STARTED)."""
    child_request_id: str | None = None
    """The child run this SUBAGENT_EVENT is about."""
    step: int | None = None
    """The child's step number."""
    total_tokens: int | None = None
    """Tokens the child has used so far."""
    duration_ms: int | None = None
    """How long the child has run so far (final once it ended)."""
    answer_preview: str | None = None
    """The start of the child's final answer (at most :data:`SUBAGENT_ANSWER_PREVIEW`
    characters; completed children)."""
    answer_truncated: bool | None = None
    """The answer is longer than ``answerPreview``: the child's stream has all of it."""
    error_code: str | None = None
    """Why the child failed (an :class:`ErrorCode` value)."""
    error_message: str | None = None
    """The child's failure, in words."""
    ask: Annotated[PermissionAskData | ClarifyData, Field(discriminator="type")] | None = None
    """What the suspended child waits for: its permission ask or its question, answered with
    ``resumeTask`` on ``childRequestId``. Absent once it moved on."""
