"""What a run that delegated knows of one child run, folded from the child's own event stream.

The child's log is the truth: the parent follows it like any client would, and tells its own
stream (``SUBAGENT_EVENT``) only the bounded summary a view of the parent needs — status, what
the child is doing, step, tokens, its answer's start, its failure, what it waits for.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ...events import (
    ClarifyData,
    EventType,
    PermissionAskData,
    SubagentData,
)
from ...events.models import SUBAGENT_ANSWER_PREVIEW, SubagentStatus, Usage

_LINES = {
    EventType.REASONING_START.value: "Thinking",
    EventType.TEXT_START.value: "Writing its answer",
    EventType.COMPACTION_START.value: "Compacting its conversation",
}
_READ = frozenset(
    {
        *_LINES,
        EventType.TOOL_START.value,
        EventType.TOOL_RUNNING.value,
        EventType.TOOL_COMPLETED.value,
        EventType.TOOL_FAILED.value,
        EventType.AGENT_STATUS.value,
        EventType.PERMISSION_ASK.value,
        EventType.CLARIFY_REQUEST.value,
        EventType.PERMISSION_ASK_RESOLVED.value,
        EventType.LEDGER_RECONCILED.value,
        EventType.MESSAGE_COMPLETED.value,
        EventType.MESSAGE_SUSPENDED.value,
        EventType.MESSAGE_FAILED.value,
    }
)
"""Event types whose data the view reads; the rest (deltas above all) only mark activity."""

_NOT_ACTIVITY = frozenset(
    {
        EventType.SESSION_CREATED.value,
        EventType.SESSION_ENTRY_ADDED.value,
        EventType.SESSION_ENTRY_UPDATED.value,
        EventType.SESSION_LEAF_CHANGED.value,
        EventType.MESSAGE_SUSPENDED.value,
        # A suspended run that is ended (stopped, superseded) says why before it fails.
        EventType.PHASE_CHANGED.value,
        EventType.STOP_REASON_DECIDED.value,
    }
)
"""Events that do not show an activation under way (the first one that does is never among them:
a run that goes on reaches the budget check, a tool or a resolved ask soon after)."""

ENDED: frozenset[SubagentStatus] = frozenset({"completed", "failed"})


@dataclass(slots=True)
class ChildView:
    """One child of a batch as the parent sees it."""

    request_id: str
    agent_id: str
    task: str
    role: str | None
    model: str | None
    entry_id: str | None
    """Its ``subagent`` entry in the session tree."""
    created: float
    status: SubagentStatus = "queued"
    line: str | None = None
    step: int | None = None
    total_tokens: int | None = None
    ask: PermissionAskData | ClarifyData | None = None
    answer: str | None = None
    answer_id: str | None = None
    """The entry holding the child's final answer (``messageId`` of its MESSAGE_COMPLETED)."""
    error_code: str | None = None
    error_message: str | None = None
    usage: Usage | None = None
    sources: tuple[set[str], set[str]] = field(default_factory=lambda: (set(), set()))
    """The sources of its input and output token figures (observed, estimated, unknown)."""
    ended: float | None = None
    seq: int = -1
    """The last event of its stream folded in."""

    @property
    def done(self) -> bool:
        """It has completed or failed: nothing more will come of it."""
        return self.status in ENDED

    def apply(self, seq: int, event_type: str, payload: str) -> bool:
        """Fold in one event of the child's stream; whether what the parent shows changed."""
        self.seq = seq
        before = (self.status, self.line, self.step, self.ask is None)
        if self.status in ("queued", "suspended") and event_type not in _NOT_ACTIVITY:
            self.status = "running"  # a new activation
        if event_type in _READ:
            envelope = json.loads(payload)
            self.step = envelope.get("step") or self.step
            self.total_tokens = envelope.get("totalTokens") or self.total_tokens
            self._read(event_type, envelope.get("data") or {})
        return before != (self.status, self.line, self.step, self.ask is None)

    def _read(self, event_type: str, data: dict[str, Any]) -> None:
        if line := _LINES.get(event_type):
            self.line = line
        match event_type:
            case "TOOL_START":
                self.line = f"Running {data.get('toolName')}"
            case "TOOL_RUNNING" | "AGENT_STATUS" if data.get("title") or data.get("message"):
                self.line = str(data.get("title") or data.get("message"))
            case "TOOL_COMPLETED" | "TOOL_FAILED":
                verb = "done" if event_type == "TOOL_COMPLETED" else "failed"
                self.line = f"{data.get('toolName')} {verb}"
            case "PERMISSION_ASK":
                self.ask = PermissionAskData.model_validate(data)
                self.line = f"Waiting for approval of {self.ask.tool_name}"
            case "CLARIFY_REQUEST":
                self.ask = ClarifyData.model_validate(data)
                self.line = "Waiting for an answer"
            case "PERMISSION_ASK_RESOLVED":
                self.ask = None
            case "LEDGER_RECONCILED":
                self.sources[0].add(str(data.get("inputSource")))
                self.sources[1].add(str(data.get("outputSource")))
            case "MESSAGE_SUSPENDED":
                self.status = "suspended"
                reason = (data.get("suspendReason") or {}).get("type")
                if reason not in ("PERMISSION_ASK", "CLARIFY_REQUEST"):
                    self.ask = None
                    paused = reason == "MANUAL_SUSPEND"
                    self.line = f"{'Paused' if paused else 'Interrupted'}: continues when resumed"
            case "MESSAGE_COMPLETED" | "MESSAGE_FAILED":
                self._end(event_type, data)

    def _end(self, event_type: str, data: dict[str, Any]) -> None:
        self.ended = time.time()
        self.ask = None
        self.usage = Usage.model_validate(data.get("usage") or {})
        if event_type == "MESSAGE_COMPLETED":
            self.status, self.line = "completed", "Done"
            self.answer_id = data.get("messageId")
        else:
            self.status, self.line = "failed", "Failed"
            self.error_code = data.get("errorCode")
            self.error_message = data.get("errorMessage")

    def source(self, which: int) -> str:
        """One source for all its figures of a kind: the least certain of them."""
        found = self.sources[which]
        for source in ("unknown", "estimated"):
            if source in found:
                return source
        return "observed" if found else "unknown"

    def event(self, batch_id: str) -> SubagentData:
        """The ``SUBAGENT_EVENT`` of its state now."""
        answer = self.answer or ""
        return SubagentData(
            batch_id=batch_id,
            agent_id=self.agent_id,
            status=self.status,
            message=self.line,
            child_request_id=self.request_id,
            step=self.step,
            total_tokens=self.total_tokens,
            duration_ms=int(((self.ended or time.time()) - self.created) * 1000),
            answer_preview=answer[:SUBAGENT_ANSWER_PREVIEW] if self.answer is not None else None,
            answer_truncated=len(answer) > SUBAGENT_ANSWER_PREVIEW or None,
            error_code=self.error_code,
            error_message=self.error_message,
            ask=self.ask,
        )


RESULT_ANSWER_CHARS = 6000
"""Characters of a child's answer in the delegate tool's result, at most."""
RESULT_CHARS = 10_000
"""Characters of all the children's answers in it: a model reads every child's part (a longer
tool result would be trimmed in its middle, where children's answers are)."""


def result_text(children: list[ChildView]) -> str:
    """What the model that delegated is told: each child's outcome and answer."""
    completed = sum(c.status == "completed" for c in children)
    each = max(500, min(RESULT_ANSWER_CHARS, RESULT_CHARS // max(1, len(children))))
    lines = [f"Sub-agents finished: {completed} of {len(children)} completed."]
    for index, child in enumerate(children, 1):
        lines += ["", f"### {index}. {child.agent_id} ({child.status}, run {child.request_id})"]
        lines.append(f"Task: {child.task}")
        if child.status == "completed":
            answer = (child.answer or "").strip() or "(no answer)"
            if len(answer) > each:
                answer = f"{answer[:each]}\n… [{len(answer) - each:,} more characters in its run]"
            lines += ["Answer:", answer]
        else:
            lines.append(f"Failed ({child.error_code}): {child.error_message}")
    return "\n".join(lines)
