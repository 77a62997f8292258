"""Several processes writing one SQLite file at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from legato.events import RunStarted, UserPrompt
from legato.messages import Message
from legato.store import SQLiteStore

WRITERS = 4
TURNS = 40


def _writer(path: str, worker: int) -> None:
    store = SQLiteStore(path, timeout=60)
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
    store = SQLiteStore(path, timeout=60)
    results.put((worker, store.decide_approval("req", {"by": worker})))
    store.close()


def test_concurrent_writers_lose_nothing_and_never_interleave_a_turn(tmp_path: Path) -> None:
    path = str(tmp_path / "legato.db")
    SQLiteStore(path).close()  # create and migrate once, like a project would
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    store = SQLiteStore(path)
    messages = store.load_session("shared")
    assert len(messages) == WRITERS * TURNS * 2
    for question, answer in zip(messages[::2], messages[1::2], strict=True):
        assert question.text.removesuffix(":q") == answer.text.removesuffix(":a")
    info = store.session_info("shared")
    assert info.turns == WRITERS * TURNS
    runs = store.list_runs(limit=10_000)
    assert len(runs) == WRITERS * TURNS
    assert all(r.events == 2 for r in runs)


def test_concurrent_migration_of_a_fresh_file(tmp_path: Path) -> None:
    path = str(tmp_path / "fresh.db")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert len(SQLiteStore(path).load_session("shared")) == WRITERS * TURNS * 2


def test_one_parked_approval_is_claimed_by_exactly_one_process(tmp_path: Path) -> None:
    path = str(tmp_path / "legato.db")
    store = SQLiteStore(path)
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
