"""The gate's kill matrix: approvals, held siblings and a child's approval across SIGKILL.

A worker (tests/run/kill_worker.py) runs one scenario: a call the policy asks about
(`wire`) beside one it admits (`charge`), rejected or approved by a handler, or parked for
a person who decides from this (another) process; and the same inside a child agent, with a
sibling call (`log`) of the parent held by the tree while the child's request is open. The
worker is killed with SIGKILL after every journal event it records (its child's included),
and inside each tool before and after its effect; then the run is resumed by a new process,
as often as it takes (a person decides each time it parks), until it finishes.

Each cell is judged from outside the framework (tests/run/kill_harness.py, the judge of
every kill matrix): the effects log counts every effect (the
same as in the uninterrupted run: exactly once or never), the answer is the uninterrupted
run's, nothing held ran while its request was open (the effects log when the run parks),
what the store held at each kill is a prefix of the final journal, no call of any run of
the tree was both refused and admitted, and every `SpawnStarted` of the parent is paired
with a `SpawnFinished` before the parent's next end (`Parked` included). Twins switch one
protection off and show its violation.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kill_harness import GATE, PARKS, Cell, Harness, report

pytestmark = pytest.mark.usefixtures("fork_server")


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="legato-gate-kill-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _cells(harness: Harness, every: int) -> list[Cell]:
    """Every `every`-th event boundary of each process of the scenario, and each tool."""
    scenario = harness.scenario
    first, last = harness.baseline()
    points = [f"tool:{t}:{w}" for t in GATE[scenario] for w in ("before", "after")]
    cells = [harness.run(f"event:{n}") for n in range(1, first + 1, every)]
    if scenario not in PARKS:
        return cells + [harness.run(p) for p in points]
    resumed = range(1, last + 1, every)
    cells += [harness.run(f"event:{n}", phase="resume") for n in resumed]
    return cells + [harness.run(p, phase="resume") for p in points]


def _matrix(target: str | None, root: Path, label: str, *, every: int) -> None:
    failures: list[Cell] = []
    for scenario in GATE:
        cells = _cells(Harness(target, root / scenario, scenario), every)
        report(f"gate kill matrix {label}, {scenario}", cells)
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
    harness = Harness(None, root, scenario)
    first, last = harness.baseline()  # the answer, with every protection on
    events = range(1, (first if phase == "run" else last) + 1)
    cells = [harness.run(f"event:{n}", phase=phase, off=off) for n in events]
    report(f"gate kill matrix twin {scenario}, {off} off", cells)
    return [v for c in cells for v in c.violations]


@pytest.mark.timeout(900)  # a cell per event boundary, on 2 shared cores
def test_twin_without_the_projection_a_held_call_runs_after_a_crash(workdir: Path) -> None:
    found = _twin(workdir, "rejected", "project_decisions")
    assert "charge ran 1 times, not 0" in found
    assert "charge refused, then admitted" in found
    assert any(v.startswith("the answer changed") for v in found)


@pytest.mark.timeout(900)  # a cell per event boundary, on 2 shared cores
def test_twin_without_the_projection_a_child_runs_its_held_call(workdir: Path) -> None:
    found = _twin(workdir, "child", "project_decisions")
    assert "charge ran 1 times, not 0" in found
    assert "charge refused, then admitted" in found


@pytest.mark.timeout(900)  # a cell per event boundary, on 2 shared cores
def test_twin_without_the_hold_a_sibling_runs_before_the_person_decides(workdir: Path) -> None:
    found = _twin(workdir, "parked", "hold_run_wide")
    assert "charge ran 1 times, not 0" in found


@pytest.mark.timeout(900)  # a cell per event boundary, on 2 shared cores
def test_twin_without_the_tree_hold_the_parent_runs_while_the_child_waits(
    workdir: Path,
) -> None:
    found = _twin(workdir, "child-parked", "hold_tree")
    assert "log ran before the decision" in found


@pytest.mark.timeout(900)  # a cell per event boundary, on 2 shared cores
def test_twin_without_finish_children_a_parked_child_is_unpaired(workdir: Path) -> None:
    found = _twin(workdir, "child-parked", "finish_children")
    assert "a spawn without its SpawnFinished before run_parked" in found


def test_twin_without_dedup_a_released_sibling_runs_twice(workdir: Path) -> None:
    harness = Harness(None, workdir, "approved")
    harness.baseline()
    cell = harness.run("tool:charge:after", off="dedup")
    report("gate kill matrix twin approved, dedup off", [cell])
    assert "charge ran 2 times, not 1" in cell.violations
