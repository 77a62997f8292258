"""`PostgresStore`: journals, sessions and approvals in PostgreSQL, shared by many machines."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, LiteralString, cast

from legato.events import Compacted, Journal, JournalEvent, RunStarted
from legato.exceptions import (
    JournalConflict,
    JournalError,
    SessionExists,
    SessionNotFound,
    StoreError,
)
from legato.messages import JsonValue, Message
from legato.store._base import ApprovalRecord, RunInfo, SessionInfo, SessionTurn
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
from legato.store._pg import ConnectionPool, PostgresDatabase

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStore"]

NOW: LiteralString = "extract(epoch from clock_timestamp())::double precision"
"""The server's clock, so machines with skewed clocks still order runs and sessions alike."""

_STATUS: dict[str, Literal["running", "parked", "finished", "failed"]] = {
    "run_finished": "finished",
    "run_failed": "failed",
    "run_parked": "parked",
    "run_resumed": "running",
}


class PostgresStore:
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
    what this store holds (see docs/memory.md).
    """

    def __init__(self, target: str | ConnectionPool, *, connect_timeout: float = 10.0) -> None:
        """Connect to the database and migrate it.

        Args:
            target: A libpq DSN, or a pool of psycopg connections (`psycopg_pool`).
            connect_timeout: Seconds to wait for the server when connecting.
        """
        self.db = PostgresDatabase(target, connect_timeout=connect_timeout)

    @property
    def name(self) -> str:
        """The database, without its password."""
        return self.db.name

    def close(self) -> None:
        """Close the store's connection."""
        self.db.close()

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
        """Store events `start`, `start + 1`, ... of a run in one transaction (with `turn`)."""
        if not events:
            return
        rows = [(run_id, start + i, e.kind, dump_event(e)) for i, e in enumerate(events)]
        status = next((_STATUS[e.kind] for e in reversed(events) if e.kind in _STATUS), None)
        first = events[0]
        if start == 0 and not isinstance(first, RunStarted):
            msg = f"run {run_id}: the first event must be RunStarted, not {first.kind}"
            raise JournalError(msg)
        taken = JournalConflict(run_id, start)
        unknown = JournalError(f"run {run_id}: no stored run to append to at position {start}")
        with self.db.write(conflict=taken, missing=unknown) as conn:
            if isinstance(first, RunStarted) and start == 0:
                conn.execute(
                    "INSERT INTO legato.runs(run_id, session, agent, model, created_at) "
                    f"VALUES (%s, %s, %s, %s, {NOW})",
                    (run_id, session, first.agent, first.model),
                )
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO legato.events(run_id, seq, kind, data) VALUES (%s, %s, %s, %s)",
                    rows,
                )
            if status is not None:
                conn.execute(
                    "UPDATE legato.runs SET status = %s WHERE run_id = %s", (status, run_id)
                )
            if turn is not None:
                _insert_turn(conn, turn.session, run_id, *_dump_turn(turn.messages, turn.context))

    def load_run(self, run_id: str) -> Journal:
        """The run's journal."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT seq, data FROM legato.events WHERE run_id = %s ORDER BY seq", (run_id,)
            ).fetchall()
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
        """The newest runs first, optionally only one session's."""
        query = (
            f"SELECT {RUN_COLUMNS}, "
            "(SELECT count(*) FROM legato.events e WHERE e.run_id = r.run_id) FROM legato.runs r "
            "WHERE (%s::text IS NULL OR r.session = %s) "
            "ORDER BY r.created_at DESC, r.ord DESC LIMIT %s"
        )
        with self.db.read() as conn:
            rows = conn.execute(query, (session, session, limit)).fetchall()
        return [run_from_row(r) for r in rows]

    def run_info(self, run_id: str) -> RunInfo | None:
        """One stored run, or None."""
        query = (
            f"SELECT {RUN_COLUMNS}, "
            "(SELECT count(*) FROM legato.events e WHERE e.run_id = r.run_id) FROM legato.runs r "
            "WHERE r.run_id = %s"
        )
        with self.db.read() as conn:
            row = conn.execute(query, (run_id,)).fetchone()
        return run_from_row(row) if row is not None else None

    # -- sessions ------------------------------------------------------------------------------

    def load_session(self, name: str, *, create: bool = False) -> list[Message]:
        """The session's messages, oldest first."""
        with self.db.read() as conn:
            exists = _session_exists(conn, name)
            rows = conn.execute(
                "SELECT message FROM legato.session_messages WHERE session = %s ORDER BY position",
                (name,),
            ).fetchall()
        if not exists:
            if not create:
                raise SessionNotFound(name, self._names())
            with self.db.write() as conn:
                conn.execute(
                    "INSERT INTO legato.sessions(name, created_at, updated_at) "
                    f"VALUES (%s, {NOW}, {NOW}) ON CONFLICT (name) DO NOTHING",
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
        dumped, saved = _dump_turn(messages, context)
        with self.db.write() as conn:
            turn = _insert_turn(conn, name, run_id, dumped, saved)
        return int(turn)

    def session_context(self, name: str) -> Compacted | None:
        """The latest compaction of the session's runs, which its next run continues."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT context FROM legato.sessions WHERE name = %s", (name,)
            ).fetchone()
        if row is None:
            raise SessionNotFound(name)
        return carried_view(row[0])

    def undo_turn(self, name: str) -> list[Message]:
        """Remove the session's last turn; return its messages (empty if there were none)."""
        with self.db.write() as conn:
            _lock_session(conn, name)
            rows = conn.execute(
                "DELETE FROM legato.session_messages WHERE session = %s AND turn = "
                "(SELECT max(turn) FROM legato.session_messages WHERE session = %s) "
                "RETURNING position, message",
                (name, name),
            ).fetchall()
            conn.execute(f"UPDATE legato.sessions SET updated_at = {NOW} WHERE name = %s", (name,))
            _drop_stale_context(conn, name)
        return [load_message(r[1]) for r in sorted(rows)]

    def fork_session(self, name: str, new_name: str, *, at: int | None = None) -> SessionInfo:
        """A new session holding messages `[0, at)` of `name` (all of them when `at` is None)."""
        with self.db.write(conflict=SessionExists(new_name)) as conn:
            _lock_session(conn, name)
            if _session_exists(conn, new_name):
                raise SessionExists(new_name)
            row = conn.execute(
                "SELECT count(*) FROM legato.session_messages WHERE session = %s", (name,)
            ).fetchone()
            count = int(cast(tuple[int], row)[0])
            cut = count if at is None else at
            if not 0 <= cut <= count:
                msg = f"session {name!r} has {count} messages; cannot fork at {at}"
                raise StoreError(msg)
            conn.execute(
                "INSERT INTO legato.sessions(name, created_at, updated_at, forked_from, context) "
                f"SELECT %s, {NOW}, {NOW}, name, context FROM legato.sessions WHERE name = %s",
                (new_name, name),
            )
            conn.execute(
                "INSERT INTO legato.session_messages(session, position, turn, run_id, message) "
                "SELECT %s, position, turn, run_id, message FROM legato.session_messages "
                "WHERE session = %s AND position < %s",
                (new_name, name, cut),
            )
            _drop_stale_context(conn, new_name)
        return self._info(new_name)

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, most recently updated first."""
        with self.db.read() as conn:
            rows = conn.execute(_SESSION_QUERY + " ORDER BY s.updated_at DESC, s.name").fetchall()
        return [session_from_row(r) for r in rows]

    def rename_session(self, name: str, new_name: str) -> None:
        """Rename a session; its messages and runs follow."""
        with self.db.write(conflict=SessionExists(new_name)) as conn:
            _lock_session(conn, name)
            if _session_exists(conn, new_name):
                raise SessionExists(new_name)
            conn.execute("UPDATE legato.sessions SET name = %s WHERE name = %s", (new_name, name))
            conn.execute("UPDATE legato.runs SET session = %s WHERE session = %s", (new_name, name))

    def delete_session(self, name: str) -> None:
        """Delete the session and its messages; its run journals stay."""
        with self.db.write() as conn:
            gone = conn.execute(
                "DELETE FROM legato.sessions WHERE name = %s RETURNING name", (name,)
            ).fetchone()
            if gone is None:
                raise SessionNotFound(name)

    def session_info(self, name: str) -> SessionInfo:
        """What the store knows about one session."""
        return self._info(name)

    def _info(self, name: str) -> SessionInfo:
        with self.db.read() as conn:
            row = conn.execute(_SESSION_QUERY + " WHERE s.name = %s", (name,)).fetchone()
        if row is None:
            raise SessionNotFound(name)
        return session_from_row(row)

    def _names(self) -> list[str]:
        return [s.name for s in self.list_sessions()]

    # -- approvals -----------------------------------------------------------------------------

    def park_approval(self, request_id: str, *, run_id: str, payload: JsonValue) -> None:
        """Record a pending approval; parking the same request twice is an error."""
        parked = StoreError(f"approval {request_id!r} is already parked")
        with self.db.write(conflict=parked) as conn:
            conn.execute(
                "INSERT INTO legato.approvals(request_id, run_id, payload, created_at) "
                f"VALUES (%s, %s, %s, {NOW})",
                (request_id, run_id, json.dumps(payload)),
            )

    def decide_approval(self, request_id: str, decision: JsonValue) -> bool:
        """Claim a parked approval; exactly one caller gets True, across processes.

        One conditional `UPDATE`: a second decider waits on the row's lock, then finds the
        row no longer parked and updates nothing. A request whose run has ended (finished or
        failed) is not decided either.
        """
        with self.db.write() as conn:
            won = conn.execute(
                f"UPDATE legato.approvals SET state = 'decided', decision = %s, decided_at = {NOW} "
                "WHERE request_id = %s AND state = 'parked' AND NOT EXISTS ("
                "SELECT 1 FROM legato.runs r WHERE r.run_id = legato.approvals.run_id "
                "AND r.status IN ('finished', 'failed')) RETURNING request_id",
                (json.dumps(decision), request_id),
            ).fetchone()
        return won is not None

    def approvals(self, *, run_id: str | None = None) -> list[ApprovalRecord]:
        """Stored approvals, oldest first."""
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {APPROVAL_COLUMNS} FROM legato.approvals "
                "WHERE (%s::text IS NULL OR run_id = %s) ORDER BY created_at, ord",
                (run_id, run_id),
            ).fetchall()
        return [approval_from_row(r) for r in rows]

    def approval(self, request_id: str) -> ApprovalRecord | None:
        """One stored approval, or None."""
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {APPROVAL_COLUMNS} FROM legato.approvals WHERE request_id = %s",
                (request_id,),
            ).fetchone()
        return approval_from_row(row) if row is not None else None

    def claim_approval(self, request_id: str) -> bool:
        """Move a decided approval to claimed; exactly one caller gets True.

        One conditional `UPDATE`: a second claimer waits on the row's lock, then finds the
        row no longer decided and updates nothing.
        """
        with self.db.write() as conn:
            won = conn.execute(
                "UPDATE legato.approvals SET state = 'claimed' "
                "WHERE request_id = %s AND state = 'decided' RETURNING request_id",
                (request_id,),
            ).fetchone()
        return won is not None

    def __repr__(self) -> str:
        return f"PostgresStore({self.name!r})"


_SESSION_QUERY: LiteralString = (
    f"SELECT {SESSION_COLUMNS}, "
    "(SELECT count(*) FROM legato.session_messages m WHERE m.session = s.name), "
    "(SELECT count(DISTINCT turn) FROM legato.session_messages m WHERE m.session = s.name) "
    "FROM legato.sessions s"
)


def _lock_session(conn: psycopg.Connection[Any], name: str) -> None:
    """Lock the session's row until commit; `SessionNotFound` if there is none."""
    row = conn.execute(
        "SELECT 1 FROM legato.sessions WHERE name = %s FOR UPDATE", (name,)
    ).fetchone()
    if row is None:
        raise SessionNotFound(name)


def _drop_stale_context(conn: psycopg.Connection[Any], name: str) -> None:
    """Forget a carried compaction that covers messages the session no longer has."""
    row = conn.execute("SELECT context FROM legato.sessions WHERE name = %s", (name,)).fetchone()
    if row is None or row[0] is None:
        return
    upto = json.loads(row[0]).get("upto", 0)
    counted = conn.execute(
        "SELECT count(*) FROM legato.session_messages WHERE session = %s", (name,)
    ).fetchone()
    if upto > int(cast(tuple[int], counted)[0]):
        conn.execute("UPDATE legato.sessions SET context = NULL WHERE name = %s", (name,))


def _session_exists(conn: psycopg.Connection[Any], name: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM legato.sessions WHERE name = %s", (name,)).fetchone()
        is not None
    )


def _dump_turn(
    messages: Sequence[Message], context: Compacted | None
) -> tuple[list[str], str | None]:
    """A turn's messages and carried view, as stored."""
    return [dump_message(m) for m in messages], dump_event(context) if context is not None else None


def _insert_turn(
    conn: psycopg.Connection[Any],
    name: str,
    run_id: str | None,
    dumped: list[str],
    saved: str | None,
) -> int:
    """Add a turn inside the caller's write transaction; its number."""
    # the upsert locks the session's row until commit: turns of one session written
    # at once by several processes queue here, and each sees the others' messages
    conn.execute(
        "INSERT INTO legato.sessions(name, created_at, updated_at, context) "
        f"VALUES (%s, {NOW}, {NOW}, %s) "
        "ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at, "
        "context = excluded.context",
        (name, saved),
    )
    row = conn.execute(
        "SELECT coalesce(max(position) + 1, 0), coalesce(max(turn) + 1, 0) "
        "FROM legato.session_messages WHERE session = %s",
        (name,),
    ).fetchone()
    position, turn = cast(tuple[int, int], row)
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO legato.session_messages(session, position, turn, run_id, message) "
            "VALUES (%s, %s, %s, %s, %s)",
            [(name, position + i, turn, run_id, m) for i, m in enumerate(dumped)],
        )
    return int(turn)
