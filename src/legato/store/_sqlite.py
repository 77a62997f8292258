"""`SQLiteStore`: the embedded default store — journals, sessions and approvals in one file."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import cast

from legato.store._core import Connection, Dialect, SqlStore
from legato.store._db import CLOCK, DEFAULT_PATH, Database
from legato.store._redact import Redactor, run_redactor

__all__ = ["SQLiteStore"]

_DIALECT = Dialect(param="?", schema="", now=f"{CLOCK}()", ord="rowid", lock="")
"""SQLite's spelling: the clock is the write transaction's start (`Database.write`), and
`BEGIN IMMEDIATE` already serializes every writer of the file, so no row lock is needed."""


def _redact(conn: Connection, run_id: str | None) -> Redactor | None:
    return run_redactor(cast(sqlite3.Connection, conn), run_id)  # a `Database` connection


class SQLiteStore(SqlStore):
    """Run journals, sessions and approvals in one SQLite file (WAL mode).

    ```python
    store = SQLiteStore(".legato/legato.db")
    agent = Agent(model, store=store)
    agent.run_sync("Hello", session="chat")
    ```

    Safe for several threads and several processes writing the same file. Every legato
    object on one file in a process (stores, approvals, memory) shares one connection to
    it (see `Database`). When memory in
    the same file forgets an item a running run had seen, that run's later writes (journal
    events, its session turn) are redacted on the way in (see `SQLiteMemory.forget`).
    """

    def __init__(
        self, path: str | Path = DEFAULT_PATH, *, timeout: float = 30.0, db: Database | None = None
    ) -> None:
        """Open the store at `path` (created with its folder if missing).

        Args:
            path: The database file, or `":memory:"`.
            timeout: Seconds a write waits for another writer.
            db: An already open `Database` to share (memory and store in one file).
        """
        self.db = db or Database(path, timeout=timeout)
        super().__init__(self.db, _DIALECT, redact=_redact)

    @property
    def path(self) -> str:
        """The database file."""
        return self.db.path

    def close(self) -> None:
        """Close this store's handle; the file's connection closes with its last handle."""
        self.db.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"
