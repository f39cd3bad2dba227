"""The loop's decision events: PHASE_CHANGED, PROGRESS_EVALUATED, STOP_REASON_DECIDED (seed 004).

Each is sent when something changes — the phase, a step ending, the loop ending — never per
token. The emitter of an activation remembers its phase and whether the stop was decided, so
whoever ends the run first (the loop, or the ending of a failed or cancelled activation) says why,
once, before the terminal event.
"""

from __future__ import annotations

from ...events import (
    ErrorCode,
    EventType,
    FinishReason,
    LoopPhase,
    PhaseData,
    ProgressData,
    StopReason,
    StopReasonData,
)
from ..data.state import RunState
from ..data.steps import Finish, Suspend
from ..log.emitter import RunEmitter

_FINISHED: dict[str, StopReason] = {
    FinishReason.STOP: "stop",
    FinishReason.MAX_STEPS: "max_steps",
    FinishReason.REPEATED_TOOL_CALLS: "repeated_tool_calls",
    FinishReason.REPLY_TOO_LONG: "reply_too_long",
}


def enter(emitter: RunEmitter, phase: LoopPhase, *, tool_names: list[str] | None = None) -> None:
    """PHASE_CHANGED, when the loop is not in ``phase`` already."""
    previous = emitter.phase
    if previous == phase:
        return
    emitter.phase = phase
    emitter.emit(
        EventType.PHASE_CHANGED,
        PhaseData(phase=phase, previous_phase=previous, tool_names=tool_names),
    )


def evaluate(state: RunState, emitter: RunEmitter, text_chars: int, outcomes: list[bool]) -> None:
    """PROGRESS_EVALUATED for the step that ended; counts the steps in a row without progress."""
    succeeded = sum(outcomes)
    progressed = text_chars > 0 or succeeded > 0
    state.no_progress_steps = 0 if progressed else state.no_progress_steps + 1
    emitter.emit(
        EventType.PROGRESS_EVALUATED,
        ProgressData(
            progressed=progressed,
            text_chars=text_chars,
            tool_results=succeeded,
            failed_tool_results=len(outcomes) - succeeded,
            no_progress_count=state.no_progress_steps,
        ),
    )


def decide_stop(
    emitter: RunEmitter,
    reason: StopReason,
    message: str | None = None,
    *,
    finish_reason: str | None = None,
    error_code: str | None = None,
    suspend_type: str | None = None,
) -> None:
    """STOP_REASON_DECIDED, unless the activation's stop was decided already."""
    if emitter.stop_decided:
        return
    emitter.stop_decided = True
    enter(emitter, "finishing")
    emitter.emit(
        EventType.STOP_REASON_DECIDED,
        StopReasonData(
            reason=reason,
            message=message,
            finish_reason=finish_reason,
            error_code=error_code,
            suspend_type=suspend_type,
        ),
    )


def decide_ending(emitter: RunEmitter, outcome: Suspend | Finish) -> None:
    """The stop reason of an activation that completed or suspended."""
    if isinstance(outcome, Suspend):
        why = outcome.reason
        decide_stop(emitter, "suspend", why.message, suspend_type=why.type)
    else:
        reason = _FINISHED.get(outcome.reason, "stop")
        decide_stop(emitter, reason, outcome.message, finish_reason=outcome.reason)


def decide_failure(emitter: RunEmitter, code: ErrorCode, message: str) -> None:
    """The stop reason of a run that fails (terminated: ``cancel``)."""
    reason: StopReason = "cancel" if code is ErrorCode.USER_CANCELLED else "failure"
    decide_stop(emitter, reason, message, error_code=code.value)
