"""Compaction: summarise older turns with the model and replace the transcript atomically."""

from __future__ import annotations

from ...events.models import CompactionData, CompactionScope, EventType, StatusCode
from ...providers.base import Message, Model, ModelRequest, ProviderError, TextPart
from ...store import Entry
from ..data.runs import Run
from ..log.emitter import RunEmitter, status
from ..log.tree import SessionTree

SUMMARY_SYSTEM = (
    "You compress conversations. Write a faithful, compact summary of the conversation below: "
    "the user's goals, facts learned from tools (file names, variable names, numbers), decisions "
    "made and open questions. Plain text, no preamble."
)
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


def _transcript(entries: list[Entry]) -> str:
    lines = []
    for entry in entries:
        message = entry.message
        content = str(message.get("content", ""))
        if message.get("tool_calls"):
            calls = ", ".join(f"{c['name']}({c['arguments']})" for c in message["tool_calls"])
            content = f"{content}\n[called {calls}]".strip()
        lines.append(f"{message.get('role', entry.role)}: {content}")
    return "\n\n".join(lines)


def split_point(path: list[Entry]) -> int:
    """Index of the current turn's user message: everything before it can be summarised."""
    for index in range(len(path) - 1, -1, -1):
        if path[index].role == "user":
            return index
    return 0


async def compact(
    *,
    model: Model,
    tree: SessionTree,
    run: Run,
    emitter: RunEmitter,
    scope: CompactionScope,
    tokens_before: int,
    budget: int,
    instructions: str | None = None,
) -> bool:
    """Summarise what precedes the current turn; True when the transcript was replaced."""
    path = await tree.records.path(run.session_id, run.state.leaf)
    cut = split_point(path)
    emitter.emit(
        EventType.COMPACTION_START, CompactionData(scope=scope, tokens_before=tokens_before)
    )
    await status(
        emitter,
        StatusCode.CONTEXT_COMPACTING,
        "Compacting the conversation to make room",
        scope="in-loop" if scope != "manual" else "turn-level",
        estInput=tokens_before,
        maxInput=budget,
    )
    if cut == 0:
        emitter.emit(
            EventType.COMPACTION_ERROR,
            CompactionData(
                scope=scope, error_message="nothing before the current turn to summarise"
            ),
        )
        return False
    prompt = _transcript(path[:cut])
    if instructions:
        prompt += f"\n\nWhen summarising, also: {instructions}"
    request = ModelRequest(system=SUMMARY_SYSTEM, messages=[Message("user", prompt)], tools=[])
    try:
        summary = "".join([p.text async for p in model.stream(request) if isinstance(p, TextPart)])
    except ProviderError as exc:
        emitter.emit(
            EventType.COMPACTION_ERROR, CompactionData(scope=scope, error_message=str(exc))
        )
        return False
    if not summary.strip():
        emitter.emit(
            EventType.COMPACTION_ERROR,
            CompactionData(scope=scope, error_message="the model returned an empty summary"),
        )
        return False
    leaf = await tree.replace_path(
        run.session_id,
        {"role": "user", "content": SUMMARY_PREFIX + summary.strip()},
        path[cut:],
        request_id=run.request_id,
        run=emitter,
    )
    run.state.leaf = leaf.entry_id
    after = len(SUMMARY_PREFIX + summary) // 4 + len(_transcript(path[cut:])) // 4
    emitter.emit(
        EventType.COMPACTION_APPLIED,
        CompactionData(
            scope=scope, tokens_before=tokens_before, tokens_after=after, summary=summary.strip()
        ),
    )
    return True
