"""The budget control plane and the usage ledger (seed 004).

Before every provider request the input is estimated and a decision published (BUDGET_CHECKED):
``allow``; ``compact`` the first time the request is over budget; after compacting, ``stop`` when
the estimate is gateable (a tokenizer or the provider counted it) or ``allow`` with an advisory
reason when it is only a heuristic. After every reply the usage is reconciled (LEDGER_RECONCILED)
and reported per turn and per session (TOKEN_USAGE).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Literal

from ...events import BudgetData, EventType, LedgerData, TokenUsageData, Usage
from ...providers.base import Model, ModelRequest, ProviderInvalidRequest
from ...providers.images import input_tokens
from ...store import RecordStore
from ..data.values import Estimate, Reply
from ..log.emitter import RunEmitter

if TYPE_CHECKING:
    from ..data.runs import Run

Action = Literal["allow", "compact", "stop"]
Source = Literal["observed", "estimated", "unknown"]


class BudgetExceeded(ProviderInvalidRequest):
    """Still over budget after compaction, with an estimate that may stop the run."""


def request_text(request: ModelRequest) -> str:
    """Everything of a request that costs input tokens, as one string."""
    parts = [request.system]
    for message in request.messages:
        parts.append(message.content)
        parts += [c.name + c.arguments for c in message.tool_calls]
    parts += [t.name + t.description + json.dumps(t.parameters) for t in request.tools]
    return "\n".join(parts)


def estimate(model: Model, request: ModelRequest) -> Estimate:
    """The model's own count when it offers one (``count_tokens``), else a heuristic.

    The heuristic: 4 characters a token, and what each picture's pixels cost
    (:func:`~neta_jupyter.providers.images.input_tokens`).
    """
    counter = getattr(model, "count_tokens", None)
    if callable(counter):
        counted = counter(request)
        if isinstance(counted, int):
            return Estimate(counted, str(getattr(model, "token_count_source", "tokenizer")))
    pictures = sum(input_tokens(i) for m in request.messages for i in m.images)
    return Estimate(max(1, len(request_text(request)) // 4) + pictures, "heuristic")


def request_hash(request: ModelRequest) -> str:
    """A short stable fingerprint of the frozen request."""
    return hashlib.sha256(request_text(request).encode()).hexdigest()[:16]


def decide(est: Estimate, budget: int, compacted: bool) -> tuple[Action, str]:
    """Seed 004's decision table."""
    if est.tokens <= budget:
        return "allow", "within_budget"
    if not compacted:
        return "compact", "exceeds_budget"
    if est.gateable:
        return "stop", "exceeds_budget_after_compact_stop"
    return "allow", "exceeds_budget_after_compact_allow_advisory"


def publish_decision(
    emitter: RunEmitter,
    run: Run,
    request: ModelRequest,
    est: Estimate,
    budget: int,
    compacted: bool,
) -> Action:
    """Decide and publish BUDGET_CHECKED; returns the action."""
    action, reason = decide(est, budget, compacted)
    run.state.attempt_seq += 1
    emitter.emit(
        EventType.BUDGET_CHECKED,
        BudgetData(
            attempt_seq=run.state.attempt_seq,
            request_hash=request_hash(request),
            action=action,
            reason=reason,
            estimated_input_tokens=est.tokens,
            prompt_budget=budget,
            estimate_source=est.source,
            estimate_gate_policy="gateable" if est.gateable else "advisory",
        ),
    )
    return action


async def reconcile(
    emitter: RunEmitter,
    records: RecordStore,
    run: Run,
    request: ModelRequest,
    est: Estimate,
    reply: Reply,
) -> None:
    """LEDGER_RECONCILED and TOKEN_USAGE for one reply; keeps run and session totals."""
    usage = reply.usage
    in_src: Source
    out_src: Source
    if usage is not None:
        inputs, outputs, in_src, out_src = (
            usage.input_tokens,
            usage.output_tokens,
            "observed",
            "observed",
        )
        cached, reasoning = usage.cached_tokens, usage.reasoning_tokens
    else:
        # Without provider usage the input falls back to the estimate; the output is not faked.
        inputs, outputs, in_src, out_src = est.tokens, 0, "estimated", "unknown"
        cached = reasoning = 0
    session = await records.add_usage(run.session_id, inputs, outputs, usage is None)
    totals = run.state.usage
    prompt, completion = totals.prompt_tokens + inputs, totals.completion_tokens + outputs
    run.state.usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=totals.cached_tokens + cached,
        reasoning_tokens=totals.reasoning_tokens + reasoning,
        total_tokens=prompt + completion,
    )
    emitter.total_tokens = run.state.usage.total_tokens
    emitter.emit(
        EventType.LEDGER_RECONCILED,
        LedgerData(
            attempt_seq=run.state.attempt_seq,
            request_hash=request_hash(request),
            input_tokens=inputs,
            input_source=in_src,
            output_tokens=outputs,
            output_source=out_src,
            has_unknown_usage=session.has_unknown_usage,
        ),
    )
    emitter.emit(
        EventType.TOKEN_USAGE,
        TokenUsageData(
            input_tokens=inputs,
            output_tokens=outputs,
            input_source=in_src,
            output_source=out_src,
            has_unknown_usage=session.has_unknown_usage,
            session_input_tokens=session.input_tokens,
            session_output_tokens=session.output_tokens,
            cached_tokens=cached,
            reasoning_tokens=reasoning,
        ),
    )
