"""What a run amounts to, read from its envelopes: a digest, and a static transcript.

The transcript travels beside the live widget in the same output (``text/markdown``, and
``text/plain``), so a saved notebook reads well where widgets do not render (GitHub, nbviewer,
nbconvert). Everything in it that came from the run or the prompt goes through :mod:`.inert`: the
saved notebook shows text and markdown, never HTML that could run or load something.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .comm import Snapshot
from .inert import code_span, inert_markdown, inert_text, plain_text

RunStatus = Literal["starting", "running", "suspended", "completed", "failed"]

_ARG_WIDTH = 48


@dataclass(slots=True)
class ToolLine:
    """One tool call as the transcript shows it."""

    name: str
    arguments: str = ""
    state: Literal["running", "completed", "failed", "stopped"] = "running"
    """``stopped``: the run ended before the call did."""
    detail: str = ""
    images: int = 0


@dataclass(slots=True)
class RunDigest:
    """A pure fold of a run's envelopes: status, answer text, tools, usage."""

    request_id: str = ""
    status: RunStatus = "starting"
    last_seq: int = -1
    segments: list[str] = field(default_factory=list)
    tools: dict[str, ToolLine] = field(default_factory=dict)
    finish_reason: str | None = None
    error_message: str | None = None
    error_code: str | None = None
    recoverable: bool = False
    suspend_message: str | None = None
    suspend_type: str | None = None
    pending_ask: dict[str, Any] | None = None
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The answer so far: every text segment, as the widget joins them."""
        return "\n\n".join(s for s in self.segments if s)

    @property
    def at_rest(self) -> bool:
        """Nothing happens until someone acts (or ever again)."""
        return self.status in ("suspended", "completed", "failed")

    @property
    def final(self) -> bool:
        """The run can never continue."""
        return self.status == "completed" or (self.status == "failed" and not self.recoverable)

    def apply(self, envelope: dict[str, Any]) -> bool:
        """Fold one envelope in; False for a repeat (its seq was seen already)."""
        seq = envelope.get("seq")
        if isinstance(seq, int):
            if seq <= self.last_seq:
                return False
            self.last_seq = seq
        self.request_id = str(envelope.get("requestId") or self.request_id)
        data = envelope.get("data") or {}
        kind = str(envelope.get("eventType", ""))
        if kind not in ("HEARTBEAT", "AGENT_STATUS") and not kind.startswith("MESSAGE_"):
            self.status = "running"
        match kind:
            case "TEXT_START":
                self._start_segment(data)
            case "TEXT_DELTA":
                if not self.segments:
                    self.segments.append("")
                self.segments[-1] += str(data.get("text") or "")
            case "TOOL_START" | "TOOL_COMPLETED" | "TOOL_FAILED" | "TOOL_CALL_GENERATING":
                self._tool(kind, data)
            case "PERMISSION_ASK" | "CLARIFY_REQUEST":
                self.pending_ask = dict(data)
            case "PERMISSION_ASK_RESOLVED":
                self.pending_ask = None
            case "MESSAGE_COMPLETED" | "MESSAGE_SUSPENDED" | "MESSAGE_FAILED":
                self._terminal(kind, data)
        return True

    def _start_segment(self, data: dict[str, Any]) -> None:
        """A new text segment, or the one before it taken up again after a break (or replaced)."""
        text = str(data.get("text") or "")
        if self.segments and data.get("continues"):
            self.segments[-1] += text
        elif self.segments and data.get("replaces"):
            self.segments[-1] = text
        else:
            self.segments.append(text)

    def _tool(self, kind: str, data: dict[str, Any]) -> None:
        call_id = str(data.get("toolCallId") or "")
        line = self.tools.get(call_id)
        if line is None:
            line = self.tools[call_id] = ToolLine(str(data.get("toolName") or "tool"))
        if data.get("toolName"):
            line.name = str(data["toolName"])
        if kind == "TOOL_START" and data.get("arguments") is not None:
            line.arguments = str(data["arguments"])
        elif kind == "TOOL_COMPLETED":
            line.state = "completed"
            line.images = len(data.get("images") or [])
        elif kind == "TOOL_FAILED":
            line.state = "failed"
            line.detail = str(data.get("errorMessage") or "")

    def _terminal(self, kind: str, data: dict[str, Any]) -> None:
        if isinstance(data.get("usage"), dict):
            self.usage = dict(data["usage"])
        if kind != "MESSAGE_SUSPENDED":
            for line in self.tools.values():
                line.state = "stopped" if line.state == "running" else line.state
        if kind == "MESSAGE_COMPLETED":
            self.status = "completed"
            self.finish_reason = data.get("finishReason")
            self.pending_ask = None
        elif kind == "MESSAGE_SUSPENDED":
            self.status = "suspended"
            reason = data.get("suspendReason") or {}
            self.suspend_message = str(reason.get("message") or reason.get("type") or "")
            self.suspend_type = str(reason["type"]) if reason.get("type") else None
        else:
            self.status = "failed"
            self.error_message = str(data.get("errorMessage") or "the run failed")
            self.error_code = data.get("errorCode")
            self.recoverable = bool(data.get("recoverable"))
            self.pending_ask = None

    def snapshot(self) -> dict[str, Any]:
        """The widget's ``snapshot`` trait (the JavaScript writes the same shape)."""
        snapshot = Snapshot(
            request_id=self.request_id,
            status="running" if self.status == "starting" else self.status,
            final_text=self.text,
            last_seq=self.last_seq,
            error_message=(self.error_message or None) if self.status == "failed" else None,
            # The same field the widget writes, so a reload that reads this snapshot first says
            # why the run waits ("Waiting for your approval") instead of a bare "Suspended".
            suspend_reason=(self.suspend_type or None) if self.status == "suspended" else None,
        )
        return snapshot.model_dump(by_alias=True, exclude_none=True)


def digest(envelopes: Iterable[dict[str, Any]]) -> RunDigest:
    """The digest of a sequence of envelopes."""
    result = RunDigest()
    for envelope in envelopes:
        result.apply(envelope)
    return result


def transcript_markdown(prompt: str, envelopes: Iterable[dict[str, Any]]) -> str:
    """Prompt, one line per tool call, the answer, and how the run ended, as markdown."""
    return render_markdown(prompt, digest(envelopes))


def render_markdown(prompt: str, run: RunDigest) -> str:
    """The transcript of an already folded run (``text/markdown``, inert)."""
    quoted = "\n".join(
        f"> {line}" if line else ">" for line in inert_markdown(prompt.strip()).splitlines()
    )
    parts = [f"**neta** \u00b7 prompt:\n\n{quoted or '> (empty prompt)'}"]
    if run.tools:
        parts.append("\n".join(_tool_line(line) for line in run.tools.values()))
    if run.text.strip():
        parts.append(inert_markdown(run.text.strip()))
    parts.append(f"*{inert_text(_ending(run))}*")
    return "\n\n".join(parts) + "\n"


def render_text(prompt: str, run: RunDigest) -> str:
    """The same transcript as plain text (``text/plain``): shown as written, never rendered."""
    quoted = "\n".join(f"> {line}" for line in plain_text(prompt.strip()).splitlines())
    parts = [f"neta \u00b7 prompt:\n{quoted or '> (empty prompt)'}"]
    if run.tools:
        parts.append("\n".join(_tool_text(line) for line in run.tools.values()))
    if run.text.strip():
        parts.append(plain_text(run.text.strip()))
    parts.append(plain_text(_ending(run)))
    return "\n\n".join(parts) + "\n"


def _tool_line(line: ToolLine) -> str:
    text = f"- {code_span(line.name)}"
    if args := _short_arguments(line.arguments):
        text += f" {code_span(args)}"
    return f"{text} {inert_text(_tool_outcome(line))}"


def _tool_text(line: ToolLine) -> str:
    args = _short_arguments(line.arguments)
    return plain_text(f"- {line.name}{f' {args}' if args else ''} {_tool_outcome(line)}")


def _tool_outcome(line: ToolLine) -> str:
    marks = {"completed": "\u2713", "failed": "\u2717", "running": "\u2026", "stopped": "stopped"}
    text = marks[line.state]
    if line.images:
        text += f" ({line.images} image{'s' if line.images > 1 else ''})"
    if line.state == "failed" and line.detail:
        text += f" \u2014 {_one_line(_last_line(line.detail), 120)}"
    return text


def _short_arguments(arguments: str) -> str:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return _one_line(arguments, _ARG_WIDTH) if arguments.strip() else ""
    if not isinstance(value, dict) or not value:
        return ""
    return ", ".join(
        f"{key}={_one_line(v if isinstance(v, str) else json.dumps(v), _ARG_WIDTH)}"
        for key, v in value.items()
    )


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.replace("`", "'").split())
    return flat if len(flat) <= width else flat[: width - 1] + "\u2026"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text


_PLAIN_STOP = ("the run was cancelled", "the run was stopped", "stopped by the user")
"""What the server says of a plain Stop: "stopped" says it already."""


def _ending(run: RunDigest) -> str:
    tokens = run.usage.get("totalTokens")
    usage = f" \u00b7 {tokens:,} tokens" if isinstance(tokens, int) and tokens else ""
    ident = f" \u00b7 {run.request_id}" if run.request_id else ""
    match run.status:
        case "completed":
            reason = " (step limit reached)" if run.finish_reason == "MAX_STEPS" else ""
            return f"completed{reason}{usage}{ident}"
        case "failed" if run.error_code == "USER_CANCELLED":
            # Stopped by the user (or a prompt sent in its place): no failure.
            message = _one_line(run.error_message or "", 200)
            why = "" if message.lower().rstrip(".") in _PLAIN_STOP else f": {message}"
            return f"stopped{why}{usage}{ident}"
        case "failed":
            retry = " (can be retried)" if run.recoverable else ""
            return f"failed: {_one_line(run.error_message or '', 200)}{retry}{ident}"
        case "suspended":
            return f"waiting: {run.suspend_message or 'suspended'}{ident}"
        case _:
            return f"running\u2026{ident}"
