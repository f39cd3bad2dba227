"""The steps of a run's loop, each carrying what it needs; a step returns the next one.

::

    (ImportAttachments ──►) BuildRequest ──► CallModel ──► RunTools ──► BuildRequest …
         │  ▲            │            │
         ▼  │            ▼            ▼
        Compact       Finish     Suspend / Finish

``BuildRequest`` turns the session tree into the request to send (and passes it through the
budget gate), ``CallModel`` sends it and persists the reply, ``RunTools`` runs the reply's calls,
``Compact`` summarises older turns, ``ImportAttachments`` downloads the URLs a run was started
with; ``Suspend`` and ``Finish`` end an activation. The steps a
later activation starts from (:data:`StoredStep`) are pydantic models kept in the run's state:
a run resumed after a permission ask continues with the ``RunTools`` it stopped in, carrying the
user's decision. ``CallModel`` is never kept: a run that stops while the model answers builds
its request again (the session may have moved on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...events import FinishReason, SuspendReason
from ...events.models import CompactionScope
from ...providers.base import ModelRequest, ToolCall
from .values import AttachmentRef, Estimate, StepVerdict


class _Stored(BaseModel):
    model_config = ConfigDict(frozen=True)


class Approval(_Stored):
    """The user's decision on a permission ask."""

    kind: Literal["approval"] = "approval"
    tool_call_id: str
    """The call asked about."""
    approved: bool
    """Whether it may run."""
    digest: str | None = None
    """What the user was shown when they decided (the ask's digest): an approval holds only
    while the call would still do that."""


class Answer(_Stored):
    """The user's answer to the question a running call asked."""

    kind: Literal["answer"] = "answer"
    tool_call_id: str
    """The call that asked (it runs again, and its question returns this)."""
    text: str
    """The answer."""


Decision = Annotated[Approval | Answer, Field(discriminator="kind")]


class BuildRequest(_Stored):
    """Start a model step: the request from the session tree, through the budget gate."""

    kind: Literal["build_request"] = "build_request"
    compacted: bool = False
    """The gate already compacted for this step (over budget again: stop, or allow if advisory)."""
    reactive_compacted: bool = False
    """The provider already refused this step's context once and it was compacted."""


class RunTools(_Stored):
    """Run the calls of a persisted reply that have no result yet."""

    kind: Literal["run_tools"] = "run_tools"
    reply_id: str
    """The reply's entry in the session tree."""
    calls: list[ToolCall]
    """Its tool calls, in order."""
    verdict: StepVerdict | None = None
    """Which calls are refused and whether the model is reminded (decided once per step)."""
    resumed: Decision | None = None
    """The decision the run was resumed with, for the call that waited on it."""
    waiting: str | None = None
    """The call that suspended the run while it ran (it runs again when the run resumes)."""


class Compact(_Stored):
    """Summarise the turns before the current one, then go on with ``then``."""

    kind: Literal["compact"] = "compact"
    scope: CompactionScope
    """``in-loop`` (over budget), ``reactive`` (the provider refused) or ``manual``."""
    tokens_before: int | None = None
    """The estimate that called for it (``None``: counted from the tree when it runs)."""
    instructions: str | None = None
    """What the summary should also keep (manual compaction)."""
    then: BuildRequest | None = None
    """The step after; ``None`` ends the run (a compaction the user asked for)."""


class ImportAttachments(_Stored):
    """Download the URLs the run was started with, then build its first request."""

    kind: Literal["import_attachments"] = "import_attachments"
    refs: list[AttachmentRef]
    """The URLs, in the order the request named them."""


StoredStep = Annotated[
    BuildRequest | RunTools | Compact | ImportAttachments, Field(discriminator="kind")
]
"""The steps a run's state keeps for its next activation."""


@dataclass(frozen=True, slots=True)
class CallModel:
    """Send the request and persist the reply (never stored: see the module docstring)."""

    request: ModelRequest
    """What the model is asked."""
    estimate: Estimate
    """Its estimated input tokens (for the usage ledger)."""
    reactive_compacted: bool = False
    """As :attr:`BuildRequest.reactive_compacted`."""


@dataclass(frozen=True, slots=True)
class Suspend:
    """Stop and wait for the user (the run keeps its requestId)."""

    reason: SuspendReason


@dataclass(frozen=True, slots=True)
class Finish:
    """The run is complete."""

    reason: FinishReason
    message: str | None = None


def first_step(imports: list[AttachmentRef]) -> StoredStep:
    """Where a new run starts: importing its attached URLs, if it has any."""
    return ImportAttachments(refs=imports) if imports else BuildRequest()


Step = BuildRequest | CallModel | RunTools | Compact | ImportAttachments | Suspend | Finish
