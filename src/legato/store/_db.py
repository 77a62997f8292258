"""`Database`: one SQLite file opened safely — checked, migrated, in WAL mode.

Every write runs in a `BEGIN IMMEDIATE` transaction, so several processes can write the
same file: SQLite serializes the writers (each waits up to `timeout` seconds for the lock)
and a write is either wholly in the file or not at all.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

from legato.exceptions import SchemaTooNew, StoreCorrupted, StoreError
from legato.store._schema import APPLICATION_ID, MIGRATIONS, schema_version

__all__ = ["DEFAULT_PATH", "Database"]

DEFAULT_PATH = Path(".legato") / "legato.db"
"""Where a project's store lives unless told otherwise (relative to the working directory)."""

_HEADER = b"SQLite format 3\x00"


class Database:
    """A legato SQLite database; use one per process (it is safe across threads)."""

    def __init__(self, path: str | Path = DEFAULT_PATH, *, timeout: float = 30.0) -> None:
        """Open (creating if needed) and migrate the database at `path`.

        Args:
            path: The file, or `":memory:"` for a private in-memory database.
            timeout: Seconds a write waits for another process's lock before failing.

        Raises:
            StoreCorrupted: The file is not a SQLite database, belongs to another program,
                or is damaged.
            SchemaTooNew: The file was written by a newer legato.
        """
        self.path = str(path)
        self._lock = threading.RLock()
        memory = self.path == ":memory:"
        if not memory:
            _check_header(Path(self.path))
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreCorrupted(self.path, f"cannot open: {exc}") from exc
        try:
            self._setup(memory=memory)
        except BaseException:
            self._conn.close()
            raise

    def _setup(self, *, memory: bool) -> None:
        conn = self._conn
        try:
            if not memory:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise _translate(self.path, exc) from exc

    def _migrate(self) -> None:
        with self._lock:
            version = self._check_identity()
            if version == schema_version():
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                version = self._check_identity()  # another process may have migrated meanwhile
                for step in MIGRATIONS[version:]:
                    step(self._conn)
                self._conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                self._conn.execute(f"PRAGMA user_version={schema_version()}")
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def _check_identity(self) -> int:
        conn = self._conn
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if app_id not in (0, APPLICATION_ID):
            raise StoreCorrupted(
                self.path, f"not a legato database (application_id {app_id:#x}); refusing to use it"
            )
        if app_id == 0:
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables or version:
                raise StoreCorrupted(
                    self.path, "a SQLite database of another program; refusing to write to it"
                )
        if version > schema_version():
            raise SchemaTooNew(self.path, version, schema_version())
        return version

    @property
    def version(self) -> int:
        """The schema version of the open file."""
        with self.read() as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def write(self) -> Generator[sqlite3.Connection]:
        """A write transaction: committed when the block ends, rolled back if it raises."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise _translate(self.path, exc) from exc
            try:
                yield conn
            except BaseException as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                    exc, sqlite3.IntegrityError
                ):
                    raise _translate(self.path, exc) from exc
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                conn.execute("ROLLBACK")
                raise _translate(self.path, exc) from exc

    @contextmanager
    def read(self) -> Generator[sqlite3.Connection]:
        """A consistent read: every query in the block sees the same snapshot."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                raise _translate(self.path, exc) from exc

    def close(self) -> None:
        """Close the connection (the WAL is checkpointed by SQLite)."""
        with self._lock:
            self._conn.close()


def _check_header(path: Path) -> None:
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_HEADER))
    except FileNotFoundError:
        return
    except IsADirectoryError as exc:
        raise StoreCorrupted(str(path), "is a directory, not a database file") from exc
    if head and head != _HEADER:
        raise StoreCorrupted(str(path), "not a SQLite database (wrong file header)")


def _translate(path: str, exc: sqlite3.DatabaseError) -> StoreError:
    text = str(exc)
    if type(exc) is sqlite3.DatabaseError or "malformed" in text or "not a database" in text:
        return StoreCorrupted(path, f"damaged database: {text}")
    if "locked" in text or "busy" in text:
        return StoreError(f"{path}: the database stayed locked by another writer: {text}")
    return StoreError(f"{path}: {text}")
