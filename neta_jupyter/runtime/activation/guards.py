"""Limits on one reply's tool calls, for models that loop (seen with small local models).

A reply may ask for any number of calls; at most ``max_tool_calls_per_step`` distinct ones run,
a call identical to an earlier one of the same reply runs once, and the rest are answered as
refused so the model hears why. Across steps, a model that makes exactly the same calls again
and again is reminded once that their result will not change; if it still repeats them, they
are not run and the run ends instead of burning its remaining steps.

The verdict on a step is kept with its ``RunTools`` step, so resuming the step after a permission
ask refuses and reminds exactly as the first activation decided.

A model that answers right after a step whose calls all failed (a refused edit, say) is asked
once per run to make the call the failure says would succeed, or to say plainly that it failed:
small models otherwise tend to answer with a result they never got.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...events import StatusCode
from ...providers.base import ToolCall
from ..config import ANSWER_AFTER_FAILURE_REMINDER, RuntimeConfig
from ..data.values import RepeatedCalls, StepVerdict
from ..log.emitter import RunEmitter, status

if TYPE_CHECKING:
    from ..data.state import RunState


def screen_step(state: RunState, config: RuntimeConfig, calls: list[ToolCall]) -> StepVerdict:
    """The verdict on the current step's calls (the ``RunTools`` step keeps it)."""
    verdict = StepVerdict(step=state.step, refused=_refusals(calls, config.max_tool_calls_per_step))
    signature = _signature(calls)
    previous = state.repeat
    if signature and previous is not None and previous.signature == signature:
        verdict.repeats = previous.count + 1
    verdict.calls = ", ".join(dict.fromkeys(c.name for c in calls))
    limit = config.max_repeated_calls
    if verdict.repeats > limit:
        verdict.stop = True
        why = (
            f"not run: exactly this call was already made {verdict.repeats - 1} times in a row "
            "and its result did not change"
        )
        verdict.refused = {c.id: verdict.refused.get(c.id, why) for c in calls}
    elif verdict.repeats == limit:
        verdict.remind = True
    state.repeat = RepeatedCalls(signature=signature, count=verdict.repeats)
    return verdict


async def announce_repeats(emitter: RunEmitter, verdict: StepVerdict, limit: int) -> None:
    """Tell the user why the model gets a reminder (AGENT_STATUS, like failing tool steps)."""
    await status(
        emitter,
        StatusCode.TOOL_REPEATED_CALLS,
        f"The model made the same call ({verdict.calls}) {verdict.repeats} times in a row; "
        "reminding it that the result will not change",
        repeats=verdict.repeats,
        maxRepeats=limit,
    )


async def recover(state: RunState, config: RuntimeConfig, emitter: RunEmitter) -> bool:
    """Whether the run goes on after an answer given right after a failed step (once per run)."""
    if not config.recover_after_failure or not state.last_step_failed or state.recovery_asked:
        return False
    state.recovery_asked, state.remind = True, ANSWER_AFTER_FAILURE_REMINDER
    await status(
        emitter,
        StatusCode.TOOL_CONSECUTIVE_FAILURES,
        "The model answered right after a failed tool call; asking it once to retry or to say "
        "that it failed",
        failedSteps=max(1, state.failed_tool_steps),
        maxFailedSteps=config.max_failed_tool_steps,
    )
    return True


def _refusals(calls: list[ToolCall], cap: int) -> dict[str, str]:
    """Duplicates within the reply, and distinct calls past the cap."""
    refused: dict[str, str] = {}
    first: dict[tuple[str, str], str] = {}
    distinct = 0
    for call in calls:
        key = (call.name, _canonical(call.arguments))
        if key in first:
            refused[call.id] = (
                f"not run: the same call (same tool, same arguments) as {first[key]} earlier in "
                "this reply; use that call's result"
            )
            continue
        first[key] = call.id
        distinct += 1
        if distinct > cap:
            refused[call.id] = (
                f"not run: this reply made {len(calls)} tool calls, and at most {cap} run in one "
                "step; make fewer calls at a time, and repeat this one later only if it is still "
                "needed"
            )
    return refused


def _signature(calls: list[ToolCall]) -> str:
    """The step's distinct calls, independent of order and of JSON spacing."""
    return json.dumps(sorted({(c.name, _canonical(c.arguments)) for c in calls}))


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except ValueError:
        return arguments
