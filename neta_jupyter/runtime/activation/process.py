"""Process events (seed 000): progress of long tools and skills as sanitised, throttled events.

A tool reports through the :class:`ProcessReporter` in its context. Reports pass
:func:`sanitize_payload`, then a :class:`ProcessEventBuffer` that coalesces bursts per operation;
what the buffer lets through is published as a PROCESS_EVENT *and* appended by a
:class:`ProcessLog` to one JSONL file per operation, so the file always matches the stream.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ...events import EventData, EventType, ProcessData, SkillData
from ...events.redact import Redactor
from ...tools.registry import (
    ProcessLevel,
    ProcessSource,
    ProcessStatus,
    ProcessTarget,
    SkillEvent,
)

DEFAULT_INTERVAL = 0.4
"""Seconds over which repeated progress of one operation is coalesced."""
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled", "skipped"})
REDACTED = "[redacted]"
LOG_FOLDER = "neta-process-events"

_SECRET_WORDS = ("apikey", "token", "password", "secret", "authorization", "credential")
_SEPARATORS = re.compile(r"[-_\s.]+")
_MAX_STRING = 2_000
_MAX_ITEMS = 50
_MAX_DEPTH = 6
_MAX_PAYLOAD_BYTES = 16_000
_MAX_MESSAGE = 1_000
_MAX_SAMPLED = 60
"""Stages of a call's operations kept for its history entry (the JSONL log has every event)."""
_SAFE_ID = re.compile(r"[^A-Za-z0-9_.-]+")


# --- sanitising ----------------------------------------------------------------------------


def is_secret_key(key: str) -> bool:
    """Whether a key names a secret, whatever its case or separator style.

    ``api_key``, ``apiKey``, ``API-KEY``, ``x-api-key``, ``accessToken`` and ``client_secret``
    all are: lower-casing folds camelCase, and separators are dropped before matching.
    """
    folded = _SEPARATORS.sub("", key).lower()
    return any(word in folded for word in _SECRET_WORDS)


def sanitize_payload(obj: Any) -> Any:
    """A copy safe to publish: secret-named values redacted, long strings and lists cut.

    Works on any JSON-like value (dicts nested in lists nested in dicts …); values that are not
    JSON become their ``repr`` so the result always serialises.
    """
    return _sanitize(obj, 0)


def _sanitize(obj: Any, depth: int) -> Any:
    if isinstance(obj, dict):
        if depth >= _MAX_DEPTH:
            return f"[{len(obj)} keys, nested too deep]"
        out: dict[str, Any] = {}
        for index, (key, value) in enumerate(obj.items()):
            if index == _MAX_ITEMS:
                out["…"] = f"[{len(obj) - _MAX_ITEMS} more keys]"
                break
            name = str(key)
            out[name] = REDACTED if is_secret_key(name) else _sanitize(value, depth + 1)
        return out
    if isinstance(obj, list | tuple):
        if depth >= _MAX_DEPTH:
            return f"[{len(obj)} items, nested too deep]"
        items = [_sanitize(v, depth + 1) for v in obj[:_MAX_ITEMS]]
        if len(obj) > _MAX_ITEMS:
            items.append(f"[{len(obj) - _MAX_ITEMS} more items]")
        return items
    if isinstance(obj, str):
        return _cut(obj, _MAX_STRING)
    if obj is None or isinstance(obj, bool | int | float):
        return obj
    return _cut(repr(obj), _MAX_STRING)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters]"


def _bounded_payload(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    """Sanitised, and replaced by a note if it is still too large for one event."""
    if payload is None:
        return None
    clean: dict[str, Any] = sanitize_payload(payload)
    size = len(json.dumps(clean, ensure_ascii=False).encode())
    if size > _MAX_PAYLOAD_BYTES:
        return {"truncated": True, "sizeBytes": size, "keys": list(clean)[:_MAX_ITEMS]}
    return clean


# --- throttling ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Operation:
    last_emit: float
    pending: ProcessData | None = None
    timer: asyncio.TimerHandle | None = None


class ProcessEventBuffer:
    """Coalesces each operation's progress to at most one event per ``interval``.

    The first event of an operation goes out at once; later ones inside the interval replace
    each other and the latest goes out when the interval has elapsed. A change of stage or level
    first lets the pending event out, so every stage reached shows in the timeline. A terminal
    status lets the pending event out, then goes out itself at once.
    """

    def __init__(
        self, emit: Callable[[ProcessData], None], interval: float = DEFAULT_INTERVAL
    ) -> None:
        self._emit = emit
        self._interval = interval
        self._operations: dict[str, _Operation] = {}

    def push(self, event: ProcessData) -> None:
        """Offer one event; it is emitted now, later, or replaced by a newer one."""
        op = self._operations.get(event.operation_id)
        if event.status in TERMINAL_STATUSES:
            if op is not None:
                self._release(event.operation_id, op)
                del self._operations[event.operation_id]
            self._emit(event)
            return
        now = _clock()
        if op is None:
            self._operations[event.operation_id] = _Operation(last_emit=now)
            self._emit(event)
            return
        if op.pending is not None and _kind(op.pending) != _kind(event):
            self._release(event.operation_id, op)
        if op.pending is None and now - op.last_emit >= self._interval:
            op.last_emit = now
            self._emit(event)
            return
        op.pending = event
        if op.timer is None:
            delay = max(0.0, op.last_emit + self._interval - now)
            op.timer = _schedule(delay, lambda: self._due(event.operation_id))

    def flush(self) -> None:
        """Emit every pending event now (e.g. when the tool call ends)."""
        for operation_id, op in list(self._operations.items()):
            self._release(operation_id, op)

    def open_operations(self) -> list[str]:
        """Operations that have emitted but not reached a terminal status, in order."""
        return list(self._operations)

    def _due(self, operation_id: str) -> None:
        op = self._operations.get(operation_id)
        if op is not None:
            op.timer = None
            self._release(operation_id, op)

    def _release(self, operation_id: str, op: _Operation) -> None:
        if op.timer is not None:
            op.timer.cancel()
            op.timer = None
        if op.pending is not None:
            event, op.pending = op.pending, None
            op.last_emit = _clock()
            self._emit(event)


def _kind(event: ProcessData) -> tuple[str | None, str, str]:
    return event.stage, event.level, event.status


def _clock() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return 0.0


def _schedule(delay: float, callback: Callable[[], None]) -> asyncio.TimerHandle | None:
    """A timer on the running loop; without one the caller's flush is the only release."""
    try:
        return asyncio.get_running_loop().call_later(delay, callback)
    except RuntimeError:
        return None


# --- the JSONL log -------------------------------------------------------------------------


class ProcessLog:
    """Appends emitted process events to ``<data_dir>/neta-process-events/<session>/<op>.jsonl``.

    Each line is the event's ``data`` exactly as it travels on the wire.
    """

    def __init__(self, data_dir: Path, redactor: Redactor | None = None) -> None:
        self.data_dir = data_dir
        self._redactor = redactor if redactor is not None else Redactor()

    def reference(self, session_id: str, operation_id: str) -> str:
        """The log's path relative to the data dir (what results and metadata carry)."""
        return f"{LOG_FOLDER}/{_safe(session_id)}/{_safe(operation_id)}.jsonl"

    def append(self, session_id: str, event: ProcessData) -> str:
        """Append one event; returns the log's reference."""
        ref = self.reference(session_id, event.operation_id)
        path = self.data_dir / ref
        path.parent.mkdir(parents=True, exist_ok=True)
        data = event.model_dump(mode="json", by_alias=True, exclude_none=True)
        line = json.dumps(self._redactor.value(data), separators=(",", ":"), ensure_ascii=False)
        with path.open("a", encoding="utf-8") as file:
            file.write(line + "\n")
        return ref

    def read(self, reference: str) -> list[dict[str, Any]]:
        """Every event of one log, oldest first."""
        text = (self.data_dir / reference).read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _safe(name: str) -> str:
    return _SAFE_ID.sub("_", name).strip(".") or "_"


# --- the reporter a tool call gets ---------------------------------------------------------


class Emitter(Protocol):
    """Publishes one event of the run (:class:`..emitter.RunEmitter`)."""

    def emit(self, event_type: EventType, data: EventData) -> int:
        """Append to the run's log; returns the seq."""
        ...


class ProcessReporter:
    """The :class:`~neta_jupyter.tools.registry.ProcessSink` of one tool call.

    Without a call (``tool_call_id=None``) it reports a run's preparation of its tools.
    """

    def __init__(
        self,
        emitter: Emitter,
        log: ProcessLog,
        *,
        session_id: str,
        tool_call_id: str | None,
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self._emitter = emitter
        self._log = log
        self._session_id = session_id
        self._tool_call_id = tool_call_id
        self._buffer = ProcessEventBuffer(self._publish, interval)
        self._references: dict[str, str] = {}
        self._reported: dict[str, str] = {}  # of the operations the tool itself reported
        self._latest: dict[str, ProcessData] = {}
        self._sample: dict[tuple[str, str | None], ProcessData] = {}
        self._closed = False

    @property
    def operation_id(self) -> str:
        """The call's own operation (a run's preparation, without a call)."""
        return f"op_{self._tool_call_id or 'tools'}"

    @property
    def references(self) -> list[str]:
        """JSONL logs written so far, one per operation."""
        return list(dict.fromkeys(self._references.values()))

    def report(
        self,
        *,
        status: ProcessStatus = "running",
        stage: str | None = None,
        message: str | None = None,
        current: float | None = None,
        total: float | None = None,
        percent: float | None = None,
        level: ProcessLevel = "info",
        payload: dict[str, Any] | None = None,
        operation_id: str | None = None,
        parent_operation_id: str | None = None,
        target_type: ProcessTarget = "tool",
        source: ProcessSource = "tool",
    ) -> None:
        """Report progress of this call (or of a sub-operation: pass its ``operation_id``)."""
        if self._closed:
            return
        own = operation_id or self.operation_id
        parent = parent_operation_id
        if parent is None and own != self.operation_id:
            parent = self.operation_id
        self._push(
            ProcessData(
                operation_id=own,
                parent_operation_id=parent,
                target_type=target_type,
                source=source,
                stage=stage,
                status=status,
                level=level,
                message=None if message is None else _cut(message, _MAX_MESSAGE),
                current=current,
                total=total,
                percent=None if percent is None else max(0.0, min(100.0, percent)),
                tool_call_id=self._tool_call_id,
                payload=_bounded_payload(payload),
            )
        )

    def skill(
        self,
        event: SkillEvent,
        name: str,
        *,
        description: str | None = None,
        message: str | None = None,
    ) -> None:
        """Publish SKILL_ACTIVATED, SKILL_DEACTIVATED or SKILL_MISSING."""
        event_type = {
            "activated": EventType.SKILL_ACTIVATED,
            "deactivated": EventType.SKILL_DEACTIVATED,
            "missing": EventType.SKILL_MISSING,
        }[event]
        self._emitter.emit(
            event_type,
            SkillData(
                skill_name=name,
                description=description,
                operation_id=None if event == "missing" else self.operation_id,
                message=message,
            ),
        )

    def close(self, status: ProcessStatus) -> list[str]:
        """End the call: release pending events, end open operations with ``status``.

        Returns the JSONL references of the operations the tool reported (not of the runtime's
        own, such as an execution's progress: those are for the user, not the model).
        """
        if not self._closed:
            self._buffer.flush()
            # Sub-operations first, so a parent never ends before its children.
            for operation_id in reversed(self._buffer.open_operations()):
                latest = self._latest[operation_id]
                self._push(
                    ProcessData(
                        operation_id=operation_id,
                        parent_operation_id=latest.parent_operation_id,
                        target_type=latest.target_type,
                        source=latest.source,
                        stage=latest.stage,
                        status=status,
                        level="error" if status == "failed" else "info",
                        tool_call_id=self._tool_call_id,
                    )
                )
            self._closed = True
        return list(dict.fromkeys(self._reported.values()))

    def _push(self, event: ProcessData) -> None:
        self._latest[event.operation_id] = event
        self._buffer.push(event)

    def sampled(self) -> list[ProcessData]:
        """What the session tree keeps of the timeline: each stage's last event, in order."""
        return list(self._sample.values())

    def _publish(self, event: ProcessData) -> None:
        key = (event.operation_id, event.stage)
        if key in self._sample or len(self._sample) < _MAX_SAMPLED:
            self._sample[key] = event
        self._emitter.emit(EventType.PROCESS_EVENT, event)
        reference = self._log.append(self._session_id, event)
        self._references[event.operation_id] = reference
        if event.source != "runtime":
            self._reported[event.operation_id] = reference
