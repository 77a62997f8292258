"""`Database`: one SQLite file opened safely — checked, migrated, in WAL mode.

Every write runs in a `BEGIN IMMEDIATE` transaction, so several processes can write the
same file: SQLite serializes the writers (each waits up to `timeout` seconds for the lock)
and a write is either wholly in the file or not at all.

A process holds one connection per database file, however many legato objects open it
(`SQLiteStore`, `SQLiteApprovalStore`, `SQLiteMemory`, the CLI's stores): `Database`
objects are handles on a shared, reference-counted connection, keyed by the file's
identity (device and inode), so two spellings of one path, or a symlink, share it too.
The file is never opened outside SQLite, not even to read its header: on POSIX, closing
*any* descriptor of a file drops every lock the process holds on it, and a SQLite
connection whose locks were dropped that way can have its write-ahead log deleted under
it by another process, losing every later commit (SQLite's "How To Corrupt" page, 2.2).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
import weakref
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

from legato.exceptions import SchemaTooNew, StoreCorrupted, StoreError, StoreLocked
from legato.store._schema import APPLICATION_ID, MIGRATIONS, schema_version

__all__ = ["CLOCK", "DEFAULT_PATH", "Database", "is_open_database", "open_connections"]

CLOCK = "legato_now"
"""An SQL function of every connection: the Unix time the current write transaction began
(one value for all its statements, as `time.time()` read once when the write got the lock)."""

DEFAULT_PATH = Path(".legato") / "legato.db"
"""Where a project's store lives unless told otherwise (relative to the working directory)."""

_FileKey = tuple[int, int]  # (st_dev, st_ino)


class _Shared:
    """One SQLite connection to one file, shared by every `Database` handle on it."""

    def __init__(self, key: _FileKey | None, path: str, conn: sqlite3.Connection) -> None:
        self.key = key
        self.path = path
        self.conn = conn
        self.lock = threading.RLock()
        self.users = 0
        self.busy_ms = -1
        self.closed = False
        self.now = 0.0  # when the current (or last) write transaction began


# reentrant: a handle collected by the garbage collector while this thread holds the lock
# (inside `_acquire`) releases its share from within it
_registry_lock = threading.RLock()
_registry: dict[_FileKey, _Shared] = {}
_registry_pid: list[int] = []  # the process the registry belongs to (a fork starts afresh)


def _own_registry() -> dict[_FileKey, _Shared]:
    """The registry of this process; a forked child never uses its parent's connections."""
    pid = os.getpid()
    if _registry_pid != [pid]:
        _registry.clear()  # inherited from the parent: abandoned, never closed here
        _registry_pid[:] = [pid]
    return _registry


def _identity(path: str) -> _FileKey | None:
    """The file's (device, inode), from `stat` alone (no descriptor), or None if missing."""
    try:
        st = Path(path).stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreCorrupted(path, f"cannot open: {exc}") from exc
    if stat.S_ISDIR(st.st_mode):
        raise StoreCorrupted(path, "is a directory, not a database file")
    return (st.st_dev, st.st_ino)


def open_connections() -> dict[str, int]:
    """Database files this process holds open, with how many handles share each (a probe)."""
    with _registry_lock:
        return {s.path: s.users for s in _own_registry().values()}


_COMPANIONS = ("-wal", "-shm", "-journal")


def is_open_database(st: os.stat_result) -> bool:
    """Whether `st` is a database file this process holds open, or its -wal, -shm, -journal.

    Opening and closing such a file outside SQLite would drop the connection's locks; the
    workspace's file access asks this first and refuses (`legato.sandbox.Workspace`).
    """
    wanted = (st.st_dev, st.st_ino)
    with _registry_lock:
        shared = list(_own_registry().values())
    for pool in shared:
        if pool.key == wanted:
            return True
        for suffix in _COMPANIONS:
            try:
                other = Path(pool.path + suffix).stat()
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == wanted:
                return True
    return False


def _release(shared: _Shared) -> None:
    """Drop one handle; the last one closes the connection."""
    with _registry_lock:
        shared.users -= 1
        if shared.users > 0:
            return
        if shared.key is not None and _registry.get(shared.key) is shared:
            del _registry[shared.key]
        shared.closed = True
    with shared.lock:
        shared.conn.close()


class Database:
    """A legato SQLite database: a handle on the process's one connection to the file.

    Open it as often as you like (it is safe across threads); every handle on the same file
    shares one connection, and the connection closes when the last handle is closed or
    collected.
    """

    def __init__(self, path: str | Path = DEFAULT_PATH, *, timeout: float = 30.0) -> None:
        """Open (creating if needed) and migrate the database at `path`.

        Args:
            path: The file, or `":memory:"` for a private in-memory database.
            timeout: Seconds a write waits for another process's lock before failing.

        Raises:
            StoreCorrupted: The file is not a SQLite database, belongs to another program,
                or is damaged.
            SchemaTooNew: The file was written by a newer legato.
            StoreLocked: Another program kept the file locked for `timeout` seconds.
        """
        self.path = str(path)
        self.timeout = timeout
        self._busy_ms = max(0, int(timeout * 1000))
        shared = self._acquire()
        self._shared = shared
        self._closed = False
        self._finalizer = weakref.finalize(self, _release, shared)

    def _acquire(self) -> _Shared:
        if self.path == ":memory:":
            shared = _Shared(None, self.path, self._connect())
            try:
                self._setup(shared, memory=True)
            except BaseException:
                shared.conn.close()
                raise
            shared.users = 1
            return shared
        with _registry_lock:
            registry = _own_registry()
            key = _identity(self.path)
            found = registry.get(key) if key is not None else None
            if found is not None:
                found.users += 1
                if not found.closed:
                    return found
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = self._connect()
            try:
                key = _identity(self.path)  # the file exists now (SQLite created it)
                shared = _Shared(key, self.path, conn)
                self._setup(shared, memory=False)
            except BaseException:
                conn.close()
                raise
            shared.users = 1
            if key is not None:
                registry[key] = shared
            return shared

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreCorrupted(self.path, f"cannot open: {exc}") from exc

    def _setup(self, shared: _Shared, *, memory: bool) -> None:
        conn = shared.conn
        shared.busy_ms = self._busy_ms
        try:
            # identify the file through SQLite before anything is written to it: a file of
            # another program is refused untouched (not even switched to WAL mode)
            self._check_identity(conn)
            if not memory:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.create_function(CLOCK, 0, lambda: shared.now)
            self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            raise _translate(self.path, exc) from exc

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = self._check_identity(conn)
        if version == schema_version():
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._check_identity(conn)  # another process may have migrated meanwhile
            for step in MIGRATIONS[version:]:
                step(conn)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={schema_version()}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _check_identity(self, conn: sqlite3.Connection) -> int:
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

    def shares_connection_with(self, other: Database) -> bool:
        """Whether this handle and `other` use the same connection (the same file)."""
        return self._shared is other._shared

    def _enter(self) -> sqlite3.Connection:
        """The shared connection, under its lock, with this handle's busy timeout."""
        if self._closed:
            msg = f"{self.path}: this database handle was closed"
            raise StoreError(msg)
        shared = self._shared
        conn = shared.conn
        if conn.in_transaction:
            msg = (
                f"{self.path}: a transaction was opened inside another one on the same file "
                "(legato objects on one file share one connection per process)"
            )
            raise StoreError(msg)
        if shared.busy_ms != self._busy_ms:
            conn.execute(f"PRAGMA busy_timeout={self._busy_ms}")
            shared.busy_ms = self._busy_ms
        return conn

    @contextmanager
    def write(
        self, *, conflict: Exception | None = None, missing: Exception | None = None
    ) -> Generator[sqlite3.Connection]:
        """A write transaction: committed when the block ends, rolled back if it raises.

        Args:
            conflict: Raised instead when a statement breaks a unique key (a concurrent or
                repeated write); without it, the `sqlite3.IntegrityError` propagates.
            missing: Raised instead when a row refers to one that is not stored (a foreign
                key); without it, the `sqlite3.IntegrityError` propagates.
        """
        with self._shared.lock:
            conn = self._enter()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise _translate(self.path, exc) from exc
            self._shared.now = time.time()
            try:
                yield conn
            except BaseException as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.IntegrityError):
                    text = str(exc)
                    if conflict is not None and text.startswith("UNIQUE constraint failed"):
                        raise conflict from exc
                    if missing is not None and text.startswith("FOREIGN KEY constraint failed"):
                        raise missing from exc
                    raise
                if isinstance(exc, sqlite3.DatabaseError):
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
        with self._shared.lock:
            conn = self._enter()
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                raise _translate(self.path, exc) from exc

    def close(self) -> None:
        """Close this handle; the last handle on the file closes the connection.

        SQLite checkpoints the write-ahead log when the last connection of any process
        closes.
        """
        with self._shared.lock:
            self._closed = True
        self._finalizer()


def _translate(path: str, exc: sqlite3.DatabaseError) -> StoreError:
    text = str(exc)
    if type(exc) is sqlite3.DatabaseError or "malformed" in text or "not a database" in text:
        if "not a database" in text:
            return StoreCorrupted(path, f"not a SQLite database: {text}")
        return StoreCorrupted(path, f"damaged database: {text}")
    if "locked" in text or "busy" in text:
        return StoreLocked(path, f"the database stayed locked by another writer: {text}")
    return StoreError(f"{path}: {text}")
