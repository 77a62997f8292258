"""`PostgresDatabase`: a PostgreSQL database opened safely — checked, migrated, typed errors.

psycopg 3 (the `postgres` extra) is imported when a database is opened, never before.
Every write is one transaction (`write`), committed when its block ends and rolled back
if it raises; every read sees one snapshot (`read`). legato's tables live in their own
PostgreSQL schema, `legato`, next to whatever else the database holds.

The schema is an append-only list of migrations; `legato.schema_migrations` records one
row per migration applied. Opening takes a transaction-scoped advisory lock first, so
when several processes open a fresh database at once, exactly one applies each migration
and the others find them applied.

No psycopg error leaves this module: each becomes a `StoreError` (a lost connection, a
refused login, a conflicting write), and the DSN's password is masked in every message.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Generator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol, cast

from legato.exceptions import MissingDependency, SchemaTooNew, StoreCorrupted, StoreError

if TYPE_CHECKING:
    import psycopg

__all__ = ["PG_MIGRATIONS", "ConnectionPool", "PostgresDatabase", "pg_schema_version"]

SCHEMA = "legato"
"""The PostgreSQL schema (namespace) holding legato's tables."""

LOCK_KEY = 0x4C47544F
"""The advisory lock migrations run under ("LGTO", as the SQLite `application_id`)."""

PgMigration = Callable[["psycopg.Connection[Any]"], None]
PG_MIGRATIONS: list[PgMigration] = []
"""Every PostgreSQL migration, oldest first; never edit or reorder one that has shipped."""

pg_migration = PG_MIGRATIONS.append


def pg_schema_version() -> int:
    """The PostgreSQL schema version this legato writes (the number of migrations)."""
    return len(PG_MIGRATIONS)


class ConnectionPool(Protocol):
    """A pool of psycopg connections, such as `psycopg_pool.ConnectionPool`."""

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """Lend a connection for the length of a `with` block."""
        ...


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        package = "psycopg"
        raise MissingDependency(package, "postgres") from exc
    return psycopg


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*(@)")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact_dsn(text: str, *, secret: str | None = None) -> str:
    """`text` with a DSN's password (in URL or key=value form, or `secret`) masked."""
    if secret:
        text = text.replace(secret, "****")
    text = _URL_PASSWORD.sub(r"\1****\2", text)
    return _KV_PASSWORD.sub(r"\1****", text)


class PostgresDatabase:
    """A legato PostgreSQL database, from a DSN or a connection pool (safe across threads).

    With a DSN, the database keeps one connection (reopened if it breaks) and serializes
    this process's transactions on it; with a pool, each transaction borrows a connection.
    Open it in the process that uses it: a connection must not cross a `fork`.
    """

    def __init__(self, target: str | ConnectionPool, *, connect_timeout: float = 10.0) -> None:
        """Connect and migrate.

        Args:
            target: A libpq DSN (`"postgresql://user:pass@host/db"` or `"host=... dbname=..."`)
                or a pool with a `connection()` context manager.
            connect_timeout: Seconds to wait for the server when connecting.

        Raises:
            MissingDependency: psycopg is not installed (the `postgres` extra).
            StoreError: The server cannot be reached or refuses the login.
            StoreCorrupted: The `legato` schema holds tables of another program.
            SchemaTooNew: The database was migrated by a newer legato.
        """
        self._psycopg = _psycopg()
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        self._connect_timeout = connect_timeout
        if isinstance(target, str):
            self._dsn: str | None = target
            self._pool: ConnectionPool | None = None
            self._secret = self._password(target)
            self.name = self._describe(target)
        else:
            self._dsn, self._pool, self._secret = None, target, None
            self.name = f"postgresql pool {type(target).__name__}"
        self._migrate()

    def _password(self, dsn: str) -> str | None:
        try:
            return self._psycopg.conninfo.conninfo_to_dict(dsn).get("password")
        except self._psycopg.Error:
            return None

    def _describe(self, dsn: str) -> str:
        """The DSN without its password, for messages."""
        try:
            info = self._psycopg.conninfo.conninfo_to_dict(dsn)
        except self._psycopg.Error as exc:
            raise StoreError(self._redact(f"invalid PostgreSQL DSN: {exc}")) from None
        host = info.get("host") or info.get("hostaddr") or "localhost"
        port = info.get("port") or "5432"
        user = f"{info['user']}@" if info.get("user") else ""
        return f"postgresql://{user}{host}:{port}/{info.get('dbname') or ''}"

    def _redact(self, text: str) -> str:
        return redact_dsn(text, secret=self._secret)

    # -- connections -------------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            conn.close()
            self._conn = None
        assert self._dsn is not None
        fresh: psycopg.Connection[Any] = self._psycopg.connect(
            self._dsn, autocommit=True, connect_timeout=max(1, round(self._connect_timeout))
        )
        self._conn = fresh
        return fresh

    @contextmanager
    def _borrow(self) -> Generator[psycopg.Connection[Any]]:
        if self._pool is not None:
            with self._pool.connection() as conn:
                yield conn
            return
        with self._lock:
            yield self._connection()

    @contextmanager
    def write(
        self, *, conflict: Exception | None = None, missing: Exception | None = None
    ) -> Generator[psycopg.Connection[Any]]:
        """A write transaction: committed when the block ends, rolled back if it raises.

        Args:
            conflict: Raised instead when a statement breaks a unique key (a concurrent or
                repeated write); without it, a `StoreError` says which.
            missing: Raised instead when a row refers to one that is not stored (a foreign
                key); without it, a `StoreError` says which.
        """
        errors = self._psycopg.errors
        try:
            with self._borrow() as conn, conn.transaction():
                yield conn
        except errors.UniqueViolation as exc:
            if conflict is not None:
                raise conflict from None
            raise StoreError(self._redact(f"{self.name}: conflicting write: {exc}")) from None
        except errors.ForeignKeyViolation as exc:
            if missing is not None:
                raise missing from None
            raise StoreError(self._redact(f"{self.name}: refers to a missing row: {exc}")) from None
        except self._psycopg.Error as exc:
            raise self._translate(exc) from None

    @contextmanager
    def read(self) -> Generator[psycopg.Connection[Any]]:
        """A consistent read: every query in the block sees the same snapshot."""
        try:
            with self._borrow() as conn, conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield conn
        except self._psycopg.Error as exc:
            raise self._translate(exc) from None

    def _translate(self, exc: BaseException) -> StoreError:
        text = self._redact(str(exc).strip() or type(exc).__name__)
        if isinstance(exc, self._psycopg.OperationalError):
            return StoreError(f"{self.name}: the PostgreSQL connection failed: {text}")
        return StoreError(f"{self.name}: {text}")

    # -- migrations ----------------------------------------------------------------------------

    def _migrate(self) -> None:
        try:
            with self.write() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                version = self._check_identity(conn)
                for number, step in enumerate(PG_MIGRATIONS[version:], start=version + 1):
                    step(conn)
                    conn.execute(
                        "INSERT INTO legato.schema_migrations(version) VALUES (%s)", (number,)
                    )
        except BaseException:
            self.close()
            raise

    def _check_identity(self, conn: psycopg.Connection[Any]) -> int:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (SCHEMA,),
            ).fetchall()
        ]
        if tables and "schema_migrations" not in tables:
            raise StoreCorrupted(
                self.name,
                f"the schema {SCHEMA!r} holds tables of another program; refusing to write to it",
            )
        conn.execute("CREATE SCHEMA IF NOT EXISTS legato")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS legato.schema_migrations ("
            " version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT coalesce(max(version), 0) FROM legato.schema_migrations")
        version = int(cast(tuple[int], row.fetchone())[0])  # an aggregate returns one row
        if version > pg_schema_version():
            raise SchemaTooNew(self.name, version, pg_schema_version())
        return version

    @property
    def version(self) -> int:
        """The schema version of the database (the migrations applied)."""
        with self.read() as conn:
            row = conn.execute("SELECT coalesce(max(version), 0) FROM legato.schema_migrations")
            return int(cast(tuple[int], row.fetchone())[0])

    def close(self) -> None:
        """Close this database's own connection (a pool is left to its owner)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


# -- the schema --------------------------------------------------------------------------------


@pg_migration
def _runs_and_events(db: psycopg.Connection[Any]) -> None:
    db.execute(
        """
        CREATE TABLE legato.runs (
            run_id      text PRIMARY KEY,
            ord         bigint GENERATED ALWAYS AS IDENTITY,
            session     text,
            agent       text NOT NULL,
            model       text NOT NULL,
            created_at  double precision NOT NULL,
            status      text NOT NULL DEFAULT 'running'
        )
        """
    )
    db.execute("CREATE INDEX runs_by_session ON legato.runs(session, created_at)")
    db.execute(
        """
        CREATE TABLE legato.events (
            run_id  text NOT NULL REFERENCES legato.runs(run_id) ON DELETE CASCADE,
            seq     integer NOT NULL,
            kind    text NOT NULL,
            data    text NOT NULL,
            PRIMARY KEY (run_id, seq)
        )
        """
    )


@pg_migration
def _sessions(db: psycopg.Connection[Any]) -> None:
    db.execute(
        """
        CREATE TABLE legato.sessions (
            name        text PRIMARY KEY,
            created_at  double precision NOT NULL,
            updated_at  double precision NOT NULL,
            forked_from text,
            context     text
        )
        """
    )
    db.execute(
        """
        CREATE TABLE legato.session_messages (
            session   text NOT NULL REFERENCES legato.sessions(name)
                          ON DELETE CASCADE ON UPDATE CASCADE,
            position  integer NOT NULL,
            turn      integer NOT NULL,
            run_id    text,
            message   text NOT NULL,
            PRIMARY KEY (session, position)
        )
        """
    )


@pg_migration
def _approvals(db: psycopg.Connection[Any]) -> None:
    db.execute(
        """
        CREATE TABLE legato.approvals (
            request_id  text PRIMARY KEY,
            ord         bigint GENERATED ALWAYS AS IDENTITY,
            run_id      text NOT NULL,
            payload     text NOT NULL,
            state       text NOT NULL DEFAULT 'parked',
            decision    text,
            created_at  double precision NOT NULL,
            decided_at  double precision
        )
        """
    )
    db.execute("CREATE INDEX approvals_by_state ON legato.approvals(state, created_at)")
