"""The gate's kill matrix: approvals, held siblings and a child's approval across SIGKILL.

A worker (tests/run/gate_kill_worker.py) runs one scenario: a call the policy asks about
(`wire`) beside one it admits (`charge`), rejected or approved by a handler, or parked for
a person who decides from this (another) process; and the same inside a child agent, with a
sibling call (`log`) of the parent held by the tree while the child's request is open. The
worker is killed with SIGKILL after every journal event it records (its child's included),
and inside each tool before and after its effect; then the run is resumed by a new process,
as often as it takes (a person decides each time it parks), until it finishes.

Each cell is judged from outside the framework: the effects log counts every effect (the
same as in the uninterrupted run: exactly once or never), the answer is the uninterrupted
run's, nothing held ran while its request was open (the effects log when the run parks),
what the store held at each kill is a prefix of the final journal, no call of any run of
the tree was both refused and admitted, and every `SpawnStarted` of the parent is paired
with a `SpawnFinished` before the parent's next end (`Parked` included). Twins switch one
protection off and show its violation.
"""

from __future__ import annotations

import asyncio
import collections
import json
import multiprocessing
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gate_kill_worker
import pytest

from legato.approvals import Approve, Reject, SQLiteApprovalStore
from legato.events import (
    Journal,
    Parked,
    RunFailed,
    RunFinished,
    SpawnFinished,
    SpawnStarted,
    ToolCallAdmitted,
    ToolCallRefused,
)
from legato.exceptions import JournalError
from legato.store import PostgresStore, SQLiteStore

EXPECTED = {
    "rejected": {},
    "approved": {"wire": 1, "charge": 1},
    "child": {"log": 1},
    "parked": {},
    "child-parked": {"log": 1},
}
"""The effects of each scenario (every effect not listed: never)."""

PARKS = ("parked", "child-parked")


def _context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["gate_kill_worker"])
    return ctx


@dataclass
class Cell:
    """One kill point of one scenario: what the processes did, and what broke."""

    scenario: str
    kill: str
    exits: list[int | None] = field(default_factory=list[int | None])
    effects: dict[str, int] = field(default_factory=dict[str, int])
    answer: str | None = None
    violations: list[str] = field(default_factory=list[str])


class GateMatrix:
    """Runs cells of the gate's scenarios against one store target."""

    def __init__(self, target: str | None, root: Path) -> None:
        self.target = target
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.ctx = _context()
        self.counter = 0
        self.answers: dict[str, str] = {}

    def _store_arg(self, cell_dir: Path) -> str:
        return self.target if self.target is not None else str(cell_dir / "runs.db")

    def _open(self, cell_dir: Path) -> Any:
        target = self._store_arg(cell_dir)
        return PostgresStore(target) if target.startswith("postgresql://") else SQLiteStore(target)

    def _worker(self, cell_dir: Path, scenario: str, mode: str, *extra: str) -> int | None:
        argv = [
            "--scenario", scenario,
            "--store", self._store_arg(cell_dir),
            "--effects", str(cell_dir / "effects"),
            "--mode", mode,
            "--run-id-file", str(cell_dir / "run_id"),
            *extra,
        ]  # fmt: skip
        process = self.ctx.Process(target=gate_kill_worker.run_worker, args=(argv,))
        process.start()
        process.join(60)
        if process.exitcode is None:
            process.kill()
            process.join()
        return process.exitcode

    def run(self, scenario: str, kill: str, *, phase: str = "run", off: str = "") -> Cell:
        """Kill the process of `phase` (`run`: the first; `resume`: the first resumer
        after a person decided) at `kill`, then resume until the run ends."""
        self.counter += 1
        cell_dir = self.root / f"cell{self.counter}"
        cell_dir.mkdir()
        cell = Cell(scenario=scenario, kill=f"{phase}:{kill}")
        flags = [f"--off={off}"] if off else []
        store = self._open(cell_dir)
        kills_left = 1
        prefixes: list[Journal] = []
        decided = False
        mode = "run"
        for index in range(8):
            armed = kills_left > 0 and (mode == "run" if phase == "run" else decided)
            extra = [f"--kill={kill}"] if armed else []
            stats = f"--stats={cell_dir / f'stats{index}'}"
            code = self._worker(cell_dir, scenario, mode, stats, *extra, *flags)
            cell.exits.append(code)
            kills_left -= 1 if armed else 0
            if not (cell_dir / "run_id").exists():  # killed inside `agent.start`
                (cell_dir / "run_id").write_text("never-started")
            run_id = _run_id(cell_dir)
            found = _load(store, run_id)
            if code == -9 and found is not None:
                prefixes.append(found)
            if code in (0, 4):  # finished (4: it had finished, or was never stored)
                break
            if code == 6:
                early = _effects(cell_dir / "effects") if not decided else {}
                if early:  # a held call ran while its request was open
                    cell.violations.append(f"{', '.join(sorted(early))} ran before the decision")
                asyncio.run(_decide(self._store_arg(cell_dir), store))
                decided = True
            elif code not in (-9, 3):
                cell.violations.append(f"a worker failed with exit code {code}")
                break
            mode = "resume"
        cell.effects = _effects(cell_dir / "effects")
        self._judge(cell, store, _run_id(cell_dir), prefixes)
        if hasattr(store, "close"):
            store.close()
        return cell

    def _judge(self, cell: Cell, store: Any, run_id: str, prefixes: list[Journal]) -> None:
        v = cell.violations
        expected = EXPECTED[cell.scenario]
        final = _load(store, run_id)
        if final is None:  # never stored: nothing may have happened
            if cell.effects:
                v.append(f"effects without a stored run: {cell.effects}")
            return
        for name in ("wire", "charge", "log"):
            ran, want = cell.effects.get(name, 0), expected.get(name, 0)
            if ran != want:
                v.append(f"{name} ran {ran} times, not {want}")
        last = final.events[-1]
        if not isinstance(last, RunFinished):
            v.append(f"the run did not finish ({last.kind})")
            return
        cell.answer = str(last.output)
        want_answer = self.answers.get(cell.scenario)
        if want_answer is not None and cell.answer != want_answer:
            v.append(f"the answer changed: {cell.answer!r}")
        if any(list(final.events[: len(p)]) != list(p.events) for p in prefixes):
            v.append("the stored prefix changed")
        v.extend(_pairing(final))
        for journal in (final, *_children(store, final)):
            v.extend(_refused_then_admitted(journal))


def _run_id(cell_dir: Path) -> str:
    path = cell_dir / "run_id"
    return path.read_text().strip() if path.exists() else "never-started"


def _load(store: Any, run_id: str) -> Journal | None:
    try:
        return store.load_run(run_id)
    except JournalError:
        return None


def _effects(log: Path) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for line in log.read_text().splitlines() if log.exists() else []:
        counts[line.split(" ", 1)[0]] += 1
    return dict(counts)


async def _decide(target: str, store: Any) -> None:
    """A person answers every open request from this process: reject `wire`."""
    approvals: Any
    if target.startswith("postgresql://"):
        from legato.approvals import PostgresApprovalStore

        approvals = PostgresApprovalStore(store)
    else:
        approvals = SQLiteApprovalStore(store)
    for request in await approvals.pending():
        decision = (
            Reject(message=gate_kill_worker.REJECTION) if request.tool == "wire" else Approve()
        )
        await approvals.decide(request.id, request.token, decision)


def _children(store: Any, journal: Journal) -> list[Journal]:
    ids = {e.lineage.run_id for e in journal if isinstance(e, SpawnStarted)}
    return [j for j in (_load(store, i) for i in sorted(ids)) if j is not None]


def _pairing(journal: Journal) -> list[str]:
    """Every `SpawnStarted` has its `SpawnFinished` before the run's next end."""
    open_children: set[str] = set()
    found: list[str] = []
    for event in journal:
        if isinstance(event, SpawnStarted):
            open_children.add(event.lineage.run_id)
        elif isinstance(event, SpawnFinished):
            open_children.discard(event.lineage.run_id)
        elif isinstance(event, Parked | RunFinished | RunFailed) and open_children:
            found.append(f"a spawn without its SpawnFinished before {event.kind}")
            open_children.clear()
    return found


def _refused_then_admitted(journal: Journal) -> list[str]:
    """A call the gate refused is never admitted later (the refusal is the decision)."""
    refused: set[tuple[int, str]] = set()
    found: list[str] = []
    for event in journal:
        if isinstance(event, ToolCallRefused) and event.reason != "duplicate":
            refused.add((event.step, event.call_id))
        elif isinstance(event, ToolCallAdmitted) and (event.step, event.call_id) in refused:
            found.append(f"{event.tool} refused, then admitted")
    return found


@pytest.fixture(scope="module", autouse=True)
def _stop_servers() -> Iterator[None]:
    """Stop the fork server (and its resource tracker) after this module: other tests
    check that no child process of the test run is left behind."""
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
    path = Path(tempfile.mkdtemp(prefix="legato-gate-kill-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _baseline(matrix: GateMatrix, scenario: str) -> tuple[int, int]:
    """Run the scenario uninterrupted: keep its answer; the events its first process and
    its last process recorded (the same process, unless the run parked)."""
    cell = matrix.run(scenario, "none")
    assert cell.violations == [] and cell.answer is not None, cell
    matrix.answers[scenario] = cell.answer
    cell_dir = matrix.root / f"cell{matrix.counter}"
    counts = [
        int(json.loads((cell_dir / f"stats{i}").read_text())["events"])
        for i in range(len(cell.exits))
    ]
    return counts[0], counts[-1]


def _cells(matrix: GateMatrix, scenario: str, every: int) -> list[Cell]:
    """Every `every`-th event boundary of each process of the scenario, and each tool."""
    first, last = _baseline(matrix, scenario)
    points = [f"tool:{t}:{w}" for t in EXPECTED[scenario] for w in ("before", "after")]
    cells = [matrix.run(scenario, f"event:{n}") for n in range(1, first + 1, every)]
    if scenario not in PARKS:
        return cells + [matrix.run(scenario, p) for p in points]
    resumed = range(1, last + 1, every)
    cells += [matrix.run(scenario, f"event:{n}", phase="resume") for n in resumed]
    return cells + [matrix.run(scenario, p, phase="resume") for p in points]


def _report(label: str, cells: list[Cell]) -> collections.Counter[str]:
    violations: collections.Counter[str] = collections.Counter()
    for cell in cells:
        for item in cell.violations:
            violations[item] += 1
    killed = sum(1 for c in cells if -9 in c.exits)
    print(
        f"\ngate kill matrix {label}: {len(cells)} cells, {killed} kills; violations {dict(violations) or 0}"
    )
    return violations


def _matrix(target: str | None, root: Path, label: str, *, every: int) -> None:
    failures: list[Cell] = []
    for scenario in EXPECTED:
        cells = _cells(GateMatrix(target, root / scenario), scenario, every)
        _report(f"{label}, {scenario}", cells)
        failures += [c for c in cells if c.violations]
    assert failures == [], [(c.scenario, c.kill, c.violations, c.exits) for c in failures]


@pytest.mark.timeout(1500)
def test_gate_kill_matrix_sqlite(workdir: Path) -> None:
    _matrix(None, workdir, "sqlite", every=1)


@pytest.mark.timeout(1500)
def test_gate_kill_matrix_postgres(workdir: Path, pg_dsn: str) -> None:
    _matrix(pg_dsn, workdir, "postgres", every=3)


# -- twins: each protection off shows its violation ------------------------------------------------


def _twin(root: Path, scenario: str, off: str, *, phase: str = "run") -> list[str]:
    """The violations of every event cell of `scenario` with `off` switched off."""
    matrix = GateMatrix(None, root)
    first, last = _baseline(matrix, scenario)  # the answer, with every protection on
    events = range(1, (first if phase == "run" else last) + 1)
    cells = [matrix.run(scenario, f"event:{n}", phase=phase, off=off) for n in events]
    _report(f"twin {scenario}, {off} off", cells)
    return [v for c in cells for v in c.violations]


def test_twin_without_the_projection_a_held_call_runs_after_a_crash(workdir: Path) -> None:
    found = _twin(workdir, "rejected", "project_decisions")
    assert "charge ran 1 times, not 0" in found
    assert "charge refused, then admitted" in found
    assert any(v.startswith("the answer changed") for v in found)


def test_twin_without_the_projection_a_child_runs_its_held_call(workdir: Path) -> None:
    found = _twin(workdir, "child", "project_decisions")
    assert "charge ran 1 times, not 0" in found
    assert "charge refused, then admitted" in found


def test_twin_without_the_hold_a_sibling_runs_before_the_person_decides(workdir: Path) -> None:
    found = _twin(workdir, "parked", "hold_run_wide")
    assert "charge ran 1 times, not 0" in found


def test_twin_without_the_tree_hold_the_parent_runs_while_the_child_waits(
    workdir: Path,
) -> None:
    found = _twin(workdir, "child-parked", "hold_tree")
    assert "log ran before the decision" in found


def test_twin_without_finish_children_a_parked_child_is_unpaired(workdir: Path) -> None:
    found = _twin(workdir, "child-parked", "finish_children")
    assert "a spawn without its SpawnFinished before run_parked" in found


def test_twin_without_dedup_a_released_sibling_runs_twice(workdir: Path) -> None:
    matrix = GateMatrix(None, workdir)
    _baseline(matrix, "approved")
    cell = matrix.run("approved", "tool:charge:after", off="dedup")
    _report("twin approved, dedup off", [cell])
    assert "charge ran 2 times, not 1" in cell.violations
