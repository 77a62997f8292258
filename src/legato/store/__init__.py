"""Stores: where run journals, sessions, approvals and memory live.

The protocols (`RunStore`, `SessionStore`, `SessionCatalog`, `ApprovalStore`) are the
boundary; `SQLiteStore` is the embedded default (one WAL-mode file per project, by default
`.legato/legato.db`). A PostgreSQL store implements the same protocols.
"""

from legato.store._base import (
    ApprovalRecord,
    ApprovalStore,
    RunInfo,
    RunStore,
    SessionCatalog,
    SessionInfo,
    SessionStore,
    Store,
)
from legato.store._db import DEFAULT_PATH, Database
from legato.store._schema import schema_version
from legato.store._sqlite import SQLiteStore

__all__ = [
    "DEFAULT_PATH",
    "ApprovalRecord",
    "ApprovalStore",
    "Database",
    "RunInfo",
    "RunStore",
    "SQLiteStore",
    "SessionCatalog",
    "SessionInfo",
    "SessionStore",
    "Store",
    "schema_version",
]
