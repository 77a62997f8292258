"""The kill matrix: real worker processes killed with SIGKILL, then resumed.

A worker (tests/run/kill_worker.py, scenario `matrix`) runs a scripted agent whose model
issues parallel calls (irreversible `pay`, idempotent `put`, read-only `read`, asked
`send`) and delegates to a child agent with an irreversible `refund`. It is killed after
every journal event it records, and inside each side-effecting tool before and after its
effect; then one or several resumer processes, started together, resume the stored run by
id. Each cell is judged by tests/run/kill_harness.py against the uninterrupted run: the run
finishes with the same answer; each irreversible effect happened exactly once and the
idempotent one under one key; what the store held at the kill is a prefix of the final
journal; exactly one resumer goes on and the others get a typed error without making a
model call.

The test prints its counts; docs/durability.md records them. Each protection has a twin
cell showing the violation with the protection switched off.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kill_harness import Harness, report

pytestmark = pytest.mark.usefixtures("fork_server")

TOOL_POINTS = [
    f"tool:{t}:{when}" for t in ("pay", "put", "send", "refund") for when in ("before", "after")
]


def _matrix_harness(target: str | None, root: Path) -> Harness:
    return Harness(target, root, "matrix", rounds=2, always_resume=True)


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="legato-kill-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def kill_points(events: int, *, every: int) -> tuple[list[str], list[str]]:
    """Every event boundary and tool point (one resumer); every `every`-th one (racing)."""
    single = [f"event:{n}" for n in range(1, events + 1)] + TOOL_POINTS
    sampled = [f"event:{n}" for n in range(1, events + 1, every)] + TOOL_POINTS
    return single, sampled


def _matrix(harness: Harness, label: str, *, every: int, concurrent: int) -> None:
    events, _ = harness.baseline()  # the parent's and the child's events
    points, sampled = kill_points(events, every=every)
    single = [harness.run(p) for p in points]
    racing = [harness.run(p, resumers=concurrent, barrier=True) for p in sampled]
    late = [harness.run(p, resumers=2, staggered=True) for p in ("event:5", "event:12")]
    failures = [c for c in single + racing + late if c.violations]
    report(f"kill matrix {label}, 1 resumer", single)
    report(f"kill matrix {label}, {concurrent} concurrent resumers", racing)
    report(f"kill matrix {label}, a live resumer and a late one", late)
    assert failures == [], [(c.kill, c.violations, c.resumer_exits) for c in failures]


@pytest.mark.timeout(1500)
def test_kill_matrix_sqlite(workdir: Path) -> None:
    _matrix(_matrix_harness(None, workdir), "sqlite", every=3, concurrent=4)


@pytest.mark.timeout(1500)
def test_kill_matrix_postgres(workdir: Path, pg_dsn: str) -> None:
    _matrix(_matrix_harness(pg_dsn, workdir), "postgres", every=4, concurrent=3)


# -- twins: each protection off shows its violation ------------------------------------------------


def test_twin_without_write_ahead_a_paid_call_is_paid_again(workdir: Path) -> None:
    cell = _matrix_harness(None, workdir).run("tool:pay:after", off="write_ahead")
    print(f"\ntwin write_ahead: {cell.violations}")
    assert "pay ran 2 times, not 1" in cell.violations


def test_twin_without_dedup_a_paid_call_is_paid_again(workdir: Path) -> None:
    cell = _matrix_harness(None, workdir).run("tool:pay:after", off="dedup")
    print(f"\ntwin dedup: {cell.violations}")
    assert "pay ran 2 times, not 1" in cell.violations


def test_twin_without_reconcile_hooks_an_approver_who_says_retry_pays_again(
    workdir: Path,
) -> None:
    """Without a reconcile hook the person is asked; this one answers "run it again"
    although it ran: the protection is the hook (or a person who knows), not luck."""
    cell = _matrix_harness(None, workdir).run("tool:pay:after", reconcile=False)
    print(f"\ntwin reconcile: {cell.violations}")
    assert "pay ran 2 times, not 1" in cell.violations


def test_twin_without_the_claim_losing_resumers_run(workdir: Path) -> None:
    cell = _matrix_harness(None, workdir).run(
        "event:12", resumers=3, barrier=True, off="resume_claim"
    )
    print(f"\ntwin resume_claim: {cell.violations}")
    assert "a losing resumer ran something" in cell.violations


def test_twin_without_the_live_check_a_late_resumer_steals_a_live_run(workdir: Path) -> None:
    cell = _matrix_harness(None, workdir).run(
        "event:5", resumers=2, staggered=True, off="refuse_live"
    )
    print(f"\ntwin refuse_live: {cell.violations}")
    assert any("pay ran 2 times" in v or "not exactly one" in v for v in cell.violations)
