"""The record store every part of the runtime writes records through, over any backend.

Persistence timing follows seed 004: the user message is written at once, the assistant message
when it is complete, each tool result when it is complete.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from ..events.redact import Redactor
from .contract import RecordBackend, SessionChanges
from .records import (
    AttachmentRecord,
    Entry,
    EntryRole,
    RunRecord,
    RunStatus,
    SessionRecord,
    new_id,
)

EXACT_EDIT_FIELDS = ("before", "after", "cell")
"""The fields of a notebook edit a revert writes back into the notebook, kept unredacted."""


class RecordStore:
    """Reads and writes of everything but events, over a backend's primitives.

    Secrets are cut here, once for every backend: prompts, messages, state and inputs are
    stored redacted.
    """

    def __init__(self, backend: RecordBackend, *, redactor: Redactor | None = None) -> None:
        self._backend = backend
        self.redactor = redactor if redactor is not None else Redactor()
        """Every text written (prompts, messages, state, inputs) loses the secrets it knows."""
        self.attachment_dir: Path | None = None
        """Where attachments' bytes are stored. Records name their files relative to it, so
        servers that mount one shared directory at different paths all find them."""

    # --- runs

    async def create_run(self, run: RunRecord) -> None:
        """Persist a new run."""
        redact = self.redactor
        stored = dataclasses.replace(
            run,
            prompt=redact(run.prompt),
            options=redact.value(run.options),
            state=redact.value(run.state),
        )
        await self._backend.insert_run(stored)

    async def save_run(self, run: RunRecord, *, keep: bool = False) -> None:
        """Persist a run's status and loop state.

        With ``keep``, it becomes durable together with the events appended before it, and a
        write the store cannot make now is kept and made with them (a terminal event and the
        status it implies become durable together).
        """
        state = self.redactor.value(run.state)
        await self._backend.update_run(run.request_id, run.status, state, with_events=keep)

    async def get_run(self, request_id: str) -> RunRecord | None:
        """The run, if it exists."""
        return await self._backend.get_run(request_id)

    async def runs(
        self,
        *,
        principal: str | None = None,
        session_id: str | None = None,
        status: RunStatus | None = None,
        parent_request_id: str | None = None,
        limit: int = 200,
    ) -> list[RunRecord]:
        """Runs matching the filters, newest first."""
        return await self._backend.find_runs(
            principal=principal,
            session_id=session_id,
            status=status,
            parent_request_id=parent_request_id,
            limit=limit,
        )

    # --- sessions and the tree

    async def get_or_create_session(self, principal: str, name: str) -> SessionRecord:
        """The principal's session called ``name``, created on first use."""
        record = SessionRecord(new_id("s"), principal, name, time.time(), None)
        return await self._backend.insert_session(record)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, if it exists."""
        return await self._backend.get_session(session_id)

    async def sessions(self, principal: str) -> list[SessionRecord]:
        """The principal's sessions, newest first."""
        return await self._backend.find_sessions(principal)

    async def add_entry(
        self,
        session_id: str,
        role: EntryRole,
        message: dict[str, Any],
        *,
        request_id: str | None,
        parent_id: str | None,
        entry_id: str | None = None,
        move_leaf: bool = True,
    ) -> Entry:
        """Append an entry under ``parent_id`` and make it the session's leaf.

        Without ``move_leaf`` the leaf stays: a sub-agent writes its own branch while the
        conversation goes on from the run that delegated to it.
        """
        message = self.redactor.value(message)
        entry = Entry(
            entry_id or new_id("e"), session_id, parent_id, role, message, request_id, time.time()
        )
        await self._backend.insert_entries(session_id, [entry], move_leaf=move_leaf)
        return entry

    async def update_entry(self, entry_id: str, message: dict[str, Any]) -> None:
        """Replace an entry's message; its place in the tree never changes."""
        await self._backend.update_entry(entry_id, self.redactor.value(message))

    async def set_leaf(self, session_id: str, entry_id: str | None) -> None:
        """Move the session's current leaf."""
        await self._backend.update_session(session_id, {"leaf_entry_id": entry_id})

    async def get_entry(self, entry_id: str) -> Entry | None:
        """One entry."""
        return await self._backend.get_entry(entry_id)

    async def entries(self, session_id: str) -> list[Entry]:
        """Every entry of the session tree, oldest first."""
        return await self._backend.session_entries(session_id)

    async def path(self, session_id: str, leaf_entry_id: str | None) -> list[Entry]:
        """Entries from the root to ``leaf_entry_id``: the conversation the model sees."""
        by_id = {e.entry_id: e for e in await self.entries(session_id)}
        out: list[Entry] = []
        current = leaf_entry_id
        while current is not None and current in by_id:
            out.append(by_id[current])
            current = by_id[current].parent_id
        out.reverse()
        return out

    async def add_usage(
        self, session_id: str, inputs: int, outputs: int, unknown: bool
    ) -> SessionRecord:
        """Add a turn's usage to the session totals."""
        session = await self._backend.add_usage(session_id, inputs, outputs, unknown)
        assert session is not None
        return session

    async def allow_always(self, session_id: str, tool_name: str) -> None:
        """Remember "always allow" for a tool in this session."""
        session = await self.get_session(session_id)
        if session is None or tool_name in session.always_allow:
            return
        changes: SessionChanges = {"always_allow": [*session.always_allow, tool_name]}
        await self._backend.update_session(session_id, changes)

    async def set_todo(self, session_id: str, items: list[dict[str, Any]]) -> None:
        """Replace the session's todo list."""
        await self._backend.update_session(session_id, {"todo": self.redactor.value(items)})

    async def set_thinking_level(self, session_id: str, level: str | None) -> None:
        """Set how hard the model thinks in the session's next runs."""
        await self._backend.update_session(session_id, {"thinking_level": level})

    async def replace_path(
        self,
        session_id: str,
        summary: dict[str, Any],
        kept: list[Entry],
        request_id: str | None,
        *,
        move_leaf: bool = True,
    ) -> Entry:
        """Atomically start a branch: a summary root, then copies of ``kept``, as the new leaf.

        The old entries stay in the tree (history), but the conversation the model sees from the
        new leaf is the summary plus the kept turn. Without ``move_leaf`` the session's leaf
        stays (a sub-agent's branch).
        """
        now = time.time()
        summary = self.redactor.value(summary)
        chain = [Entry(new_id("e"), session_id, None, "summary", summary, request_id, now)]
        for entry in kept:
            chain.append(
                Entry(
                    new_id("e"),
                    session_id,
                    chain[-1].entry_id,
                    entry.role,
                    self.redactor.value(entry.message),
                    entry.request_id,
                    now,
                )
            )
        await self._backend.insert_entries(session_id, chain, move_leaf=move_leaf)
        return chain[-1]

    # --- supplementary inputs

    async def add_input(self, request_id: str, content: str) -> str:
        """Queue input for the run's next step boundary."""
        input_id = new_id("in")
        await self._backend.insert_input(input_id, request_id, self.redactor(content))
        return input_id

    async def pending_inputs(self, request_id: str) -> list[tuple[str, str]]:
        """(input_id, content) not yet consumed, oldest first."""
        return await self._backend.pending_inputs(request_id)

    async def mark_input_consumed(self, input_id: str) -> None:
        """The input was injected into the conversation."""
        await self._backend.consume_input(input_id)

    # --- attachments

    async def add_attachment(self, record: AttachmentRecord) -> None:
        """Register a stored file (replacing one at the same virtual path)."""
        disk, base = Path(record.disk_path), self.attachment_dir
        if base is not None and disk.is_relative_to(base):
            record = dataclasses.replace(record, disk_path=disk.relative_to(base).as_posix())
        await self._backend.put_attachment(record)

    async def get_attachment(self, virtual_path: str) -> AttachmentRecord | None:
        """The file stored at ``virtual_path``, its ``disk_path`` where this server finds it."""
        found = await self._backend.get_attachment(virtual_path)
        base = self.attachment_dir
        if found is None or base is None or Path(found.disk_path).is_absolute():
            return found
        return dataclasses.replace(found, disk_path=str(base / found.disk_path))

    # --- notebook edits

    async def put_notebook_edit(self, edit_id: str, request_id: str, body: dict[str, Any]) -> None:
        """Keep a notebook edit of a run (again, with the same id, when it is reverted).

        The sources a revert puts back (:data:`EXACT_EDIT_FIELDS`) are kept as they were, like
        the notebook that holds them: a revert that wrote ``[redacted]`` into the user's cell
        would break their code. The rest (the diff, the note) is redacted; events and the edit
        list show only that.
        """
        exact = {k: body[k] for k in EXACT_EDIT_FIELDS if k in body}
        shown = self.redactor.value({k: v for k, v in body.items() if k not in exact})
        await self._backend.put_notebook_edit(edit_id, request_id, {**shown, **exact})

    async def notebook_edits(self, request_id: str) -> list[dict[str, Any]]:
        """The run's notebook edits, oldest first."""
        return await self._backend.notebook_edits(request_id)

    async def get_notebook_edit(self, edit_id: str) -> dict[str, Any] | None:
        """One notebook edit."""
        return await self._backend.get_notebook_edit(edit_id)
