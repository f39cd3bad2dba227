"""The SQLite backend's records: runs, sessions, entries, inputs and attachments as tables.

A record write commits at once, together with the events pending before it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .contract import SessionChanges
from .db import Database
from .records import UNREADABLE, AttachmentRecord, Entry, RunRecord, RunStatus, SessionRecord

_ENTRY_INSERT = (
    "INSERT INTO entries (entry_id, session_id, parent_id, role, message, request_id, created)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _as_is(value: Any) -> Any:
    return value


_SESSION_COLUMNS: dict[str, Callable[[Any], Any]] = {
    "leaf_entry_id": _as_is,
    "always_allow": json.dumps,
    "todo": json.dumps,
    "thinking_level": _as_is,
}
"""The columns :meth:`SqliteRecords.update_session` may set, and how each is stored."""


class SqliteRecords:
    """:class:`~neta_jupyter.store.contract.RecordBackend` on the shared :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # --- runs

    async def insert_run(self, run: RunRecord) -> None:
        """Store a new run."""
        self._db.execute(
            "INSERT INTO runs (request_id, principal, session_id, status, model, created, updated,"
            " imported, prompt, options, state, parent_request_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run.request_id,
                run.principal,
                run.session_id,
                run.status,
                run.model,
                run.created,
                run.created,
                int(run.imported),
                run.prompt,
                json.dumps(run.options),
                json.dumps(run.state),
                run.parent_request_id,
            ),
        )

    async def update_run(
        self, request_id: str, status: RunStatus, state: dict[str, Any], *, with_events: bool
    ) -> None:
        """Set a run's status and state (with the pending events: kept while writes fail)."""
        write = self._db.execute_or_keep if with_events else self._db.execute
        write(
            "UPDATE runs SET status = ?, state = ?, updated = ? WHERE request_id = ?",
            (status, json.dumps(state), time.time(), request_id),
        )

    async def get_run(self, request_id: str) -> RunRecord | None:
        """The run, if it exists."""
        rows = self._db.query("SELECT * FROM runs WHERE request_id = ?", (request_id,))
        return _run(rows[0]) if rows else None

    async def find_runs(
        self,
        *,
        principal: str | None,
        session_id: str | None,
        status: RunStatus | None,
        parent_request_id: str | None,
        limit: int,
    ) -> list[RunRecord]:
        """Runs matching every filter given, newest first."""
        clauses, params = [], []
        for column, value in (
            ("principal", principal),
            ("session_id", session_id),
            ("status", status),
            ("parent_request_id", parent_request_id),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._db.query(
            f"SELECT * FROM runs {where} ORDER BY created DESC LIMIT ?", (*params, limit)
        )
        return [_run(r) for r in rows]

    # --- sessions and the tree

    async def insert_session(self, session: SessionRecord) -> SessionRecord:
        """Store ``session``, unless its principal has one of that name: then that one."""
        rows = self._db.query(
            "SELECT * FROM sessions WHERE principal = ? AND name = ?",
            (session.principal, session.name),
        )
        if rows:
            return _session(rows[0])
        self._db.execute(
            "INSERT INTO sessions (session_id, principal, name, created) VALUES (?, ?, ?, ?)",
            (session.session_id, session.principal, session.name, session.created),
        )
        return session

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, if it exists."""
        rows = self._db.query("SELECT * FROM sessions WHERE session_id = ?", (session_id,))
        return _session(rows[0]) if rows else None

    async def find_sessions(self, principal: str) -> list[SessionRecord]:
        """The principal's sessions, newest first."""
        rows = self._db.query(
            "SELECT * FROM sessions WHERE principal = ? ORDER BY created DESC", (principal,)
        )
        return [_session(r) for r in rows]

    async def update_session(self, session_id: str, changes: SessionChanges) -> None:
        """Set some of a session's fields."""
        if not changes:
            return
        columns = ", ".join(f"{name} = ?" for name in changes)
        values = [_SESSION_COLUMNS[name](value) for name, value in changes.items()]
        self._db.execute(
            f"UPDATE sessions SET {columns} WHERE session_id = ?", (*values, session_id)
        )

    async def add_usage(
        self, session_id: str, inputs: int, outputs: int, unknown: bool
    ) -> SessionRecord | None:
        """Add a turn's tokens to the session's totals; the session after."""
        self._db.execute(
            "UPDATE sessions SET input_tokens = input_tokens + ?,"
            " output_tokens = output_tokens + ?,"
            " has_unknown_usage = MAX(has_unknown_usage, ?) WHERE session_id = ?",
            (inputs, outputs, int(unknown), session_id),
        )
        return await self.get_session(session_id)

    async def insert_entries(
        self, session_id: str, entries: list[Entry], *, move_leaf: bool
    ) -> None:
        """Add entries to the tree (the last one its leaf with ``move_leaf``), at once."""
        statements: list[tuple[str, tuple[object, ...]]] = [
            (
                _ENTRY_INSERT,
                (
                    e.entry_id,
                    session_id,
                    e.parent_id,
                    e.role,
                    json.dumps(e.message),
                    e.request_id,
                    e.created,
                ),
            )
            for e in entries
        ]
        if move_leaf:
            statements.append(
                (
                    "UPDATE sessions SET leaf_entry_id = ? WHERE session_id = ?",
                    (entries[-1].entry_id, session_id),
                )
            )
        self._db.atomic(statements)

    async def update_entry(self, entry_id: str, message: dict[str, Any]) -> None:
        """Replace an entry's message."""
        self._db.execute(
            "UPDATE entries SET message = ? WHERE entry_id = ?", (json.dumps(message), entry_id)
        )

    async def get_entry(self, entry_id: str) -> Entry | None:
        """One entry."""
        rows = self._db.query("SELECT * FROM entries WHERE entry_id = ?", (entry_id,))
        return _entry(rows[0]) if rows else None

    async def session_entries(self, session_id: str) -> list[Entry]:
        """Every entry of the session's tree, in the order they were added."""
        rows = self._db.query(
            "SELECT * FROM entries WHERE session_id = ? ORDER BY created, rowid", (session_id,)
        )
        return [_entry(r) for r in rows]

    # --- supplementary inputs

    async def insert_input(self, input_id: str, request_id: str, content: str) -> None:
        """Queue input for a run."""
        self._db.execute(
            "INSERT INTO inputs (input_id, request_id, content, created) VALUES (?, ?, ?, ?)",
            (input_id, request_id, content, time.time()),
        )

    async def pending_inputs(self, request_id: str) -> list[tuple[str, str]]:
        """The run's inputs not yet consumed, oldest first."""
        rows = self._db.query(
            "SELECT input_id, content FROM inputs WHERE request_id = ? AND consumed = 0"
            " ORDER BY created, rowid",
            (request_id,),
        )
        return [(r[0], r[1]) for r in rows]

    async def consume_input(self, input_id: str) -> None:
        """Mark an input consumed."""
        self._db.execute("UPDATE inputs SET consumed = 1 WHERE input_id = ?", (input_id,))

    # --- attachments

    async def put_attachment(self, record: AttachmentRecord) -> None:
        """Store an attachment's record (replacing one at the same virtual path)."""
        self._db.execute(
            "INSERT OR REPLACE INTO attachments (attachment_id, principal, session_id, request_id,"
            " virtual_path, file_name, content_type, file_size, disk_path, created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.attachment_id,
                record.principal,
                record.session_id,
                record.request_id,
                record.virtual_path,
                record.file_name,
                record.content_type,
                record.file_size,
                record.disk_path,
                time.time(),
            ),
        )

    async def get_attachment(self, virtual_path: str) -> AttachmentRecord | None:
        """The attachment stored at ``virtual_path``."""
        rows = self._db.query(
            "SELECT attachment_id, principal, session_id, request_id, virtual_path, file_name,"
            " content_type, file_size, disk_path FROM attachments WHERE virtual_path = ?",
            (virtual_path,),
        )
        return AttachmentRecord(*rows[0]) if rows else None

    # --- notebook edits

    async def put_notebook_edit(self, edit_id: str, request_id: str, body: dict[str, Any]) -> None:
        """Store a notebook edit (replacing the one with the same id, keeping its place)."""
        self._db.execute(
            "INSERT INTO notebook_edits (edit_id, request_id, body, created) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (edit_id) DO UPDATE SET body = excluded.body",
            (edit_id, request_id, json.dumps(body), time.time()),
        )

    async def notebook_edits(self, request_id: str) -> list[dict[str, Any]]:
        """The run's notebook edits, oldest first."""
        rows = self._db.query(
            "SELECT body FROM notebook_edits WHERE request_id = ? ORDER BY created, rowid",
            (request_id,),
        )
        return [json.loads(r[0]) for r in rows]

    async def get_notebook_edit(self, edit_id: str) -> dict[str, Any] | None:
        """One notebook edit."""
        rows = self._db.query("SELECT body FROM notebook_edits WHERE edit_id = ?", (edit_id,))
        return json.loads(rows[0][0]) if rows else None


def _run(row: Any) -> RunRecord:
    return RunRecord(
        request_id=row["request_id"],
        principal=row["principal"],
        session_id=row["session_id"],
        status=row["status"],
        model=row["model"],
        created=row["created"],
        prompt=row["prompt"],
        imported=bool(row["imported"]),
        options=_document(row["options"]),
        state=_document(row["state"]),
        parent_request_id=row["parent_request_id"],
    )


def _document(text: Any) -> dict[str, Any]:
    """A run's stored JSON document; one that is damaged reads as ``{UNREADABLE: why}``."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as exc:
        return {UNREADABLE: f"it is not JSON ({exc})"}
    if not isinstance(value, dict):
        return {UNREADABLE: f"it is a JSON {type(value).__name__}, not an object"}
    return value


def _session(row: Any) -> SessionRecord:
    return SessionRecord(
        session_id=row["session_id"],
        principal=row["principal"],
        name=row["name"],
        created=row["created"],
        leaf_entry_id=row["leaf_entry_id"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        has_unknown_usage=bool(row["has_unknown_usage"]),
        always_allow=json.loads(row["always_allow"]),
        todo=json.loads(row["todo"]),
        thinking_level=row["thinking_level"],
    )


def _entry(row: Any) -> Entry:
    return Entry(
        entry_id=row["entry_id"],
        session_id=row["session_id"],
        parent_id=row["parent_id"],
        role=row["role"],
        message=json.loads(row["message"]),
        request_id=row["request_id"],
        created=row["created"],
    )
