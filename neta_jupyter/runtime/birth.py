"""One birth of a run, whatever starts it: a user, compaction, a ``delegate`` call, a crew.

A run is born by the same steps in the same order, so every kind of run has the same first
events and a restart finds each in the same shape: its record is created; its lease is taken
(when its starter holds it, as a top-level start does); ``SESSION_CREATED`` is its first event;
then the starter's own first entries elsewhere (``before_entry``: a sub-agent's entry in its
parent's tree); then its prompt as the first entry of its branch, which becomes its leaf.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..events import ErrorCode, EventType, SessionData
from ..store import StorageError, new_id
from .activation.endings import fail_run
from .data.runs import Run
from .data.state import RunOptions, RunState
from .host import RunHost
from .log.emitter import RunEmitter
from .log.tree import SessionTree


@dataclass(frozen=True, slots=True)
class FirstEntry:
    """The run's prompt as the first entry of its branch of the session."""

    parent_id: str | None
    """The entry it hangs below (``None``: a root)."""
    moves_leaf: bool = True
    """A top-level run moves its session's leaf; children and crew tasks branch off."""
    extra: dict[str, Any] = field(default_factory=dict)
    """More keys of the entry's message (a prompt's attachments)."""


def top_level_run(
    principal: str, session_id: str, model: str, prompt: str, options: RunOptions, state: RunState
) -> Run:
    """A run a request starts, before it is born."""
    return Run(
        request_id=new_id("r"),
        principal=principal,
        session_id=session_id,
        status="running",
        model=model,
        created=time.time(),
        prompt=prompt,
        options=options,
        state=state,
    )


async def begin_run(
    host: RunHost,
    run: Run,
    first: FirstEntry | None,
    *,
    hold: bool = False,
    before_entry: Callable[[], Awaitable[None]] | None = None,
) -> RunEmitter:
    """Create ``run`` and write its first events and entries; return its emitter.

    ``hold``: take the run's lease now (a run started by a request executes here at once).
    ``first``: ``None`` for a run without a prompt of its own (compaction).
    """
    await host.runs.create(run)
    if hold:
        await host.takeover.take(run.request_id, "RUN_NOT_ACTIVE", "the new run is held elsewhere")
    emitter = await host.emitter(run)
    try:
        await _first_events(host, run, emitter, first, before_entry)
    except StorageError as exc:
        # Stored as running with no task: make it end, now or once the store can be written.
        await fail_run(
            host.runs,
            run,
            emitter,
            ErrorCode.INTERNAL_ERROR,
            f"the run could not be saved: {exc.reason}",
            recoverable=False,
        )
        raise
    return emitter


async def _first_events(
    host: RunHost,
    run: Run,
    emitter: RunEmitter,
    first: FirstEntry | None,
    before_entry: Callable[[], Awaitable[None]] | None,
) -> None:
    if first is None:
        emitter.emit(EventType.SESSION_CREATED, SessionData(session_id=run.session_id))
        await host.runs.save(run)
        return
    user_id = new_id("e")
    emitter.emit(  # the run's first event, before the tree's
        EventType.SESSION_CREATED,
        SessionData(
            session_id=run.session_id,
            user_message_id=user_id,
            assistant_message_id=run.state.assistant_message_id,
        ),
    )
    if before_entry is not None:
        await before_entry()
    tree = SessionTree(host.store.records, emitter.log, moves_leaf=first.moves_leaf)
    await tree.add(
        run.session_id,
        "user",
        {"role": "user", "content": run.prompt, **first.extra},
        request_id=run.request_id,
        parent_id=first.parent_id,
        entry_id=user_id,
        run=emitter,
    )
    run.state.leaf = user_id
    await host.runs.save(run)
