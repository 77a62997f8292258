"""What only the PostgreSQL store does: its schema and migrations, locks, connections, DSNs.

Each test gets a fresh database on the session's throwaway cluster (tests/store/conftest.py).
Where a test shows a protection, it also shows what happens without it, on the same server.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

if importlib.util.find_spec("psycopg") is None and os.environ.get("CI") != "true":
    pytest.skip("psycopg is not installed (the `postgres` extra)", allow_module_level=True)

import psycopg

from legato.events import UserPrompt
from legato.exceptions import JournalError, SchemaTooNew, StoreCorrupted, StoreError
from legato.messages import Message
from legato.store import PostgresStore, Store, pg_schema_version
from legato.store._pg import LOCK_KEY, PG_MIGRATIONS, redact_dsn
from pg_cluster import PASSWORD, PgServer, admin


@pytest.fixture
def store(pg_dsn: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(pg_dsn)
    yield opened
    opened.close()


def connect(dsn: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=autocommit)


def wait_until(check: Callable[[], bool]) -> None:
    """Poll observable state (no timing assert: pytest-timeout bounds a hang)."""
    event = threading.Event()
    while not check():
        event.wait(0.01)


def blocked_on(dsn: str, locktype: str) -> Callable[[], bool]:
    """Whether some session waits for a lock of this type in the database."""

    def check() -> bool:
        with connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = %s", (locktype,)
            ).fetchone()
        return row is not None and row[0] > 0

    return check


@contextmanager
def in_thread(work: Callable[[], object]) -> Generator[dict[str, object]]:
    """Run `work` in a thread; the dict holds its `result` or `error` after the block."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield outcome
    finally:
        thread.join()


def migrations(dsn: str) -> list[int]:
    with connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT version FROM legato.schema_migrations ORDER BY 1").fetchall()
    return [r[0] for r in rows]


# -- schema and migrations ---------------------------------------------------------------------------


def test_store_implements_the_protocols_and_records_each_migration_once(
    store: PostgresStore, pg_dsn: str
) -> None:
    assert isinstance(store, Store)
    assert store.db.version == pg_schema_version() == len(PG_MIGRATIONS)
    assert migrations(pg_dsn) == list(range(1, pg_schema_version() + 1))
    PostgresStore(pg_dsn).close()  # opening again applies nothing
    assert migrations(pg_dsn) == list(range(1, pg_schema_version() + 1))
    with connect(pg_dsn, autocommit=True) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'legato'"
            ).fetchall()
        }
    assert tables == {
        "schema_migrations",
        "runs",
        "events",
        "sessions",
        "session_messages",
        "approvals",
    }


def _run_migrations_by_hand(conn: psycopg.Connection[Any], *, lock: bool) -> None:
    """What opening does, on a connection the test controls (transaction left open)."""
    if lock:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
    conn.execute("CREATE SCHEMA IF NOT EXISTS legato")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS legato.schema_migrations ("
        " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    for number, step in enumerate(PG_MIGRATIONS, start=1):
        step(conn)
        conn.execute("INSERT INTO legato.schema_migrations(version) VALUES (%s)", (number,))


def test_an_opener_waits_for_another_openers_migration_under_the_advisory_lock(
    pg_dsn: str,
) -> None:
    first = connect(pg_dsn)
    _run_migrations_by_hand(first, lock=True)  # another process, midway through migrating
    with in_thread(lambda: PostgresStore(pg_dsn)) as second:
        wait_until(blocked_on(pg_dsn, "advisory"))  # the second opener waits for the lock
        first.commit()
    first.close()
    opened = second.get("result")
    assert isinstance(opened, PostgresStore), second
    opened.close()
    assert migrations(pg_dsn) == list(range(1, pg_schema_version() + 1))  # each applied once


def test_without_the_advisory_lock_concurrent_openers_collide(pg_dsn: str) -> None:
    """The failure the lock prevents: two fresh openers both create the schema."""
    first = connect(pg_dsn)
    _run_migrations_by_hand(first, lock=False)
    second = connect(pg_dsn)
    with in_thread(lambda: _run_migrations_by_hand(second, lock=False)) as outcome:
        wait_until(lambda: _waiting_sessions(pg_dsn) > 0)  # blocked behind the first's schema
        first.commit()
    first.close()
    second.close()
    assert isinstance(outcome.get("error"), psycopg.errors.UniqueViolation), outcome


def _waiting_sessions(dsn: str) -> int:
    with connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_newer_schema_is_refused(store: PostgresStore, pg_dsn: str) -> None:
    store.close()
    with connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO legato.schema_migrations(version) VALUES (%s)", (pg_schema_version() + 1,)
        )
    with pytest.raises(SchemaTooNew) as info:
        PostgresStore(pg_dsn)
    assert info.value.found == pg_schema_version() + 1
    assert PASSWORD not in str(info.value)


def test_a_legato_schema_of_another_program_is_refused_and_left_alone(pg_dsn: str) -> None:
    with connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA legato")
        conn.execute("CREATE TABLE legato.invoices(id integer)")
    with pytest.raises(StoreCorrupted, match="another program"):
        PostgresStore(pg_dsn)
    with connect(pg_dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'legato'"
        ).fetchall()
    assert tables == [("invoices",)]


# -- connections, errors, passwords ------------------------------------------------------------------


def test_a_connection_broken_midway_is_a_typed_error_and_nothing_is_half_written(
    store: PostgresStore, pg_server: PgServer, pg_dsn: str
) -> None:
    store.append_turn("s", [Message.user("kept")], run_id=None)
    with pytest.raises(StoreError, match="connection failed") as info:
        with store.db.write() as conn:
            conn.execute(
                "INSERT INTO legato.session_messages(session, position, turn, run_id, message) "
                "SELECT session, 1, 1, NULL, message FROM legato.session_messages"
            )
            pid = conn.info.backend_pid
            with admin(pg_server) as killer:  # the server goes away mid-transaction
                killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
            conn.execute("SELECT 1")
    assert not isinstance(info.value.__cause__, psycopg.Error)  # no raw psycopg error leaks
    assert PASSWORD not in str(info.value)
    reader = PostgresStore(pg_dsn)
    assert [m.text for m in reader.load_session("s")] == ["kept"]  # the half-turn is gone
    reader.close()
    store.append_turn("s", [Message.user("again")], run_id=None)  # it reconnects
    assert [m.text for m in store.load_session("s")] == ["kept", "again"]


def test_an_idle_connection_killed_by_the_server_fails_one_call_then_reconnects(
    store: PostgresStore, pg_server: PgServer
) -> None:
    store.append_turn("s", [Message.user("one")], run_id=None)
    with store.db.read() as conn:
        pid = conn.info.backend_pid
    with admin(pg_server) as killer:
        killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StoreError, match="connection failed"):
        store.append_turn("s", [Message.user("two")], run_id=None)
    store.append_turn("s", [Message.user("three")], run_id=None)
    assert [m.text for m in store.load_session("s")] == ["one", "three"]


def test_a_wrong_password_is_a_typed_error_that_never_shows_a_password(
    pg_server: PgServer, pg_dsn: str
) -> None:
    dbname = pg_dsn.rsplit("/", 1)[1]
    wrong = pg_server.dsn(dbname, password="not-the-Pa55word")
    with pytest.raises(StoreError, match="connection failed") as info:
        PostgresStore(wrong)
    assert "not-the-Pa55word" not in str(info.value)
    assert "password authentication failed" in str(info.value)


def test_an_unreachable_server_and_a_broken_dsn_keep_the_password_out_of_messages(
    pg_server: PgServer,
) -> None:
    dsn = pg_server.dsn("x", password="hunter2-secret").replace(str(pg_server.port), "1")
    with pytest.raises(StoreError, match="connection failed") as info:
        PostgresStore(dsn, connect_timeout=2)
    assert "hunter2-secret" not in str(info.value)
    assert "postgresql://legato@127.0.0.1:1/x" in str(info.value)
    for broken in (
        "host=127.0.0.1 password=hunter2-secret port=nope",
        "postgresql://legato:hunter2-secret@127.0.0.1:notaport/x",
        "password='hunter2-secret' dbname",
    ):
        with pytest.raises(StoreError) as bad:
            PostgresStore(broken)
        assert "hunter2-secret" not in str(bad.value), bad.value


def test_redaction_masks_passwords_in_both_dsn_forms() -> None:
    assert redact_dsn("postgresql://u:pw1@h/db") == "postgresql://u:****@h/db"
    assert redact_dsn("host=h password='a b\\' c' user=u") == "host=h password=**** user=u"
    assert redact_dsn("failed for x", secret="x") == "failed for ****"


def test_repr_and_name_carry_no_password(store: PostgresStore) -> None:
    assert PASSWORD not in repr(store)
    assert PASSWORD not in store.name
    assert store.name.startswith("postgresql://legato@127.0.0.1:")


def test_a_unique_violation_inside_a_write_is_a_store_error(store: PostgresStore) -> None:
    store.append_turn("s", [Message.user("x")], run_id=None)
    with pytest.raises(StoreError, match="conflicting write") as info:
        with store.db.write() as conn:
            conn.execute(
                "INSERT INTO legato.session_messages(session, position, turn, run_id, message) "
                "VALUES ('s', 0, 0, NULL, '{}')"
            )
    assert type(info.value) is StoreError


def test_bad_input_is_a_typed_error_and_writes_nothing(store: PostgresStore) -> None:
    with pytest.raises(StoreError, match="NUL") as info:
        store.append_turn("bad\x00name", [Message.user("x")], run_id=None)  # text has no NUL
    assert not isinstance(info.value.__cause__, psycopg.Error)
    assert store.list_sessions() == []
    with pytest.raises(JournalError, match="no stored run"):
        store.append_events("ghost", [UserPrompt(message=Message.user("x"))], start=3)
    assert store.list_runs() == []


# -- locks: the claim and the turn ----------------------------------------------------------------------


def test_a_second_decider_waits_for_the_row_lock_then_loses(
    store: PostgresStore, pg_dsn: str
) -> None:
    store.park_approval("req", run_id="r", payload={"tool": "pay"})
    first = connect(pg_dsn)
    first.execute(
        "UPDATE legato.approvals SET state = 'decided', decision = '\"first\"' "
        "WHERE request_id = 'req' AND state = 'parked'"
    )  # decided, not yet committed: the row is locked
    other = PostgresStore(pg_dsn)
    with in_thread(lambda: other.decide_approval("req", "second")) as outcome:
        wait_until(blocked_on(pg_dsn, "transactionid"))
        first.commit()
    first.close()
    other.close()
    assert outcome == {"result": False}
    [record] = store.approvals()
    assert record.decision == "first"


def test_without_the_conditional_update_both_deciders_win(
    store: PostgresStore, pg_dsn: str
) -> None:
    """The failure the claim prevents: read the state, then write it, in two processes."""
    store.park_approval("req", run_id="r", payload=None)
    winners: list[str] = []
    a, b = connect(pg_dsn), connect(pg_dsn)
    for conn in (a, b):
        row = conn.execute("SELECT state FROM legato.approvals WHERE request_id = 'req'")
        assert row.fetchone() == ("parked",)  # both see it undecided
    for name, conn in (("a", a), ("b", b)):
        conn.execute(
            "UPDATE legato.approvals SET state = 'decided', decision = %s WHERE request_id = 'req'",
            (f'"{name}"',),
        )
        conn.commit()
        winners.append(name)
    a.close()
    b.close()
    assert winners == ["a", "b"]  # two processes each believe they decided
    assert store.approvals()[0].decision == "b"  # and the first decision was overwritten


def test_a_turn_written_while_another_is_open_queues_behind_it(
    store: PostgresStore, pg_dsn: str
) -> None:
    store.append_turn("s", [Message.user("one")], run_id=None)
    first = connect(pg_dsn)  # another process, midway through writing a turn of "s"
    first.execute("UPDATE legato.sessions SET updated_at = updated_at WHERE name = 's'")
    first.execute(
        "INSERT INTO legato.session_messages(session, position, turn, run_id, message) "
        "SELECT 's', 1, 1, NULL, message FROM legato.session_messages WHERE position = 0"
    )
    other = PostgresStore(pg_dsn)
    with in_thread(lambda: other.append_turn("s", [Message.user("two")], run_id=None)) as outcome:
        wait_until(blocked_on(pg_dsn, "transactionid"))  # it waits for the session's row
        assert len(store.load_session("s")) == 1  # readers never see the open turn
        first.commit()
    first.close()
    other.close()
    assert outcome == {"result": 2}  # it saw the other turn and came after it
    assert [m.text for m in store.load_session("s")] == ["one", "one", "two"]


def test_without_the_session_lock_two_turns_collide(store: PostgresStore, pg_dsn: str) -> None:
    """The failure the lock prevents: both writers read the same next position."""
    store.append_turn("s", [Message.user("one")], run_id=None)
    a, b = connect(pg_dsn), connect(pg_dsn)
    query = "SELECT max(position) + 1 FROM legato.session_messages WHERE session = 's'"
    next_a, next_b = a.execute(query).fetchone(), b.execute(query).fetchone()
    assert next_a == next_b == (1,)
    insert = (
        "INSERT INTO legato.session_messages(session, position, turn, run_id, message) "
        "VALUES ('s', %s, 1, NULL, '{}')"
    )
    a.execute(insert, next_a)
    with in_thread(lambda: b.execute(insert, next_b)) as outcome:
        wait_until(blocked_on(pg_dsn, "transactionid"))
        a.commit()
    a.close()
    b.close()
    assert isinstance(outcome.get("error"), psycopg.errors.UniqueViolation)  # a turn refused


# -- a pool instead of a DSN ----------------------------------------------------------------------------


class TinyPool:
    """A minimal connection pool (non-autocommit connections, like psycopg_pool's)."""

    def __init__(self, dsn: str, size: int) -> None:
        self._free = [connect(dsn) for _ in range(size)]
        self._lock = threading.Lock()
        self.lent = 0

    @contextmanager
    def connection(self) -> Generator[psycopg.Connection[Any]]:
        with self._lock:
            conn = self._free.pop()
            self.lent += 1
        try:
            yield conn
        finally:
            with self._lock:
                self._free.append(conn)

    def close(self) -> None:
        for conn in self._free:
            conn.close()


def test_a_store_on_a_connection_pool(pg_dsn: str) -> None:
    pool = TinyPool(pg_dsn, 3)
    store = PostgresStore(pool)
    store.append_turn("s", [Message.user("pooled")], run_id=None)
    store.park_approval("a", run_id="r", payload=None)
    with pytest.raises(StoreError, match="already parked"):
        store.park_approval("a", run_id="r", payload=None)
    assert [m.text for m in store.load_session("s")] == ["pooled"]
    assert pool.lent >= 4
    store.close()  # leaves the pool to its owner
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) FROM legato.approvals").fetchone() == (1,)
    pool.close()


# -- without psycopg ------------------------------------------------------------------------------------


def test_legato_store_imports_without_psycopg_and_opening_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "import legato.store, legato.approvals\n"
        "from legato.exceptions import MissingDependency\n"
        "try:\n"
        "    legato.store.PostgresStore('postgresql://u:pw@127.0.0.1/db')\n"
        "except MissingDependency as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'legato[postgres]'" in done.stdout
