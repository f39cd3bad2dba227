"""The SQLite layout of the store, and the migrations of layouts earlier versions made."""

from __future__ import annotations

import sqlite3

EVENTS_TABLE = """
CREATE TABLE IF NOT EXISTS events (
    key INTEGER PRIMARY KEY,
    event_type TEXT NOT NULL,
    payload TEXT NOT NULL
);
"""
SCHEMA = """
CREATE TABLE IF NOT EXISTS event_streams (
    stream INTEGER PRIMARY KEY,
    request_id TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS ended_streams (
    stream INTEGER PRIMARY KEY,
    ended REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    request_id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,
    model TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    imported INTEGER NOT NULL DEFAULT 0,
    prompt TEXT NOT NULL DEFAULT '',
    options TEXT NOT NULL DEFAULT '{}',
    state TEXT NOT NULL DEFAULT '{}',
    parent_request_id TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_principal ON runs (principal, created);
CREATE INDEX IF NOT EXISTS runs_by_session ON runs (session_id, created);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    name TEXT NOT NULL,
    created REAL NOT NULL,
    leaf_entry_id TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    has_unknown_usage INTEGER NOT NULL DEFAULT 0,
    always_allow TEXT NOT NULL DEFAULT '[]',
    todo TEXT NOT NULL DEFAULT '[]',
    thinking_level TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS sessions_by_name ON sessions (principal, name);
CREATE TABLE IF NOT EXISTS entries (
    entry_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    parent_id TEXT,
    role TEXT NOT NULL,
    message TEXT NOT NULL,
    request_id TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_session ON entries (session_id, created);
CREATE TABLE IF NOT EXISTS inputs (
    input_id TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    content TEXT NOT NULL,
    created REAL NOT NULL,
    consumed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS notebook_edits (
    edit_id TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    body TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS notebook_edits_by_run ON notebook_edits (request_id, created);
CREATE TABLE IF NOT EXISTS attachments (
    attachment_id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    virtual_path TEXT NOT NULL UNIQUE,
    file_name TEXT NOT NULL,
    content_type TEXT NOT NULL,
    file_size INTEGER NOT NULL,
    disk_path TEXT NOT NULL,
    created REAL NOT NULL
);
"""

SEQ_BITS = 32
"""An event's ``key`` is ``stream << SEQ_BITS | seq``: the run's stream number and its seq packed
into the table's integer primary key. Appends then extend one B-tree at its end and a replay is
a range of it, about half the cost of a (request_id, seq) key."""


def migrate(conn: sqlite3.Connection) -> None:
    """Bring a database an earlier version created to this version's layout."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
    if "todo" not in columns:
        conn.execute("ALTER TABLE sessions ADD COLUMN todo TEXT NOT NULL DEFAULT '[]'")
    if "thinking_level" not in columns:
        conn.execute("ALTER TABLE sessions ADD COLUMN thinking_level TEXT")
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "parent_request_id" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN parent_request_id TEXT")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS runs_by_parent ON runs (parent_request_id)"
        " WHERE parent_request_id IS NOT NULL"
    )
    columns = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
    if "request_id" in columns:  # events keyed by (request_id, seq)
        conn.executescript(
            f"""
            BEGIN;
            ALTER TABLE events RENAME TO events_by_request;
            {EVENTS_TABLE}
            INSERT INTO event_streams (request_id)
                SELECT DISTINCT request_id FROM events_by_request ORDER BY request_id;
            INSERT INTO events (key, event_type, payload)
                SELECT (s.stream << {SEQ_BITS}) | e.seq, e.event_type, e.payload
                FROM events_by_request e JOIN event_streams s USING (request_id);
            DROP TABLE events_by_request;
            COMMIT;
            """
        )
