"""Bodies of token accounting (seed 004): the budget decision, the reconciled ledger, usage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from .wire import EventBody, _Wire


class Usage(_Wire):
    """Token usage of this assistant message (seed 003 §1)."""

    prompt_tokens: int = 0
    """Input tokens."""
    completion_tokens: int = 0
    """Output tokens."""
    cached_tokens: int = 0
    """Input tokens served from the provider's cache."""
    reasoning_tokens: int = 0
    """Output tokens spent on reasoning."""
    total_tokens: int = 0
    """Input plus output."""


class BudgetData(EventBody):
    """Budget decision before a provider request (seed 004)."""

    type: Literal["budget"] = "budget"
    event_types: ClassVar[Mapping[str, str]] = {
        "BUDGET_CHECKED": "The request was checked against the token budget before a model call.",
    }
    attempt_seq: int
    """Provider attempt number within the run."""
    request_hash: str
    """Hash of the frozen request."""
    action: Literal["allow", "compact", "stop"]
    """Decision."""
    reason: str
    """Why."""
    estimated_input_tokens: int
    """Estimated input size."""
    prompt_budget: int
    """Input token budget."""
    estimate_source: str
    """``heuristic``, ``tokenizer`` or ``provider``."""
    estimate_gate_policy: Literal["gateable", "advisory"]
    """Whether the estimate may stop a run."""


class LedgerData(EventBody):
    """Usage reconciled after a provider attempt (seed 004)."""

    type: Literal["ledger"] = "ledger"
    event_types: ClassVar[Mapping[str, str]] = {
        "LEDGER_RECONCILED": "A model call's usage was settled against the run's ledger.",
    }
    attempt_seq: int
    """Provider attempt number."""
    request_hash: str
    """Hash of the request."""
    input_tokens: int
    """Input tokens."""
    input_source: Literal["observed", "estimated", "unknown"]
    """Where the input figure came from."""
    output_tokens: int
    """Output tokens."""
    output_source: Literal["observed", "estimated", "unknown"]
    """Where the output figure came from."""
    has_unknown_usage: bool
    """The session has had an attempt with unknown output usage."""


class TokenUsageData(EventBody):
    """Usage of a turn and of the session."""

    type: Literal["token_usage"] = "token_usage"
    event_types: ClassVar[Mapping[str, str]] = {
        "TOKEN_USAGE": "Tokens a model call used, and the run's total so far.",
    }
    input_tokens: int
    """Turn input tokens."""
    output_tokens: int
    """Turn output tokens."""
    input_source: str
    """Source of the input figure."""
    output_source: str
    """Source of the output figure."""
    has_unknown_usage: bool
    """Some usage of the session is unknown."""
    session_input_tokens: int
    """Session input total."""
    session_output_tokens: int
    """Session output total."""
    cached_tokens: int = 0
    """Turn cached input tokens."""
    reasoning_tokens: int = 0
    """Turn reasoning tokens."""
    subagent_request_id: str | None = None
    """The figures are a sub-agent's (this child run's whole usage), counted in this run's; the
    session totals already hold them."""
