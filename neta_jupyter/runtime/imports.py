"""History runs registered with their messages and no event stream (their stream answers 409)."""

from __future__ import annotations

import time

from ..store import new_id
from .runs import Run, Runs
from .tree import SessionTree


async def import_run(
    runs: Runs, tree: SessionTree, principal: str, session_name: str, prompt: str, answer: str
) -> Run:
    """Register a history run that has messages but no event stream."""
    session = await runs.records.get_or_create_session(principal, session_name)
    run = Run(
        request_id=new_id("r"),
        principal=principal,
        session_id=session.session_id,
        status="completed",
        model="imported",
        created=time.time(),
        prompt=prompt,
        imported=True,
    )
    await runs.create(run)
    user = await tree.add(
        session.session_id,
        "user",
        {"role": "user", "content": prompt},
        request_id=run.request_id,
        parent_id=session.leaf_entry_id,
    )
    await tree.add(
        session.session_id,
        "assistant",
        {"role": "assistant", "content": answer},
        request_id=run.request_id,
        parent_id=user.entry_id,
    )
    return run
