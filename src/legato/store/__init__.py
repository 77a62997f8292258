"""Stores: where run journals, sessions, approvals and memory live.

The protocols (`RunStore`, `SessionStore`, `SessionCatalog`, `ApprovalTable`) are the
boundary; `SQLiteStore` is the embedded default (one WAL-mode file per project, by default
`.legato/legato.db`). `PostgresStore` implements the same protocols in PostgreSQL, for
processes on several machines sharing sessions, journals and approvals; it needs the
`postgres` extra (psycopg 3), imported only when a store is opened.
"""

from legato.store._base import (
    ApprovalRecord,
    ApprovalTable,
    RunInfo,
    RunStore,
    SessionCatalog,
    SessionInfo,
    SessionStore,
    SessionTurn,
    Store,
    check_names,
)
from legato.store._db import DEFAULT_PATH, Database, is_open_database, open_connections
from legato.store._pg import ConnectionPool, PostgresDatabase, pg_schema_version
from legato.store._postgres import PostgresStore
from legato.store._schema import schema_version
from legato.store._sqlite import SQLiteStore

__all__ = [
    "DEFAULT_PATH",
    "ApprovalRecord",
    "ApprovalTable",
    "ConnectionPool",
    "Database",
    "PostgresDatabase",
    "PostgresStore",
    "RunInfo",
    "RunStore",
    "SQLiteStore",
    "SessionCatalog",
    "SessionInfo",
    "SessionStore",
    "SessionTurn",
    "Store",
    "check_names",
    "is_open_database",
    "open_connections",
    "pg_schema_version",
    "schema_version",
]
