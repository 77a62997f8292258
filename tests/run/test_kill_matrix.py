"""The kill matrix: real worker processes killed with SIGKILL, then resumed.

A worker (tests/run/kill_worker.py) runs a scripted agent whose model issues parallel calls
(irreversible `pay`, idempotent `put`, read-only `read`, asked `send`) and delegates to a
child agent with an irreversible `refund`. It is killed after every journal event it
records, and inside each side-effecting tool before and after its effect; then one or
several resumer processes, started together, resume the stored run by id. Each cell is
compared with an uninterrupted run: the run finishes with the same answer; each
irreversible effect happened exactly once and the idempotent one under one key; what the
store held at the kill is a prefix of the final journal; exactly one resumer goes on and
the others get a typed error without making a model call.

Workers are forked from a server that has legato imported (multiprocessing's
`forkserver`), so a cell costs milliseconds, not an interpreter start. The test prints its
counts; docs/durability.md records them. Each protection has a twin cell showing the
violation with the protection switched off.
"""

from __future__ import annotations

import collections
import json
import multiprocessing
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kill_worker
import pytest

from legato.events import Journal, RunFinished
from legato.exceptions import JournalError
from legato.store import PostgresStore, SQLiteStore

IRREVERSIBLE = ("pay", "send", "refund")
TOOL_POINTS = [
    f"tool:{t}:{when}" for t in ("pay", "put", "send", "refund") for when in ("before", "after")
]


def _context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["kill_worker"])
    return ctx


@dataclass
class Cell:
    """What one kill point did, and what it broke."""

    kill: str
    first_exit: int | None = None
    resumer_exits: list[int | None] = field(default_factory=list[int | None])
    effects: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    violations: list[str] = field(default_factory=list[str])


class Matrix:
    """Runs cells against one store target (a SQLite folder, or one PostgreSQL database)."""

    def __init__(self, target: str | None, root: Path) -> None:
        self.target = target
        self.root = root
        self.ctx = _context()
        self.counter = 0

    def _store_arg(self, cell_dir: Path) -> str:
        return self.target if self.target is not None else str(cell_dir / "runs.db")

    def open_store(self, cell_dir: Path) -> Any:
        target = self._store_arg(cell_dir)
        return PostgresStore(target) if target.startswith("postgresql://") else SQLiteStore(target)

    def _worker(self, cell_dir: Path, mode: str, *extra: str) -> Any:
        argv = [
            "--store", self._store_arg(cell_dir),
            "--effects", str(cell_dir / "effects"),
            "--mode", mode,
            "--run-id-file", str(cell_dir / "run_id"),
            *extra,
        ]  # fmt: skip
        process = self.ctx.Process(target=kill_worker.run_worker, args=(argv,))
        process.start()
        return process

    def run(
        self,
        kill: str,
        *,
        resumers: int = 1,
        off: str = "",
        reconcile: bool = True,
        barrier: bool = False,
        staggered: bool = False,
    ) -> Cell:
        self.counter += 1
        cell_dir = self.root / f"cell{self.counter}"
        cell_dir.mkdir()
        cell = Cell(kill=kill)
        flags = [f"--off={off}"] if off else []
        if not reconcile:
            flags.append("--no-reconcile")
        first = self._worker(
            cell_dir, "run", f"--kill={kill}", f"--stats={cell_dir / 'stats-run'}", *flags
        )
        first.join(60)
        cell.first_exit = first.exitcode
        store = self.open_store(cell_dir)
        id_file = cell_dir / "run_id"
        if not id_file.exists():  # killed inside `agent.start`, before it returned the id
            id_file.write_text("never-started")
        run_id = id_file.read_text().strip()
        try:
            at_kill: Journal | None = store.load_run(run_id)
        except JournalError:
            at_kill = None  # killed before its first commit: nothing of it was stored
        waiting = [f"--barrier={resumers}"] if barrier and resumers > 1 else []
        processes: list[tuple[Any, Path]] = []
        for index in range(resumers):
            stats = cell_dir / f"stats{index}"
            pause = ["--kill=pause:pay:before"] if staggered and index == 0 else []
            processes.append(
                (
                    self._worker(cell_dir, "resume", f"--stats={stats}", *waiting, *pause, *flags),
                    stats,
                )
            )
            if staggered and index == 0:
                processes[0][0].join(0.6)  # the first is live (inside `pay`) when the next looks
        for process, _ in processes:
            process.join(60)
        cell.resumer_exits = [p.exitcode for p, _ in processes]
        requests = [_activity(s) for _, s in processes]
        effects: dict[str, list[str]] = collections.defaultdict(list)
        log = cell_dir / "effects"
        for line in log.read_text().splitlines() if log.exists() else []:
            name, key = line.split(" ", 1)
            effects[name].append(key)
        cell.effects = dict(effects)
        try:
            final: Journal | None = store.load_run(run_id)
        except JournalError:
            final = None
        self._judge(cell, at_kill, final, requests)
        if hasattr(store, "close"):
            store.close()
        return cell

    def _judge(
        self, cell: Cell, at_kill: Journal | None, final: Journal | None, activity: list[int]
    ) -> None:
        v = cell.violations
        for name in IRREVERSIBLE:
            if len(cell.effects.get(name, [])) > 1:
                v.append(f"{name} ran {len(cell.effects[name])} times")
        if len(set(cell.effects.get("put", []))) > 1:
            v.append("put applied under two keys")
        if at_kill is None:  # nothing was stored: nothing may have happened
            if cell.effects:
                v.append(f"effects without a stored run: {sorted(cell.effects)}")
            if any(code != 4 for code in cell.resumer_exits):
                v.append(f"resumers of an unstored run exited {cell.resumer_exits}")
            return
        if final is None or not isinstance(final.events[-1], RunFinished):
            v.append("the run did not finish")
            return
        if final.events[-1].output != "done":
            v.append(f"wrong answer {final.events[-1].output!r}")
        v.extend(
            f"{name} never took effect"
            for name in (*IRREVERSIBLE, "put")
            if not cell.effects.get(name)
        )
        if list(final.events[: len(at_kill)]) != list(at_kill.events):
            v.append("the stored prefix changed")
        v.extend(_judge_resumers(cell, isinstance(at_kill.events[-1], RunFinished), activity))


def _judge_resumers(cell: Cell, finished_before: bool, activity: list[int]) -> list[str]:
    """Exactly one resumer goes on (none for a finished run); the others run nothing."""
    found: list[str] = []
    winners = [c for c in cell.resumer_exits if c == 0]
    if finished_before and winners:
        found.append("a finished run was resumed")
    if not finished_before and len(winners) != 1:
        found.append(f"resumer exits {cell.resumer_exits}: not exactly one went on")
    losers = [a for c, a in zip(cell.resumer_exits, activity, strict=True) if c != 0]
    if any(a > 0 for a in losers):
        found.append("a losing resumer ran something")
    if any(c not in (0, 3, 4) for c in cell.resumer_exits):
        found.append(f"a resumer failed: {cell.resumer_exits}")
    return found


def _activity(stats: Path) -> int:
    """Model requests plus tool calls a resumer made (0 when it wrote no stats)."""
    if not stats.exists():
        return 0
    counts = json.loads(stats.read_text())
    return int(counts["requests"]) + int(counts["tools"])


def _event_count(matrix: Matrix) -> int:
    """How many events an uninterrupted run records (the kill points between them)."""
    cell = matrix.run("none")
    assert cell.violations == [] and cell.first_exit == 0
    stats = matrix.root / f"cell{matrix.counter}" / "stats-run"
    return int(json.loads(stats.read_text())["events"])  # the parent's and the child's


@pytest.fixture(scope="module", autouse=True)
def _stop_servers() -> Iterator[None]:
    """Stop the fork server (and the resource tracker it starts) after this module: other
    tests check that no child process of the test run is left behind."""
    yield
    from multiprocessing import forkserver, resource_tracker

    server: Any = getattr(forkserver, "_forkserver")  # noqa: B009  # the module's one server
    server._stop()
    tracker: Any = getattr(resource_tracker, "_resource_tracker")  # noqa: B009
    stop = getattr(tracker, "_stop", None)
    if stop is not None:
        stop()


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="legato-kill-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _report(label: str, cells: list[Cell]) -> collections.Counter[str]:
    violations: collections.Counter[str] = collections.Counter()
    for cell in cells:
        for item in cell.violations:
            violations[item.split(" ", 1)[0] if " ran " in item else item] += 1
    killed = sum(1 for c in cells if c.first_exit == -9)
    print(
        f"\nkill matrix {label}: {len(cells)} cells, {killed} kills; violations {dict(violations) or 0}"
    )
    return violations


def _matrix(matrix: Matrix, label: str, *, every: int, concurrent: int) -> None:
    events = _event_count(matrix)
    points = [f"event:{n}" for n in range(1, events + 1)] + TOOL_POINTS
    single = [matrix.run(p) for p in points]
    sampled = [f"event:{n}" for n in range(1, events + 1, every)] + TOOL_POINTS
    racing = [matrix.run(p, resumers=concurrent, barrier=True) for p in sampled]
    late = [matrix.run(p, resumers=2, staggered=True) for p in ("event:5", "event:12")]
    failures = [c for c in single + racing + late if c.violations]
    _report(f"{label}, 1 resumer", single)
    _report(f"{label}, {concurrent} concurrent resumers", racing)
    _report(f"{label}, a live resumer and a late one", late)
    assert failures == [], [(c.kill, c.violations, c.resumer_exits) for c in failures]


@pytest.mark.timeout(1500)
def test_kill_matrix_sqlite(workdir: Path) -> None:
    _matrix(Matrix(None, workdir), "sqlite", every=3, concurrent=4)


@pytest.mark.timeout(1500)
def test_kill_matrix_postgres(workdir: Path, pg_dsn: str) -> None:
    _matrix(Matrix(pg_dsn, workdir), "postgres", every=4, concurrent=3)


# -- twins: each protection off shows its violation ------------------------------------------------


def test_twin_without_write_ahead_a_paid_call_is_paid_again(workdir: Path) -> None:
    cell = Matrix(None, workdir).run("tool:pay:after", off="write_ahead")
    print(f"\ntwin write_ahead: {cell.violations}")
    assert "pay ran 2 times" in cell.violations


def test_twin_without_dedup_a_paid_call_is_paid_again(workdir: Path) -> None:
    cell = Matrix(None, workdir).run("tool:pay:after", off="dedup")
    print(f"\ntwin dedup: {cell.violations}")
    assert "pay ran 2 times" in cell.violations


def test_twin_without_reconcile_hooks_an_approver_who_says_retry_pays_again(
    workdir: Path,
) -> None:
    """Without a reconcile hook the person is asked; this one answers "run it again"
    although it ran: the protection is the hook (or a person who knows), not luck."""
    cell = Matrix(None, workdir).run("tool:pay:after", reconcile=False)
    print(f"\ntwin reconcile: {cell.violations}")
    assert "pay ran 2 times" in cell.violations


def test_twin_without_the_claim_losing_resumers_run(workdir: Path) -> None:
    cell = Matrix(None, workdir).run("event:12", resumers=3, barrier=True, off="resume_claim")
    print(f"\ntwin resume_claim: {cell.violations}")
    assert "a losing resumer ran something" in cell.violations


def test_twin_without_the_live_check_a_late_resumer_steals_a_live_run(workdir: Path) -> None:
    cell = Matrix(None, workdir).run("event:5", resumers=2, staggered=True, off="refuse_live")
    print(f"\ntwin refuse_live: {cell.violations}")
    assert any("pay ran 2 times" in v or "not exactly one" in v for v in cell.violations)
