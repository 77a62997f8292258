"""`SQLiteStore`: the embedded default store — journals, sessions and approvals in one file."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

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
from legato.store._db import DEFAULT_PATH, Database
from legato.store._redact import redact_rows, run_redactor

__all__ = ["SQLiteStore"]


_STATUS: dict[str, Literal["running", "parked", "finished", "failed"]] = {
    "run_finished": "finished",
    "run_failed": "failed",
    "run_parked": "parked",
    "run_resumed": "running",
}


class SQLiteStore:
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

    @property
    def path(self) -> str:
        """The database file."""
        return self.db.path

    def close(self) -> None:
        """Close this store's handle; the file's connection closes with its last handle."""
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
        written = _dump_turn(turn.messages, turn.context) if turn is not None else None
        with self.db.write() as conn:
            redactor = run_redactor(conn, run_id)
            if redactor is not None:  # memory this run had seen was forgotten meanwhile
                data = redact_rows(redactor, [r[3] for r in rows])
                rows = [(r[0], r[1], r[2], d) for r, d in zip(rows, data, strict=True)]
            first = events[0]
            known = conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if start == 0:
                if not isinstance(first, RunStarted):
                    msg = f"run {run_id}: the first event must be RunStarted, not {first.kind}"
                    raise JournalError(msg)
                if known is not None:
                    raise JournalConflict(run_id, 0)
                conn.execute(
                    "INSERT INTO runs(run_id, session, agent, model, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (run_id, session, first.agent, first.model, time.time()),
                )
            elif known is None:
                msg = f"run {run_id}: no stored run to append to at position {start}"
                raise JournalError(msg)
            try:
                conn.executemany(
                    "INSERT INTO events(run_id, seq, kind, data) VALUES (?, ?, ?, ?)", rows
                )
            except sqlite3.IntegrityError as exc:
                raise JournalConflict(run_id, start) from exc
            if status is not None:
                conn.execute("UPDATE runs SET status = ? WHERE run_id = ?", (status, run_id))
            if turn is not None and written is not None:
                _insert_turn(conn, turn.session, run_id, *written)

    def load_run(self, run_id: str) -> Journal:
        """The run's journal."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT seq, data FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
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
            "(SELECT count(*) FROM events e WHERE e.run_id = r.run_id) FROM runs r"
        )
        args: tuple[object, ...] = ()
        if session is not None:
            query += " WHERE r.session = ?"
            args = (session,)
        query += " ORDER BY r.created_at DESC, r.rowid DESC LIMIT ?"
        with self.db.read() as conn:
            rows = conn.execute(query, (*args, limit)).fetchall()
        return [run_from_row(r) for r in rows]

    def run_info(self, run_id: str) -> RunInfo | None:
        """One stored run, or None."""
        query = (
            f"SELECT {RUN_COLUMNS}, "
            "(SELECT count(*) FROM events e WHERE e.run_id = r.run_id) FROM runs r "
            "WHERE r.run_id = ?"
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
                "SELECT message FROM session_messages WHERE session = ? ORDER BY position",
                (name,),
            ).fetchall()
        if not exists:
            if not create:
                raise SessionNotFound(name, self._names())
            with self.db.write() as conn:
                now = time.time()
                conn.execute(
                    "INSERT OR IGNORE INTO sessions(name, created_at, updated_at) VALUES (?, ?, ?)",
                    (name, now, now),
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
            row = conn.execute("SELECT context FROM sessions WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise SessionNotFound(name)
        return carried_view(row[0])

    def undo_turn(self, name: str) -> list[Message]:
        """Remove the session's last turn; return its messages (empty if there were none)."""
        with self.db.write() as conn:
            if not _session_exists(conn, name):
                raise SessionNotFound(name)
            rows = conn.execute(
                "SELECT message FROM session_messages WHERE session = ? AND turn = "
                "(SELECT max(turn) FROM session_messages WHERE session = ?) ORDER BY position",
                (name, name),
            ).fetchall()
            conn.execute(
                "DELETE FROM session_messages WHERE session = ? AND turn = "
                "(SELECT max(turn) FROM session_messages WHERE session = ?)",
                (name, name),
            )
            conn.execute("UPDATE sessions SET updated_at = ? WHERE name = ?", (time.time(), name))
            _drop_stale_context(conn, name)
        return [load_message(r[0]) for r in rows]

    def fork_session(self, name: str, new_name: str, *, at: int | None = None) -> SessionInfo:
        """A new session holding messages `[0, at)` of `name` (all of them when `at` is None)."""
        now = time.time()
        with self.db.write() as conn:
            if not _session_exists(conn, name):
                raise SessionNotFound(name)
            if _session_exists(conn, new_name):
                raise SessionExists(new_name)
            count = conn.execute(
                "SELECT count(*) FROM session_messages WHERE session = ?", (name,)
            ).fetchone()[0]
            cut = count if at is None else at
            if not 0 <= cut <= count:
                msg = f"session {name!r} has {count} messages; cannot fork at {at}"
                raise StoreError(msg)
            conn.execute(
                "INSERT INTO sessions(name, created_at, updated_at, forked_from) VALUES (?,?,?,?)",
                (new_name, now, now, name),
            )
            conn.execute(
                "INSERT INTO session_messages(session, position, turn, run_id, message) "
                "SELECT ?, position, turn, run_id, message FROM session_messages "
                "WHERE session = ? AND position < ?",
                (new_name, name, cut),
            )
            conn.execute(
                "UPDATE sessions SET context = (SELECT context FROM sessions WHERE name = ?) "
                "WHERE name = ?",
                (name, new_name),
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
        with self.db.write() as conn:
            if not _session_exists(conn, name):
                raise SessionNotFound(name)
            if _session_exists(conn, new_name):
                raise SessionExists(new_name)
            conn.execute("UPDATE sessions SET name = ? WHERE name = ?", (new_name, name))
            conn.execute("UPDATE runs SET session = ? WHERE session = ?", (new_name, name))

    def delete_session(self, name: str) -> None:
        """Delete the session and its messages; its run journals stay."""
        with self.db.write() as conn:
            if not _session_exists(conn, name):
                raise SessionNotFound(name)
            conn.execute("DELETE FROM sessions WHERE name = ?", (name,))

    def _info(self, name: str) -> SessionInfo:
        with self.db.read() as conn:
            row = conn.execute(_SESSION_QUERY + " WHERE s.name = ?", (name,)).fetchone()
        if row is None:
            raise SessionNotFound(name)
        return session_from_row(row)

    def session_info(self, name: str) -> SessionInfo:
        """What the store knows about one session."""
        return self._info(name)

    def _names(self) -> list[str]:
        return [s.name for s in self.list_sessions()]

    # -- approvals -----------------------------------------------------------------------------

    def park_approval(self, request_id: str, *, run_id: str, payload: JsonValue) -> None:
        """Record a pending approval; parking the same request twice is an error."""
        try:
            with self.db.write() as conn:
                conn.execute(
                    "INSERT INTO approvals(request_id, run_id, payload, created_at) "
                    "VALUES (?, ?, ?, ?)",
                    (request_id, run_id, json.dumps(payload), time.time()),
                )
        except sqlite3.IntegrityError as exc:
            msg = f"approval {request_id!r} is already parked"
            raise StoreError(msg) from exc

    def decide_approval(self, request_id: str, decision: JsonValue) -> bool:
        """Decide a parked approval; exactly one caller gets True, across processes.

        One conditional write: the request must still be undecided and its run must not
        have ended (finished or failed), both checked in the transaction that decides.
        """
        with self.db.write() as conn:
            cursor = conn.execute(
                "UPDATE approvals SET state = 'decided', decision = ?, decided_at = ? "
                "WHERE request_id = ? AND state = 'parked' AND NOT EXISTS ("
                "SELECT 1 FROM runs r WHERE r.run_id = approvals.run_id "
                "AND r.status IN ('finished', 'failed'))",
                (json.dumps(decision), time.time(), request_id),
            )
            return cursor.rowcount == 1

    def approvals(self, *, run_id: str | None = None) -> list[ApprovalRecord]:
        """Stored approvals, oldest first."""
        query = f"SELECT {APPROVAL_COLUMNS} FROM approvals"
        args: tuple[str, ...] = ()
        if run_id is not None:
            query += " WHERE run_id = ?"
            args = (run_id,)
        with self.db.read() as conn:
            rows = conn.execute(query + " ORDER BY created_at, rowid", args).fetchall()
        return [approval_from_row(r) for r in rows]

    def approval(self, request_id: str) -> ApprovalRecord | None:
        """One stored approval, or None."""
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE request_id = ?", (request_id,)
            ).fetchone()
        return approval_from_row(row) if row is not None else None

    def claim_approval(self, request_id: str) -> bool:
        """Move a decided approval to claimed; exactly one caller gets True."""
        with self.db.write() as conn:
            cursor = conn.execute(
                "UPDATE approvals SET state = 'claimed' WHERE request_id = ? AND state = 'decided'",
                (request_id,),
            )
            return cursor.rowcount == 1

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"


_SESSION_QUERY = (
    f"SELECT {SESSION_COLUMNS}, "
    "(SELECT count(*) FROM session_messages m WHERE m.session = s.name), "
    "(SELECT count(DISTINCT turn) FROM session_messages m WHERE m.session = s.name) "
    "FROM sessions s"
)


def _drop_stale_context(conn: sqlite3.Connection, name: str) -> None:
    """Forget a carried compaction that covers messages the session no longer has."""
    row = conn.execute("SELECT context FROM sessions WHERE name = ?", (name,)).fetchone()
    if row is None or row[0] is None:
        return
    upto = json.loads(row[0]).get("upto", 0)
    count = conn.execute(
        "SELECT count(*) FROM session_messages WHERE session = ?", (name,)
    ).fetchone()[0]
    if upto > count:
        conn.execute("UPDATE sessions SET context = NULL WHERE name = ?", (name,))


def _session_exists(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sessions WHERE name = ?", (name,)).fetchone() is not None


def _dump_turn(
    messages: Sequence[Message], context: Compacted | None
) -> tuple[list[str], str | None]:
    """A turn's messages and carried view, as stored."""
    return [dump_message(m) for m in messages], dump_event(context) if context is not None else None


def _insert_turn(
    conn: sqlite3.Connection,
    name: str,
    run_id: str | None,
    dumped: list[str],
    saved: str | None,
) -> int:
    """Add a turn inside the caller's write transaction; its number."""
    redactor = run_redactor(conn, run_id)
    if redactor is not None:
        # memory the run had seen was forgotten while it ran: its new messages are
        # redacted, and its view (perhaps summarized from the forgotten text) dropped
        dumped = redact_rows(redactor, dumped)
        saved = None
    now = time.time()
    conn.execute(
        "INSERT INTO sessions(name, created_at, updated_at, context) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET updated_at = excluded.updated_at, "
        "context = excluded.context",
        (name, now, now, saved),
    )
    position, turn = conn.execute(
        "SELECT coalesce(max(position) + 1, 0), coalesce(max(turn) + 1, 0) "
        "FROM session_messages WHERE session = ?",
        (name,),
    ).fetchone()
    conn.executemany(
        "INSERT INTO session_messages(session, position, turn, run_id, message) "
        "VALUES (?, ?, ?, ?, ?)",
        [(name, position + i, turn, run_id, m) for i, m in enumerate(dumped)],
    )
    return int(turn)
