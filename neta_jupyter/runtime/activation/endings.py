"""How a run's activation ends: exactly one terminal event, made durable with the run's status."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...events import ErrorCode, EventType, MessageData, Usage
from ..data.runs import Run, Runs
from ..data.steps import BuildRequest, Finish, RunTools, Suspend
from ..log.emitter import RunEmitter
from ..log.tree import CallOutcome, SessionTree
from .decisions import decide_ending, decide_failure

NOT_RUN = "Not run: the run ended before this call was executed."
INTERRUPTED = (
    "Interrupted: the server stopped while this call was executing, so it may or may not have "
    "run. It is not run again; check its effects before repeating it."
)


def usage_snapshot(run: Run) -> Usage:
    """The run's token totals for the terminal event."""
    return run.state.usage


async def end_run(runs: Runs, run: Run, emitter: RunEmitter, outcome: Suspend | Finish) -> None:
    """MESSAGE_SUSPENDED or MESSAGE_COMPLETED."""
    message_id = run.state.last_assistant
    decide_ending(emitter, outcome)
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
    await runs.save(run, keep=True)


async def recover_crashed(
    runs: Runs,
    emitter_of: Callable[[Run], Awaitable[RunEmitter]],
    take: Callable[[Run], Awaitable[bool]] | None = None,
) -> int:
    """Runs a crashed process left running end with SYSTEM_CRASH; how many there were.

    ``take``: whether this process may end the run (another server may be running it).
    """
    crashed = 0
    for run in await runs.find(status="running", limit=100_000):
        if take is None or await take(run):
            await end_crashed(runs, run, await emitter_of(run))
            crashed += 1
    return crashed


async def end_crashed(runs: Runs, run: Run, emitter: RunEmitter) -> None:
    """MESSAGE_FAILED SYSTEM_CRASH, recoverable: Retry continues from the persisted position.

    Tool calls that were executing are answered as interrupted (they may or may not have run)
    and never run again: the model, asked again on Retry, sees that.
    """
    message = "the server stopped while this run was executing"
    if run.snapshot_error:  # what it was doing is lost with its state
        message = f"{message}; {run.snapshot_error}"
        await fail_run(
            runs, run, emitter, ErrorCode.RUN_SNAPSHOT_INVALID, message, recoverable=False
        )
        return
    await close_open_calls(runs, run, emitter, INTERRUPTED, "failed")
    await fail_run(runs, run, emitter, ErrorCode.SYSTEM_CRASH, message, recoverable=True)


async def fail_run(
    runs: Runs,
    run: Run,
    emitter: RunEmitter,
    code: ErrorCode,
    message: str,
    *,
    recoverable: bool,
    network_error: bool = False,
) -> None:
    """MESSAGE_FAILED; an unrecoverable failure also closes the calls left open."""
    if not recoverable:
        await close_open_calls(runs, run, emitter)
    decide_failure(emitter, code, message)
    emitter.emit(
        EventType.MESSAGE_FAILED,
        MessageData(
            message_id=run.state.last_assistant,
            error_code=code,
            error_message=message,
            recoverable=recoverable,
            network_error=network_error,
            usage=usage_snapshot(run),
        ),
    )
    run.status = "failed"
    run.state.recoverable = recoverable
    run.state.ask = None
    run.state.background = None
    run.state.suspend_deadline = None
    await runs.save(run, keep=True)


async def close_open_calls(
    runs: Runs,
    run: Run,
    emitter: RunEmitter,
    output: str = NOT_RUN,
    outcome: CallOutcome = "not_run",
) -> None:
    """Answer unanswered tool calls so the transcript stays valid for the next prompt."""
    state, records = run.state, runs.records
    pending = state.next
    if not isinstance(pending, RunTools):
        return
    state.next = BuildRequest()
    reply = await records.get_entry(pending.reply_id)
    if reply is None:
        return
    path = await records.path(run.session_id, state.leaf)
    answered = {e.message.get("tool_call_id") for e in path if e.role == "tool"}
    tree = SessionTree(records, emitter.log, moves_leaf=run.parent_request_id is None)
    for call in pending.calls:
        if call.id in answered:
            continue
        entry = await tree.answer(
            reply,
            {"id": call.id, "name": call.name},
            output,
            outcome,
            request_id=run.request_id,
            parent_id=state.leaf,
            run=emitter,
        )
        state.leaf = entry.entry_id
