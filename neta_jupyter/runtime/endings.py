"""How a run's activation ends: exactly one terminal event, made durable with the run's status."""

from __future__ import annotations

from collections.abc import Callable

from ..events import ErrorCode, EventType, MessageData, Usage
from ..store import RecordStore, RunRecord
from .emitter import RunEmitter
from .loop import Finish, Suspend
from .tree import SessionTree

NOT_RUN = "Not run: the run ended before this call was executed."


def usage_snapshot(run: RunRecord) -> Usage:
    """The run's token totals for the terminal event."""
    totals = run.state.get("usage", {})
    return Usage(
        prompt_tokens=totals.get("promptTokens", 0),
        completion_tokens=totals.get("completionTokens", 0),
        cached_tokens=totals.get("cachedTokens", 0),
        reasoning_tokens=totals.get("reasoningTokens", 0),
        total_tokens=totals.get("totalTokens", 0),
    )


def end_run(
    records: RecordStore, run: RunRecord, emitter: RunEmitter, outcome: Suspend | Finish
) -> None:
    """MESSAGE_SUSPENDED or MESSAGE_COMPLETED."""
    message_id = run.state.get("last_assistant")
    if isinstance(outcome, Suspend):
        emitter.emit(
            EventType.MESSAGE_SUSPENDED,
            MessageData(
                message_id=message_id,
                suspend_reason=outcome.reason,
                usage=usage_snapshot(run),
            ),
        )
        run.status = "suspended"
    else:
        emitter.emit(
            EventType.MESSAGE_COMPLETED,
            MessageData(
                message_id=message_id,
                finish_reason=outcome.reason,
                finish_message=outcome.message,
                usage=usage_snapshot(run),
            ),
        )
        run.status = "completed"
    # One commit makes the terminal event and the status durable together (now, or once the
    # store can be written again).
    records.save_run(run, keep=True)


def recover_crashed(records: RecordStore, emitter_of: Callable[[RunRecord], RunEmitter]) -> int:
    """Runs a crashed process left running end with SYSTEM_CRASH; how many there were."""
    crashed = records.runs(status="running", limit=100_000)
    for run in crashed:
        fail_run(
            records,
            run,
            emitter_of(run),
            ErrorCode.SYSTEM_CRASH,
            "the server stopped while this run was executing",
            recoverable=False,
        )
    return len(crashed)


def fail_run(
    records: RecordStore,
    run: RunRecord,
    emitter: RunEmitter,
    code: ErrorCode,
    message: str,
    *,
    recoverable: bool,
    network_error: bool = False,
) -> None:
    """MESSAGE_FAILED; an unrecoverable failure also closes the calls left open."""
    if not recoverable:
        close_open_calls(records, run, emitter)
    emitter.emit(
        EventType.MESSAGE_FAILED,
        MessageData(
            message_id=run.state.get("last_assistant"),
            error_code=code,
            error_message=message,
            recoverable=recoverable,
            network_error=network_error,
            usage=usage_snapshot(run),
        ),
    )
    run.status = "failed"
    run.state["recoverable"] = recoverable
    run.state["ask"] = None
    records.save_run(run, keep=True)


def close_open_calls(records: RecordStore, run: RunRecord, emitter: RunEmitter) -> None:
    """Answer unanswered tool calls so the transcript stays valid for the next prompt."""
    if run.state.get("phase") != "tools" or not run.state.get("last_assistant"):
        return
    path = records.path(run.session_id, run.state.get("leaf"))
    answered = {e.message.get("tool_call_id") for e in path if e.role == "tool"}
    assistant = records.get_entry(run.state["last_assistant"])
    calls = assistant.message.get("tool_calls", []) if assistant is not None else []
    tree = SessionTree(records, emitter.log)
    for call in calls:
        if assistant is None or call["id"] in answered:
            continue
        entry = tree.answer(
            assistant,
            call,
            NOT_RUN,
            "not_run",
            request_id=run.request_id,
            parent_id=run.state.get("leaf"),
            run=emitter,
        )
        run.state["leaf"] = entry.entry_id
    run.state["phase"] = "model"
