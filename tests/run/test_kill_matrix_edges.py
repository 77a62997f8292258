"""Edge cells of the kill matrix: two legato objects on one file, the CLI deciding mid-run.

Workers (tests/run/kill_worker.py, the `matrix` scenario, forked from a server that has
legato loaded) run the kill matrix's agent on a SQLite file and are killed with SIGKILL
after every few journal events; a resumer then resumes the run by id. The judge is the
kill matrix's (tests/run/kill_harness.py: the run finishes with the same answer; each
irreversible effect happened once; the stored prefix is unchanged; no event a worker had
committed was lost), with the edge each cell sets up:

- **two legato objects on one file**: the worker opens the store and the approvals as two
  objects on the file's path; another process opens and closes the file (as `legato runs
  list` does) in the middle of the run. Twin: the worker also opens and closes a plain
  descriptor of the file (legato's old header check), which drops its locks: committed
  events vanish.
- **the CLI deciding while a worker runs**: `send` waits for a decision through the store;
  two `legato runs approve|reject` processes decide it at once, while the worker (or, after
  a kill, its resumer) waits. Exactly one of them gets in, the run follows that decision
  and `send` runs at most once (once if approved). Twin: the deciders write without the
  "still undecided" condition, and both are told yes.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kill_harness import Harness, report

pytestmark = pytest.mark.usefixtures("fork_server")

PEER_AT = 3
TWO_OBJECTS = ("--two-objects", f"--peer-at={PEER_AT}")


def _edges(root: Path, *flags: str, deciders: str = "") -> Harness:
    return Harness(None, root, "matrix", *flags, deciders=deciders, rounds=2)


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="legato-edge-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(1500)
def test_two_legato_objects_on_one_file_every_kill_point(workdir: Path) -> None:
    harness = _edges(workdir, *TWO_OBJECTS)
    events, _ = harness.baseline()
    cells = [harness.run(f"event:{n}") for n in range(PEER_AT + 1, events + 1, 2)]
    report("edge cells two legato objects on one file", cells)
    assert [c for c in cells if c.violations] == []


def test_twin_a_plain_descriptor_of_the_file_loses_committed_events(workdir: Path) -> None:
    harness = _edges(workdir, *TWO_OBJECTS)
    cells = [harness.run(f"event:{n}", first_only=("--plain-open",)) for n in (12, 20)]
    report("edge cells twin: plain open+close in the worker", cells)
    assert all(any(v.startswith("committed events lost") for v in c.violations) for c in cells)


@pytest.mark.timeout(1500)
def test_the_cli_deciding_while_a_worker_runs_every_few_kill_points(workdir: Path) -> None:
    harness = _edges(workdir, "--wait-decision", deciders="safe")
    events, _ = harness.baseline()
    cells = [harness.run(f"event:{n}") for n in range(1, events + 1, 4)]
    report("edge cells the CLI deciding while a worker runs", cells)
    assert [(c.kill, c.violations) for c in cells if c.violations] == []
    # every run that was stored went through the deciders (one killed before its first
    # commit is not stored, and its resumer has nothing to resume)
    assert all(len(c.deciders) >= 2 for c in cells if c.resumer_exits == [0]), [
        (c.kill, c.resumer_exits, c.deciders) for c in cells
    ]


def test_twin_deciders_without_the_condition_are_both_told_yes(workdir: Path) -> None:
    harness = _edges(workdir, "--wait-decision", deciders="unconditional")
    cell = harness.run("none")
    report("edge cells twin: deciders with a plain write", [cell])
    assert any("2 of 2 deciders were told yes" in v for v in cell.violations)
