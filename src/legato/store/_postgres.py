"""`PostgresStore`: journals, sessions and approvals in PostgreSQL, shared by many machines."""

from __future__ import annotations

from legato.store._core import Dialect, SqlStore
from legato.store._pg import SCHEMA, ConnectionPool, PostgresDatabase

__all__ = ["PostgresStore"]

_DIALECT = Dialect(
    param="%s",
    schema=f"{SCHEMA}.",
    # the server's clock, so machines with skewed clocks still order runs and sessions alike
    now="extract(epoch from clock_timestamp())::double precision",
    ord="ord",
    lock=" FOR UPDATE",
)
"""PostgreSQL's spelling: legato's schema, the server's clock, row locks until commit."""


class PostgresStore(SqlStore):
    """Run journals, sessions and approvals in a PostgreSQL database (psycopg 3).

    ```py
    store = PostgresStore("postgresql://legato:secret@db.internal/legato")
    agent = Agent(model, store=store)
    agent.run_sync("Hello", session="chat")
    ```

    The same `Store` as `SQLiteStore`, for deployments where several processes or machines
    share sessions and journals. Every write is one transaction; concurrent turns of one
    session are serialized by a lock on the session's row, so none is lost or interleaved.
    Long-term memory (`SQLiteMemory`) stays in SQLite, and its `forget` does not redact
    what this store holds (see docs/memory.md). The store's logic is `SqlStore`'s, shared
    with `SQLiteStore`; only the SQL's spelling (`_DIALECT`) and the driver are PostgreSQL's.
    """

    def __init__(self, target: str | ConnectionPool, *, connect_timeout: float = 10.0) -> None:
        """Connect to the database and migrate it.

        Args:
            target: A libpq DSN, or a pool of psycopg connections (`psycopg_pool`).
            connect_timeout: Seconds to wait for the server when connecting.
        """
        self.db = PostgresDatabase(target, connect_timeout=connect_timeout)
        super().__init__(self.db, _DIALECT)

    @property
    def name(self) -> str:
        """The database, without its password."""
        return self.db.name

    def close(self) -> None:
        """Close the store's connection."""
        self.db.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.name!r})"
