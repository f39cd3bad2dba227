"""What a session is asked outside a run: whose it is, where its tree goes on, how it thinks."""

from __future__ import annotations

import time

from ..store import SessionRecord, new_id
from ..store.record_store import RecordStore
from .data.runs import Run
from .data.state import RunState, check_thinking_level
from .data.steps import Compact
from .errors import RunNotFound
from .log.tree import SessionTree


async def own_session(
    records: RecordStore, principal: str, session_id: str | None, name: str | None
) -> SessionRecord:
    """The principal's session ``session_id``; without one, the session ``name`` (made if new)."""
    if session_id is not None:
        session = await records.get_session(session_id)
        if session is None or session.principal != principal:
            raise RunNotFound(f"no session with id {session_id!r}", code="SESSION_NOT_FOUND")
        return session
    return await records.get_or_create_session(principal, name or new_id("session"))


def compact_run(
    principal: str, session: SessionRecord, model: str, instructions: str | None
) -> Run:
    """A run of one ``Compact`` step that summarises the session's older turns."""
    return Run(
        request_id=new_id("r"),
        principal=principal,
        session_id=session.session_id,
        status="running",
        model=model,
        created=time.time(),
        prompt="/compact",
        state=RunState(
            leaf=session.leaf_entry_id,
            next=Compact(scope="manual", instructions=instructions),
        ),
    )


async def switch_leaf(
    records: RecordStore, tree: SessionTree, principal: str, session_id: str, entry_id: str | None
) -> None:
    """Continue the session's conversation from another entry of its tree."""
    session = await own_session(records, principal, session_id, None)
    if entry_id is not None:
        entry = await records.get_entry(entry_id)
        if entry is None or entry.session_id != session.session_id:
            raise RunNotFound(f"no entry {entry_id!r} in that session", code="ENTRY_NOT_FOUND")
    await tree.switch(session.session_id, entry_id)


async def set_thinking_level(
    records: RecordStore, principal: str, session_id: str, level: str | None
) -> None:
    """How hard the model thinks in the session's next runs (``None``: the default)."""
    check_thinking_level(level)
    session = await own_session(records, principal, session_id, None)
    await records.set_thinking_level(session.session_id, level)
