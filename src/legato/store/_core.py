"""`SqlStore`: the store's logic written once; each backend gives its SQL dialect and driver.

`SQLiteStore` and `PostgresStore` are this class over a database's transactions (`write`,
`read`, each on a DB-API connection), the `Dialect` its SQL is spelled in and, for SQLite
where memory lives, the redaction of a run whose memory was forgotten while it ran.

Every statement is written here once, in a neutral form a `Dialect` renders (once, then
cached): `?` for a parameter, `{runs}` (`{events}`, `{sessions}`, `{messages}`,
`{approvals}`) for legato's tables, `{now}` for the clock, `{ord}` for the order rows were
inserted in, and `{lock}` after a `SELECT` that must lock its row until commit.

What each backend guarantees with it:

- a write is one transaction: SQLite's `BEGIN IMMEDIATE` serializes the writers of a file
  (so a session's turns and an approval's decision queue), PostgreSQL's row locks (`{lock}`
  and the upsert on the session's row) serialize those of one session or one request;
- a conditional `UPDATE` moves an approval's state once, however many processes race;
- a write that breaks a unique key raises the caller's `conflict` (two writers of one run's
  position: `JournalConflict`), one that refers to a missing row its `missing`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, LiteralString, Protocol, cast

from legato.events import Compacted, Journal, JournalEvent, RunStarted
from legato.exceptions import (
    JournalConflict,
    JournalError,
    SessionExists,
    SessionNotFound,
    StoreError,
)
from legato.messages import JsonValue, Message
from legato.store._base import ApprovalRecord, RunInfo, SessionInfo, SessionTurn, check_names
from legato.store._codec import (
    APPROVAL_COLUMNS,
    RUN_COLUMNS,
    SESSION_COLUMNS,
    approval_from_row,
    carried_view,
    dump_event,
    dump_message,
    load_event,
    load_message,
    run_from_row,
    session_from_row,
)
from legato.store._redact import Redactor, redact_rows

__all__ = ["Connection", "Dialect", "Redact", "SqlStore", "Transactions", "Tx"]

Row = tuple[Any, ...]

_STATUS: dict[str, Literal["running", "parked", "finished", "failed"]] = {
    "run_finished": "finished",
    "run_failed": "failed",
    "run_parked": "parked",
    "run_resumed": "running",
}
"""The status a run takes with each of these events."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Dialect:
    """How one database spells the neutral statements of `SqlStore`."""

    param: str
    """The parameter placeholder (`?`, `%s`)."""
    schema: str
    """What goes before a table's name (`""`, `"legato."`)."""
    now: str
    """The clock, as an SQL expression (Unix time, a float)."""
    ord: str
    """The column that orders rows as they were inserted."""
    lock: str
    """What locks the rows a `SELECT` read until the transaction ends (or nothing)."""
    _rendered: dict[str, str] = field(default_factory=dict[str, str], compare=False)

    def sql(self, text: str) -> str:
        """`text` (a neutral statement) in this dialect."""
        found = self._rendered.get(text)
        if found is None:
            s = self.schema
            found = text.format(
                runs=f"{s}runs",
                events=f"{s}events",
                sessions=f"{s}sessions",
                messages=f"{s}session_messages",
                approvals=f"{s}approvals",
                now=self.now,
                ord=self.ord,
                lock=self.lock,
            )
            if self.param != "?":
                found = found.replace("%", "%%").replace("?", self.param)
            self._rendered[text] = found
        return found


class Cursor(Protocol):
    """What `Tx` uses of a DB-API cursor (sqlite3's and psycopg's alike)."""

    @property
    def rowcount(self) -> int:
        """How many rows the last statement changed."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """The remaining rows."""
        ...

    def executemany(self, sql: LiteralString, rows: Sequence[Sequence[Any]], /) -> object:
        """Run a statement once for each row of parameters."""
        ...

    def close(self) -> None:
        """Release the cursor."""
        ...


class Connection(Protocol):
    """What `Tx` uses of a DB-API connection (`sqlite3.Connection`, `psycopg.Connection`)."""

    def execute(self, sql: LiteralString, args: Sequence[Any], /) -> Cursor:
        """Run one statement."""
        ...

    def cursor(self) -> Cursor:
        """A new cursor."""
        ...


class Transactions(Protocol):
    """What `SqlStore` needs of a database: its transactions, each on a `Connection`."""

    def write(
        self, *, conflict: Exception | None = None, missing: Exception | None = None
    ) -> AbstractContextManager[Connection]:
        """A write transaction; `conflict`/`missing` replace a broken unique or foreign key."""
        ...

    def read(self) -> AbstractContextManager[Connection]:
        """A read of one snapshot."""
        ...


Redact = Callable[[Connection, str | None], Redactor | None]
"""The redactor of a run that had seen memory forgotten since (None: nothing to hide)."""


class Tx:
    """One transaction: neutral statements run in the backend's dialect."""

    __slots__ = ("_conn", "_dialect", "_redact")

    def __init__(self, conn: Connection, dialect: Dialect, redact: Redact | None) -> None:
        self._conn = conn
        self._dialect = dialect
        self._redact = redact

    def _sql(self, text: str) -> LiteralString:
        # every statement is one of this module's constants, rendered: never outside text
        return cast(LiteralString, self._dialect.sql(text))

    def one(self, sql: str, args: Sequence[object] = ()) -> Row | None:
        """The first row of a query, or None."""
        row: Row | None = self._conn.execute(self._sql(sql), args).fetchone()
        return row

    def all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """Every row of a query."""
        rows: list[Row] = self._conn.execute(self._sql(sql), args).fetchall()
        return rows

    def run(self, sql: str, args: Sequence[object] = ()) -> int:
        """Run a statement; how many rows it changed."""
        return self._conn.execute(self._sql(sql), args).rowcount

    def many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        """Run a statement once for each row of parameters."""
        cursor = self._conn.cursor()
        try:
            cursor.executemany(self._sql(sql), rows)
        finally:
            cursor.close()

    def redactor(self, run_id: str | None) -> Redactor | None:
        """The redactor of a run that had seen memory forgotten since (None: nothing to hide)."""
        return self._redact(self._conn, run_id) if self._redact is not None else None


_SESSION_QUERY = (
    f"SELECT {SESSION_COLUMNS}, "
    "(SELECT count(*) FROM {messages} m WHERE m.session = s.name), "
    "(SELECT count(DISTINCT turn) FROM {messages} m WHERE m.session = s.name) "
    "FROM {sessions} s"
)
_RUN_QUERY = (
    f"SELECT {RUN_COLUMNS}, "
    "(SELECT count(*) FROM {events} e WHERE e.run_id = r.run_id) FROM {runs} r"
)


class SqlStore:
    """Run journals, sessions and approvals in a SQL database (SQLite's or PostgreSQL's)."""

    def __init__(self, db: Transactions, dialect: Dialect, *, redact: Redact | None = None) -> None:
        """A store on `db`, whose SQL is spelled in `dialect`.

        Args:
            db: The database's transactions.
            dialect: How the database spells the store's statements.
            redact: Where memory lives in the same database: the redactor of a run.
        """
        self._db = db
        self._dialect = dialect
        self._redact = redact

    @contextmanager
    def _write(
        self, *, conflict: Exception | None = None, missing: Exception | None = None
    ) -> Generator[Tx]:
        with self._db.write(conflict=conflict, missing=missing) as conn:
            yield Tx(conn, self._dialect, self._redact)

    @contextmanager
    def _read(self) -> Generator[Tx]:
        with self._db.read() as conn:
            yield Tx(conn, self._dialect, None)

    # -- runs ----------------------------------------------------------------------------------

    def append_events(
        self,
        run_id: str,
        events: Sequence[JournalEvent],
        *,
        start: int,
        session: str | None = None,
        turn: SessionTurn | None = None,
    ) -> None:
        """Store events `start`, `start + 1`, ... of a run in one transaction (with `turn`).

        The run's row is created with its `RunStarted` (at `start=0`); a taken position, or
        a run created twice, is a `JournalConflict` (two writers of one run); appending to
        a run that is not stored is a `JournalError`.
        """
        if not events:
            return
        first = events[0]
        check_names(
            ("run id", run_id),
            ("session name", session),
            ("session name", turn.session if turn is not None else None),
            ("agent name", first.agent if isinstance(first, RunStarted) else None),
            ("model name", first.model if isinstance(first, RunStarted) else None),
        )
        if start == 0 and not isinstance(first, RunStarted):
            msg = f"run {run_id}: the first event must be RunStarted, not {first.kind}"
            raise JournalError(msg)
        data = [dump_event(e) for e in events]
        status = next((_STATUS[e.kind] for e in reversed(events) if e.kind in _STATUS), None)
        written = _dump_turn(turn.messages, turn.context) if turn is not None else None
        taken = JournalConflict(run_id, start)
        unknown = JournalError(f"run {run_id}: no stored run to append to at position {start}")
        with self._write(conflict=taken, missing=unknown) as tx:
            redactor = tx.redactor(run_id)
            if redactor is not None:  # memory this run had seen was forgotten meanwhile
                data = redact_rows(redactor, data)
            if isinstance(first, RunStarted) and start == 0:
                tx.run(
                    "INSERT INTO {runs}(run_id, session, agent, model, created_at) "
                    "VALUES (?, ?, ?, ?, {now})",
                    (run_id, session, first.agent, first.model),
                )
            tx.many(
                "INSERT INTO {events}(run_id, seq, kind, data) VALUES (?, ?, ?, ?)",
                [
                    (run_id, start + i, e.kind, d)
                    for i, (e, d) in enumerate(zip(events, data, strict=True))
                ],
            )
            if status is not None:
                tx.run("UPDATE {runs} SET status = ? WHERE run_id = ?", (status, run_id))
            if turn is not None and written is not None:
                self._insert_turn(tx, turn.session, run_id, *written)

    def load_run(self, run_id: str) -> Journal:
        """The run's journal."""
        check_names(("run id", run_id))
        with self._read() as tx:
            rows = tx.all("SELECT seq, data FROM {events} WHERE run_id = ? ORDER BY seq", (run_id,))
        if not rows:
            msg = f"no stored run with id {run_id!r}"
            raise JournalError(msg)
        events: list[JournalEvent] = []
        for expected, (seq, data) in enumerate(rows):
            if seq != expected:
                msg = f"run {run_id}: event {expected} is missing from the store"
                raise JournalError(msg)
            events.append(load_event(data))
        return Journal(events)

    def list_runs(self, *, session: str | None = None, limit: int = 100) -> list[RunInfo]:
        """The newest runs first, optionally only one session's (at most `limit`, 0 or more)."""
        _check_limit(limit)
        check_names(("session name", session))
        order = " ORDER BY r.created_at DESC, r.{ord} DESC LIMIT ?"
        with self._read() as tx:
            if session is None:
                rows = tx.all(_RUN_QUERY + order, (limit,))
            else:
                rows = tx.all(_RUN_QUERY + " WHERE r.session = ?" + order, (session, limit))
        return [run_from_row(r) for r in rows]

    def run_info(self, run_id: str) -> RunInfo | None:
        """One stored run, or None."""
        check_names(("run id", run_id))
        with self._read() as tx:
            row = tx.one(_RUN_QUERY + " WHERE r.run_id = ?", (run_id,))
        return run_from_row(row) if row is not None else None

    # -- sessions ------------------------------------------------------------------------------

    def load_session(self, name: str, *, create: bool = False) -> list[Message]:
        """The session's messages, oldest first."""
        check_names(("session name", name))
        with self._read() as tx:
            exists = _session_exists(tx, name)
            rows = tx.all(
                "SELECT message FROM {messages} WHERE session = ? ORDER BY position", (name,)
            )
        if not exists:
            if not create:
                raise SessionNotFound(name, self._names())
            with self._write() as tx:
                tx.run(
                    "INSERT INTO {sessions}(name, created_at, updated_at) "
                    "VALUES (?, {now}, {now}) ON CONFLICT (name) DO NOTHING",
                    (name,),
                )
        return [load_message(r[0]) for r in rows]

    def append_turn(
        self,
        name: str,
        messages: Sequence[Message],
        *,
        run_id: str | None,
        context: Compacted | None = None,
    ) -> int:
        """Add one turn's messages to the session (created if missing); return the turn number."""
        check_names(("session name", name), ("run id", run_id))
        dumped, saved = _dump_turn(messages, context)
        with self._write() as tx:
            return self._insert_turn(tx, name, run_id, dumped, saved)

    def session_context(self, name: str) -> Compacted | None:
        """The latest compaction of the session's runs, which its next run continues."""
        check_names(("session name", name))
        with self._read() as tx:
            row = tx.one("SELECT context FROM {sessions} WHERE name = ?", (name,))
        if row is None:
            raise SessionNotFound(name)
        return carried_view(row[0])

    def undo_turn(self, name: str) -> list[Message]:
        """Remove the session's last turn; return its messages (empty if there were none)."""
        check_names(("session name", name))
        last = "session = ? AND turn = (SELECT max(turn) FROM {messages} WHERE session = ?)"
        with self._write() as tx:
            _lock_session(tx, name)
            rows = tx.all(
                f"SELECT message FROM {{messages}} WHERE {last} ORDER BY position", (name, name)
            )
            tx.run(f"DELETE FROM {{messages}} WHERE {last}", (name, name))
            tx.run("UPDATE {sessions} SET updated_at = {now} WHERE name = ?", (name,))
            _drop_stale_context(tx, name)
        return [load_message(r[0]) for r in rows]

    def fork_session(self, name: str, new_name: str, *, at: int | None = None) -> SessionInfo:
        """A new session holding messages `[0, at)` of `name` (all of them when `at` is None)."""
        check_names(("session name", name), ("session name", new_name))
        with self._write(conflict=SessionExists(new_name)) as tx:
            _lock_session(tx, name)
            if _session_exists(tx, new_name):
                raise SessionExists(new_name)
            count = _count_messages(tx, name)
            cut = count if at is None else at
            if not 0 <= cut <= count:
                msg = f"session {name!r} has {count} messages; cannot fork at {at}"
                raise StoreError(msg)
            tx.run(
                "INSERT INTO {sessions}(name, created_at, updated_at, forked_from, context) "
                "SELECT ?, {now}, {now}, name, context FROM {sessions} WHERE name = ?",
                (new_name, name),
            )
            tx.run(
                "INSERT INTO {messages}(session, position, turn, run_id, message) "
                "SELECT ?, position, turn, run_id, message FROM {messages} "
                "WHERE session = ? AND position < ?",
                (new_name, name, cut),
            )
            _drop_stale_context(tx, new_name)
        return self.session_info(new_name)

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, most recently updated first."""
        with self._read() as tx:
            rows = tx.all(_SESSION_QUERY + " ORDER BY s.updated_at DESC, s.name")
        return [session_from_row(r) for r in rows]

    def rename_session(self, name: str, new_name: str) -> None:
        """Rename a session; its messages and runs follow."""
        check_names(("session name", name), ("session name", new_name))
        with self._write(conflict=SessionExists(new_name)) as tx:
            _lock_session(tx, name)
            if _session_exists(tx, new_name):
                raise SessionExists(new_name)
            tx.run("UPDATE {sessions} SET name = ? WHERE name = ?", (new_name, name))
            tx.run("UPDATE {runs} SET session = ? WHERE session = ?", (new_name, name))

    def delete_session(self, name: str) -> None:
        """Delete the session and its messages; its run journals stay."""
        check_names(("session name", name))
        with self._write() as tx:
            if tx.run("DELETE FROM {sessions} WHERE name = ?", (name,)) == 0:
                raise SessionNotFound(name)

    def session_info(self, name: str) -> SessionInfo:
        """What the store knows about one session."""
        check_names(("session name", name))
        with self._read() as tx:
            row = tx.one(_SESSION_QUERY + " WHERE s.name = ?", (name,))
        if row is None:
            raise SessionNotFound(name)
        return session_from_row(row)

    def _names(self) -> list[str]:
        return [s.name for s in self.list_sessions()]

    def _insert_turn(
        self, tx: Tx, name: str, run_id: str | None, dumped: list[str], saved: str | None
    ) -> int:
        """Add a turn inside the caller's write transaction; its number."""
        redactor = tx.redactor(run_id)
        if redactor is not None:
            # memory the run had seen was forgotten while it ran: its new messages are
            # redacted, and its view (perhaps summarized from the forgotten text) dropped
            dumped, saved = redact_rows(redactor, dumped), None
        # the upsert locks the session's row until commit: turns of one session written
        # at once by several processes queue here, and each sees the others' messages
        tx.run(
            "INSERT INTO {sessions}(name, created_at, updated_at, context) "
            "VALUES (?, {now}, {now}, ?) "
            "ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at, "
            "context = excluded.context",
            (name, saved),
        )
        row = tx.one(
            "SELECT coalesce(max(position) + 1, 0), coalesce(max(turn) + 1, 0) "
            "FROM {messages} WHERE session = ?",
            (name,),
        )
        position, turn = (int(row[0]), int(row[1])) if row is not None else (0, 0)
        tx.many(
            "INSERT INTO {messages}(session, position, turn, run_id, message) "
            "VALUES (?, ?, ?, ?, ?)",
            [(name, position + i, turn, run_id, m) for i, m in enumerate(dumped)],
        )
        return turn

    # -- approvals -----------------------------------------------------------------------------

    def park_approval(self, request_id: str, *, run_id: str, payload: JsonValue) -> None:
        """Record a pending approval; parking the same request twice is an error."""
        check_names(("approval id", request_id), ("run id", run_id))
        parked = StoreError(f"approval {request_id!r} is already parked")
        with self._write(conflict=parked) as tx:
            tx.run(
                "INSERT INTO {approvals}(request_id, run_id, payload, created_at) "
                "VALUES (?, ?, ?, {now})",
                (request_id, run_id, json.dumps(payload)),
            )

    def decide_approval(self, request_id: str, decision: JsonValue) -> bool:
        """Decide a parked approval; exactly one caller gets True, across processes.

        One conditional `UPDATE`: the request must still be parked and its run must not
        have ended (finished or failed), both checked in the write that decides. A second
        decider waits for the first's write, then finds the row decided and changes nothing.
        """
        check_names(("approval id", request_id))
        with self._write() as tx:
            return (
                tx.run(
                    "UPDATE {approvals} SET state = 'decided', decision = ?, decided_at = {now} "
                    "WHERE request_id = ? AND state = 'parked' AND NOT EXISTS ("
                    "SELECT 1 FROM {runs} r WHERE r.run_id = {approvals}.run_id "
                    "AND r.status IN ('finished', 'failed'))",
                    (json.dumps(decision), request_id),
                )
                == 1
            )

    def approvals(self, *, run_id: str | None = None) -> list[ApprovalRecord]:
        """Stored approvals, oldest first."""
        check_names(("run id", run_id))
        query = f"SELECT {APPROVAL_COLUMNS} FROM {{approvals}}"
        order = " ORDER BY created_at, {ord}"
        with self._read() as tx:
            if run_id is None:
                rows = tx.all(query + order)
            else:
                rows = tx.all(query + " WHERE run_id = ?" + order, (run_id,))
        return [approval_from_row(r) for r in rows]

    def approval(self, request_id: str) -> ApprovalRecord | None:
        """One stored approval, or None."""
        check_names(("approval id", request_id))
        with self._read() as tx:
            row = tx.one(
                f"SELECT {APPROVAL_COLUMNS} FROM {{approvals}} WHERE request_id = ?", (request_id,)
            )
        return approval_from_row(row) if row is not None else None

    def claim_approval(self, request_id: str) -> bool:
        """Move a decided approval to claimed; exactly one caller gets True.

        One conditional `UPDATE`: a second claimer waits for the first's write, then finds
        the row no longer decided and changes nothing.
        """
        check_names(("approval id", request_id))
        with self._write() as tx:
            return (
                tx.run(
                    "UPDATE {approvals} SET state = 'claimed' "
                    "WHERE request_id = ? AND state = 'decided'",
                    (request_id,),
                )
                == 1
            )


def _check_limit(limit: int) -> None:
    # SQLite reads a negative LIMIT as none, PostgreSQL refuses it: both refuse it here
    if limit < 0:
        msg = f"limit must be 0 or more, not {limit}"
        raise StoreError(msg)


def _lock_session(tx: Tx, name: str) -> None:
    """Lock the session's row until commit; `SessionNotFound` if there is none."""
    if tx.one("SELECT 1 FROM {sessions} WHERE name = ?{lock}", (name,)) is None:
        raise SessionNotFound(name)


def _session_exists(tx: Tx, name: str) -> bool:
    return tx.one("SELECT 1 FROM {sessions} WHERE name = ?", (name,)) is not None


def _count_messages(tx: Tx, name: str) -> int:
    row = tx.one("SELECT count(*) FROM {messages} WHERE session = ?", (name,))
    return int(row[0]) if row is not None else 0


def _drop_stale_context(tx: Tx, name: str) -> None:
    """Forget a carried compaction that covers messages the session no longer has."""
    row = tx.one("SELECT context FROM {sessions} WHERE name = ?", (name,))
    if row is None or row[0] is None:
        return
    if json.loads(row[0]).get("upto", 0) > _count_messages(tx, name):
        tx.run("UPDATE {sessions} SET context = NULL WHERE name = ?", (name,))


def _dump_turn(
    messages: Sequence[Message], context: Compacted | None
) -> tuple[list[str], str | None]:
    """A turn's messages and carried view, as stored."""
    return [dump_message(m) for m in messages], dump_event(context) if context is not None else None
