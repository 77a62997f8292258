"""The SQLite schema, as an append-only list of migrations.

Never edit or reorder a migration that has shipped: append a new one. The database's
`PRAGMA user_version` is the number of migrations applied; `PRAGMA application_id` marks
the file as legato's, so a foreign SQLite file is refused instead of being written to.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

__all__ = ["APPLICATION_ID", "MIGRATIONS", "schema_version"]

APPLICATION_ID = 0x4C47544F
"""`PRAGMA application_id` of a legato database ("LGTO")."""

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = []
"""Every migration, oldest first; `user_version` counts those applied."""

migration = MIGRATIONS.append


def schema_version() -> int:
    """The schema version this legato writes (the number of migrations)."""
    return len(MIGRATIONS)


@migration
def _runs_and_events(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE runs (
            run_id      TEXT PRIMARY KEY,
            session     TEXT,
            agent       TEXT NOT NULL,
            model       TEXT NOT NULL,
            created_at  REAL NOT NULL,
            status      TEXT NOT NULL DEFAULT 'running'
        )
        """
    )
    db.execute("CREATE INDEX runs_by_session ON runs(session, created_at)")
    db.execute(
        """
        CREATE TABLE events (
            run_id  TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            seq     INTEGER NOT NULL,
            kind    TEXT NOT NULL,
            data    TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID
        """
    )


@migration
def _sessions(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE sessions (
            name        TEXT PRIMARY KEY,
            created_at  REAL NOT NULL,
            updated_at  REAL NOT NULL,
            forked_from TEXT
        )
        """
    )
    db.execute(
        """
        CREATE TABLE session_messages (
            session   TEXT NOT NULL REFERENCES sessions(name)
                          ON DELETE CASCADE ON UPDATE CASCADE,
            position  INTEGER NOT NULL,
            turn      INTEGER NOT NULL,
            run_id    TEXT,
            message   TEXT NOT NULL,
            PRIMARY KEY (session, position)
        ) WITHOUT ROWID
        """
    )


@migration
def _approvals(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE approvals (
            request_id  TEXT PRIMARY KEY,
            run_id      TEXT NOT NULL,
            payload     TEXT NOT NULL,
            state       TEXT NOT NULL DEFAULT 'parked',
            decision    TEXT,
            created_at  REAL NOT NULL,
            decided_at  REAL
        )
        """
    )
    db.execute("CREATE INDEX approvals_by_state ON approvals(state, created_at)")


@migration
def _memory(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE memory_items (
            rowid         INTEGER PRIMARY KEY,
            id            TEXT NOT NULL UNIQUE,
            kind          TEXT NOT NULL,
            text          TEXT NOT NULL,
            scope         TEXT NOT NULL DEFAULT '',
            run_id        TEXT,
            event_seq     INTEGER,
            tool_call_id  TEXT,
            message_index INTEGER,
            source        TEXT NOT NULL,
            created_at    REAL NOT NULL,
            embedding     BLOB
        )
        """
    )
    db.execute("CREATE INDEX memory_by_run ON memory_items(run_id)")
    db.execute("CREATE INDEX memory_by_call ON memory_items(tool_call_id)")
    db.execute(
        """
        CREATE TABLE memory_derivations (
            item_id    TEXT NOT NULL REFERENCES memory_items(id) ON DELETE CASCADE,
            source_id  TEXT NOT NULL REFERENCES memory_items(id) ON DELETE CASCADE,
            PRIMARY KEY (item_id, source_id)
        ) WITHOUT ROWID
        """
    )
    db.execute("CREATE INDEX derivations_by_source ON memory_derivations(source_id)")
    db.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5("
        "text, content='memory_items', content_rowid='rowid', tokenize='porter unicode61')"
    )
    db.execute(
        "CREATE TRIGGER memory_fts_insert AFTER INSERT ON memory_items BEGIN "
        "INSERT INTO memory_fts(rowid, text) VALUES (new.rowid, new.text); END"
    )
    db.execute(
        "CREATE TRIGGER memory_fts_delete AFTER DELETE ON memory_items BEGIN "
        "INSERT INTO memory_fts(memory_fts, rowid, text) VALUES ('delete', old.rowid, old.text); "
        "END"
    )


@migration
def _session_context(db: sqlite3.Connection) -> None:
    # the latest `Compacted` event of a session's runs, so the next run continues the view
    db.execute("ALTER TABLE sessions ADD COLUMN context TEXT")


@migration
def _memory_expiry(db: sqlite3.Connection) -> None:
    # Unix time after which an item is never recalled or listed (NULL: never expires); an
    # item derived from others stores the earliest of its own and its sources' expiry
    db.execute("ALTER TABLE memory_items ADD COLUMN expires_at REAL")
    db.execute(
        "CREATE INDEX memory_by_expiry ON memory_items(expires_at) WHERE expires_at IS NOT NULL"
    )


@migration
def _forgotten_refs(db: sqlite3.Connection) -> None:
    # Runs that were in flight when memory they had seen was forgotten: what they write
    # afterwards is redacted on the way in. `ref` is `item:<id>` or `call:<remember call id>`;
    # only identifiers are kept, never the forgotten text.
    db.execute(
        """
        CREATE TABLE forgotten_refs (
            run_id  TEXT NOT NULL,
            ref     TEXT NOT NULL,
            PRIMARY KEY (run_id, ref)
        ) WITHOUT ROWID
        """
    )
