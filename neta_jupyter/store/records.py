"""Runs, sessions, the session tree, supplementary inputs and attachments, on the shared database.

Persistence timing follows seed 004: the user message is written at once, the assistant message
when it is complete, each tool result when it is complete.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from ..events.redact import Redactor
from .db import Database

RunStatus = Literal["running", "suspended", "completed", "failed"]
EntryRole = Literal["user", "assistant", "tool", "summary", "subagent"]
"""``subagent``: a child run a run delegated to, and what became of it (its message holds the
child's ``childRequestId``); the child's own entries hang below it."""


def new_id(prefix: str) -> str:
    """A short random id with a readable prefix."""
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


@dataclass(slots=True)
class RunRecord:
    """One run (one requestId)."""

    request_id: str
    principal: str
    session_id: str
    status: RunStatus
    model: str
    created: float
    prompt: str = ""
    imported: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    """What the run was started with: the runtime's ``RunOptions`` as a JSON document (with its
    ``version``; the store never reads it)."""
    state: dict[str, Any] = field(default_factory=dict)
    """Where its loop is: the runtime's ``RunState`` as a JSON document (likewise)."""
    parent_request_id: str | None = None
    """The run that started this one as a sub-agent (``None`` for a run a user started)."""


@dataclass(slots=True)
class SessionRecord:
    """A conversation: a tree of entries with a current leaf."""

    session_id: str
    principal: str
    name: str
    created: float
    leaf_entry_id: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    has_unknown_usage: bool = False
    always_allow: list[str] = field(default_factory=list)
    todo: list[dict[str, Any]] = field(default_factory=list)
    thinking_level: str | None = None
    """How hard the model thinks in this session's runs (``None``: the endpoint's default)."""


@dataclass(slots=True)
class Entry:
    """A node of the session tree: one message."""

    entry_id: str
    session_id: str
    parent_id: str | None
    role: EntryRole
    message: dict[str, Any]
    request_id: str | None
    created: float


@dataclass(slots=True)
class AttachmentRecord:
    """A stored file and who may download it."""

    attachment_id: str
    principal: str
    session_id: str
    request_id: str
    virtual_path: str
    file_name: str
    content_type: str
    file_size: int
    disk_path: str


class RecordStore:
    """Reads and writes of everything but events."""

    def __init__(self, db: Database, *, redactor: Redactor | None = None) -> None:
        self._db = db
        self.redactor = redactor if redactor is not None else Redactor()
        """Every text written (prompts, messages, state, inputs) loses the secrets it knows."""

    def _json(self, value: Any) -> str:
        return json.dumps(self.redactor.value(value))

    # --- runs

    def create_run(self, run: RunRecord) -> None:
        """Persist a new run."""
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
                self.redactor(run.prompt),
                self._json(run.options),
                self._json(run.state),
                run.parent_request_id,
            ),
        )

    def save_run(self, run: RunRecord, *, keep: bool = False) -> None:
        """Persist a run's status and loop state.

        With ``keep``, a write the store cannot make now is kept with the pending events and
        made with them (a terminal event and the status it implies become durable together).
        """
        write = self._db.execute_or_keep if keep else self._db.execute
        write(
            "UPDATE runs SET status = ?, state = ?, updated = ? WHERE request_id = ?",
            (run.status, self._json(run.state), time.time(), run.request_id),
        )

    def get_run(self, request_id: str) -> RunRecord | None:
        """The run, if it exists."""
        rows = self._db.query("SELECT * FROM runs WHERE request_id = ?", (request_id,))
        return _run(rows[0]) if rows else None

    def runs(
        self,
        *,
        principal: str | None = None,
        session_id: str | None = None,
        status: RunStatus | None = None,
        parent_request_id: str | None = None,
        limit: int = 200,
    ) -> list[RunRecord]:
        """Runs matching the filters, newest first."""
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

    def get_or_create_session(self, principal: str, name: str) -> SessionRecord:
        """The principal's session called ``name``, created on first use."""
        rows = self._db.query(
            "SELECT * FROM sessions WHERE principal = ? AND name = ?", (principal, name)
        )
        if rows:
            return _session(rows[0])
        record = SessionRecord(new_id("s"), principal, name, time.time(), None)
        self._db.execute(
            "INSERT INTO sessions (session_id, principal, name, created) VALUES (?, ?, ?, ?)",
            (record.session_id, principal, name, record.created),
        )
        return record

    def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, if it exists."""
        rows = self._db.query("SELECT * FROM sessions WHERE session_id = ?", (session_id,))
        return _session(rows[0]) if rows else None

    def sessions(self, principal: str) -> list[SessionRecord]:
        """The principal's sessions, newest first."""
        rows = self._db.query(
            "SELECT * FROM sessions WHERE principal = ? ORDER BY created DESC", (principal,)
        )
        return [_session(r) for r in rows]

    def add_entry(
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
        self._db.execute(
            "INSERT INTO entries (entry_id, session_id, parent_id, role, message, request_id,"
            " created) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                entry.entry_id,
                session_id,
                parent_id,
                role,
                json.dumps(message),
                request_id,
                entry.created,
            ),
        )
        if move_leaf:
            self.set_leaf(session_id, entry.entry_id)
        return entry

    def update_entry(self, entry_id: str, message: dict[str, Any]) -> None:
        """Replace an entry's message; its place in the tree never changes."""
        self._db.execute(
            "UPDATE entries SET message = ? WHERE entry_id = ?", (self._json(message), entry_id)
        )

    def set_leaf(self, session_id: str, entry_id: str | None) -> None:
        """Move the session's current leaf."""
        self._db.execute(
            "UPDATE sessions SET leaf_entry_id = ? WHERE session_id = ?", (entry_id, session_id)
        )

    def get_entry(self, entry_id: str) -> Entry | None:
        """One entry."""
        rows = self._db.query("SELECT * FROM entries WHERE entry_id = ?", (entry_id,))
        return _entry(rows[0]) if rows else None

    def entries(self, session_id: str) -> list[Entry]:
        """Every entry of the session tree, oldest first."""
        rows = self._db.query(
            "SELECT * FROM entries WHERE session_id = ? ORDER BY created, rowid", (session_id,)
        )
        return [_entry(r) for r in rows]

    def path(self, session_id: str, leaf_entry_id: str | None) -> list[Entry]:
        """Entries from the root to ``leaf_entry_id``: the conversation the model sees."""
        by_id = {e.entry_id: e for e in self.entries(session_id)}
        out: list[Entry] = []
        current = leaf_entry_id
        while current is not None and current in by_id:
            out.append(by_id[current])
            current = by_id[current].parent_id
        out.reverse()
        return out

    def add_usage(self, session_id: str, inputs: int, outputs: int, unknown: bool) -> SessionRecord:
        """Add a turn's usage to the session totals."""
        self._db.execute(
            "UPDATE sessions SET input_tokens = input_tokens + ?,"
            " output_tokens = output_tokens + ?,"
            " has_unknown_usage = MAX(has_unknown_usage, ?) WHERE session_id = ?",
            (inputs, outputs, int(unknown), session_id),
        )
        session = self.get_session(session_id)
        assert session is not None
        return session

    def allow_always(self, session_id: str, tool_name: str) -> None:
        """Remember "always allow" for a tool in this session."""
        session = self.get_session(session_id)
        if session is None or tool_name in session.always_allow:
            return
        self._db.execute(
            "UPDATE sessions SET always_allow = ? WHERE session_id = ?",
            (json.dumps([*session.always_allow, tool_name]), session_id),
        )

    def set_todo(self, session_id: str, items: list[dict[str, Any]]) -> None:
        """Replace the session's todo list."""
        self._db.execute(
            "UPDATE sessions SET todo = ? WHERE session_id = ?", (self._json(items), session_id)
        )

    def set_thinking_level(self, session_id: str, level: str | None) -> None:
        """Set how hard the model thinks in the session's next runs."""
        self._db.execute(
            "UPDATE sessions SET thinking_level = ? WHERE session_id = ?", (level, session_id)
        )

    def replace_path(
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
        root = Entry(new_id("e"), session_id, None, "summary", summary, request_id, now)
        chain = [root]
        for entry in kept:
            chain.append(
                Entry(
                    new_id("e"),
                    session_id,
                    chain[-1].entry_id,
                    entry.role,
                    entry.message,
                    entry.request_id,
                    now,
                )
            )
        statements: list[tuple[str, tuple[object, ...]]] = [
            (
                "INSERT INTO entries (entry_id, session_id, parent_id, role, message, request_id,"
                " created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    e.entry_id,
                    session_id,
                    e.parent_id,
                    e.role,
                    self._json(e.message),
                    e.request_id,
                    e.created,
                ),
            )
            for e in chain
        ]
        if move_leaf:
            statements.append(
                (
                    "UPDATE sessions SET leaf_entry_id = ? WHERE session_id = ?",
                    (chain[-1].entry_id, session_id),
                )
            )
        self._db.atomic(statements)
        return chain[-1]

    # --- supplementary inputs

    def add_input(self, request_id: str, content: str) -> str:
        """Queue input for the run's next step boundary."""
        input_id = new_id("in")
        self._db.execute(
            "INSERT INTO inputs (input_id, request_id, content, created) VALUES (?, ?, ?, ?)",
            (input_id, request_id, self.redactor(content), time.time()),
        )
        return input_id

    def pending_inputs(self, request_id: str) -> list[tuple[str, str]]:
        """(input_id, content) not yet consumed, oldest first."""
        rows = self._db.query(
            "SELECT input_id, content FROM inputs WHERE request_id = ? AND consumed = 0"
            " ORDER BY created, rowid",
            (request_id,),
        )
        return [(r[0], r[1]) for r in rows]

    def mark_input_consumed(self, input_id: str) -> None:
        """The input was injected into the conversation."""
        self._db.execute("UPDATE inputs SET consumed = 1 WHERE input_id = ?", (input_id,))

    # --- attachments

    def add_attachment(self, record: AttachmentRecord) -> None:
        """Register a stored file (replacing one at the same virtual path)."""
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

    def get_attachment(self, virtual_path: str) -> AttachmentRecord | None:
        """The file stored at ``virtual_path``."""
        rows = self._db.query(
            "SELECT attachment_id, principal, session_id, request_id, virtual_path, file_name,"
            " content_type, file_size, disk_path FROM attachments WHERE virtual_path = ?",
            (virtual_path,),
        )
        return AttachmentRecord(*rows[0]) if rows else None


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
        options=json.loads(row["options"]),
        state=json.loads(row["state"]),
        parent_request_id=row["parent_request_id"],
    )


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
