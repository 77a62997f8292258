"""Several processes writing one store at once: a SQLite file, or a PostgreSQL database.

`target` is a SQLite path or a PostgreSQL DSN (each test runs with both); every process
opens its own store on it, as separate programs would.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from legato.events import RunStarted, UserPrompt
from legato.exceptions import JournalConflict, StoreLocked
from legato.messages import Message
from legato.store import PostgresStore, SQLiteStore
from pg_cluster import AnyStore

WRITERS = 4
TURNS = 40


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where the processes meet: a fresh SQLite path, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "legato.db")
    else:
        yield request.getfixturevalue("pg_dsn")


def open_store(target: str) -> AnyStore:
    if target.startswith("postgresql://"):
        return PostgresStore(target)
    return SQLiteStore(target, timeout=60)


@pytest.fixture
def opened() -> Iterator[Callable[[str], AnyStore]]:
    """Opens stores in the test's own process, and closes them at the end."""
    stores: list[AnyStore] = []

    def open_one(target: str) -> AnyStore:
        stores.append(open_store(target))
        return stores[-1]

    yield open_one
    for store in stores:
        store.close()


def _writer(path: str, worker: int) -> None:
    store = open_store(path)
    for turn in range(TURNS):
        run_id = f"w{worker}-r{turn}"
        store.append_events(
            run_id,
            [
                RunStarted(run_id=run_id, agent="a", model="m"),
                UserPrompt(message=Message.user(f"{worker}:{turn}")),
            ],
            start=0,
            session="shared",
        )
        store.append_turn(
            "shared",
            [Message.user(f"{worker}:{turn}:q"), Message.assistant(f"{worker}:{turn}:a")],
            run_id=run_id,
        )
    store.close()


def _claimer(path: str, worker: int, results: multiprocessing.Queue[tuple[int, bool]]) -> None:
    store = open_store(path)
    results.put((worker, store.decide_approval("req", {"by": worker})))
    store.close()


def test_concurrent_writers_lose_nothing_and_never_interleave_a_turn(
    target: str, opened: Callable[[str], AnyStore]
) -> None:
    path = target
    opened(path)  # create and migrate once, like a project would
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    store = opened(path)
    messages = store.load_session("shared")
    assert len(messages) == WRITERS * TURNS * 2
    for question, answer in zip(messages[::2], messages[1::2], strict=True):
        assert question.text.removesuffix(":q") == answer.text.removesuffix(":a")
    info = store.session_info("shared")
    assert info.turns == WRITERS * TURNS
    runs = store.list_runs(limit=10_000)
    assert len(runs) == WRITERS * TURNS
    assert all(r.events == 2 for r in runs)


def test_concurrent_migration_of_a_fresh_file(
    target: str, opened: Callable[[str], AnyStore]
) -> None:
    path = target
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert len(opened(path).load_session("shared")) == WRITERS * TURNS * 2


def test_one_parked_approval_is_claimed_by_exactly_one_process(
    target: str, opened: Callable[[str], AnyStore]
) -> None:
    path = target
    store = opened(path)
    store.park_approval("req", run_id="r", payload={"tool": "pay"})
    ctx = multiprocessing.get_context("fork")
    results: multiprocessing.Queue[tuple[int, bool]] = ctx.Queue()
    procs = [ctx.Process(target=_claimer, args=(path, w, results)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    outcomes = [results.get(timeout=10) for _ in procs]
    winners = [w for w, won in outcomes if won]
    assert len(winners) == 1
    [record] = store.approvals()
    assert record.decision == {"by": winners[0]}


EVENTS = 15


def _run_appender(path: str, worker: int) -> None:
    """Appends its events to the shared run at the next free position, retrying when beaten."""
    store = open_store(path)
    for k in range(EVENTS):
        while True:
            start = len(store.load_run("shared-run"))
            try:
                store.append_events(
                    "shared-run",
                    [UserPrompt(message=Message.user(f"{worker}:{k}"))],
                    start=start,
                )
                break
            except JournalConflict as exc:  # another writer took the position
                assert exc.position == start
    store.close()


def test_processes_appending_to_one_run_lose_and_overwrite_nothing(
    target: str, opened: Callable[[str], AnyStore]
) -> None:
    store = opened(target)
    store.append_events(
        "shared-run", [RunStarted(run_id="shared-run", agent="a", model="m")], start=0
    )
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_run_appender, args=(target, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    journal = store.load_run("shared-run")
    texts = [e.message.text for e in journal.events[1:] if isinstance(e, UserPrompt)]
    assert len(journal) == 1 + WRITERS * EVENTS
    assert sorted(texts) == sorted(f"{w}:{k}" for w in range(WRITERS) for k in range(EVENTS))
    for w in range(WRITERS):  # each writer's events in its own order
        mine = [t for t in texts if t.startswith(f"{w}:")]
        assert mine == [f"{w}:{k}" for k in range(EVENTS)]


def test_a_writer_waits_for_another_writers_transaction_instead_of_interleaving(
    tmp_path: Path,
) -> None:
    import sqlite3

    import pytest

    path = tmp_path / "legato.db"
    second = SQLiteStore(path, timeout=0.2)
    second.append_turn("s", [Message.user("one")], run_id=None)
    # another process's connection (legato objects in one process share one connection,
    # so the other writer is a connection of its own, as another process has)
    first = sqlite3.connect(path, isolation_level=None)
    first.execute("BEGIN IMMEDIATE")  # a turn half-written by the first process
    first.execute(
        "INSERT INTO session_messages(session, position, turn, run_id, message) "
        "SELECT session, 1, 1, NULL, message FROM session_messages WHERE position = 0"
    )
    with pytest.raises(StoreLocked, match="locked"):
        second.append_turn("s", [Message.user("two")], run_id=None)
    assert len(second.load_session("s")) == 1  # readers never see the half-written turn
    first.execute("COMMIT")
    first.close()
    assert len(second.load_session("s")) == 2

    # without a write transaction, two writers that read the next position and then insert
    # collide: the second insert is refused (or, with no key, the turn would be lost)
    a, b = sqlite3.connect(path), sqlite3.connect(path)
    next_a = a.execute("SELECT max(position) + 1 FROM session_messages").fetchone()[0]
    next_b = b.execute("SELECT max(position) + 1 FROM session_messages").fetchone()[0]
    assert next_a == next_b
    insert = (
        "INSERT INTO session_messages(session, position, turn, run_id, message) "
        "VALUES ('s', ?, 9, NULL, '{}')"
    )
    a.execute(insert, (next_a,))
    a.commit()
    with pytest.raises(sqlite3.IntegrityError):
        b.execute(insert, (next_b,))
    a.close()
    b.close()
