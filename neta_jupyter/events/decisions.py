"""The loop's decisions (seed 004): its phase, whether a step made progress, why it stopped.

A few events per step, never per token: clients show what the agent is doing between tokens
(the widget's and the terminal's status line) and why a run ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from .wire import EventBody

LoopPhase = Literal[
    "building_context", "budgeting", "calling_model", "running_tools", "compacting", "finishing"
]
"""Where the loop is: building the request from the session (``building_context``), checking
it against the token budget (``budgeting``), waiting for the model's reply (``calling_model``),
running the reply's tool calls (``running_tools``), summarising older turns (``compacting``),
ending the activation (``finishing``)."""

StopReason = Literal[
    "stop",
    "max_steps",
    "repeated_tool_calls",
    "reply_too_long",
    "budget_stop",
    "suspend",
    "cancel",
    "failure",
]
"""Why the loop ended: the model answered (``stop``), the run used its steps (``max_steps``),
the model kept making the same calls (``repeated_tool_calls``), its reply went past the size a
reply may have (``reply_too_long``), the request stayed over the
token budget after compaction (``budget_stop``), the run waits for someone (``suspend``), it
was terminated (``cancel``), or it failed (``failure``). Clients ignore values they do not
know."""


class PhaseData(EventBody):
    """``PHASE_CHANGED``: the loop moved to another phase (sent only when the phase changes)."""

    type: Literal["phase"] = "phase"
    event_types: ClassVar[Mapping[str, str]] = {
        "PHASE_CHANGED": "The loop moved to another phase.",
    }
    phase: LoopPhase
    """The phase it is in now."""
    previous_phase: LoopPhase | None = None
    """The phase before (``None``: the first of this activation)."""
    tool_names: list[str] | None = None
    """The tools of the calls about to run (``running_tools``)."""


class ProgressData(EventBody):
    """``PROGRESS_EVALUATED``: after each model step, whether the run got anywhere."""

    type: Literal["progress"] = "progress"
    event_types: ClassVar[Mapping[str, str]] = {
        "PROGRESS_EVALUATED": "After a model step: whether the run got anywhere.",
    }
    progressed: bool
    """The step produced answer text or a tool result that did not fail."""
    text_chars: int = 0
    """Characters of answer text the step's reply had."""
    tool_results: int = 0
    """Tool calls of the step that completed."""
    failed_tool_results: int = 0
    """Tool calls of the step that failed, were refused or denied."""
    no_progress_count: int = 0
    """Steps in a row, up to this one, without progress (0 when this one progressed)."""


class StopReasonData(EventBody):
    """``STOP_REASON_DECIDED``: why the loop ended; the terminal event follows."""

    type: Literal["stop_reason"] = "stop_reason"
    event_types: ClassVar[Mapping[str, str]] = {
        "STOP_REASON_DECIDED": "Why the loop ended; the terminal event follows.",
    }
    reason: StopReason
    """Why."""
    message: str | None = None
    """The reason in words."""
    finish_reason: str | None = None
    """The ``MESSAGE_COMPLETED.finishReason`` that follows, when it completes."""
    error_code: str | None = None
    """The ``MESSAGE_FAILED.errorCode`` that follows, when it fails."""
    suspend_type: str | None = None
    """The ``MESSAGE_SUSPENDED.suspendReason.type`` that follows, when it suspends."""
