"""Edge cells of the kill matrix: two legato objects on one file, the CLI deciding mid-run.

Workers (tests/run/edge_worker.py, forked from a server that has legato loaded) run the
kill matrix's agent on a SQLite file and are killed with SIGKILL after every few journal
events; a resumer then resumes the run by id. Besides the kill matrix's judgement (the run
finishes with the same answer; each irreversible effect happened once; the stored prefix
is unchanged), each cell checks that no event a worker had committed was lost.

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

import collections
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import edge_worker
import pytest

from legato.events import ApprovalDecided, Journal, RunFinished
from legato.exceptions import JournalError
from legato.store import SQLiteStore

IRREVERSIBLE = ("pay", "send", "refund")
DECIDER = Path(__file__).resolve().parents[1] / "store" / "cli_decider.py"
SRC = Path(__file__).resolve().parents[2] / "src"


def _context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["edge_worker"])
    return ctx


@dataclass
class Cell:
    """What one kill point did, and what it broke."""

    kill: str
    first_exit: int | None = None
    resumer_exit: int | None = None
    effects: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    deciders: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    violations: list[str] = field(default_factory=list[str])


class EdgeMatrix:
    """Runs edge cells, each in a folder of its own with its own SQLite file."""

    def __init__(self, root: Path, *flags: str, deciders: str = "") -> None:
        self.root = root
        self.flags = list(flags)
        self.deciders = deciders  # "", or the cli_decider mode ("safe" / "unconditional")
        self.ctx = _context()
        self.counter = 0

    def _worker(self, cell_dir: Path, mode: str, *extra: str) -> Any:
        argv = [
            "--store", str(cell_dir / "runs.db"),
            "--effects", str(cell_dir / "effects"),
            "--mode", mode,
            "--run-id-file", str(cell_dir / "run_id"),
            *self.flags,
            *extra,
        ]  # fmt: skip
        process = self.ctx.Process(target=edge_worker.run_edge_worker, args=(argv,))
        process.start()
        return process

    def run(self, kill: str, *, first_only: list[str] | None = None) -> Cell:
        self.counter += 1
        cell_dir = self.root / f"cell{self.counter}"
        cell_dir.mkdir()
        cell = Cell(kill=kill)
        saved_file = cell_dir / "saved"
        first = self._worker(
            cell_dir,
            "run",
            f"--kill={kill}",
            f"--saved={saved_file}",
            f"--stats={cell_dir / 'stats-run'}",
            *(first_only or []),
        )
        self._attend(first, cell_dir, cell)
        cell.first_exit = first.exitcode
        db = cell_dir / "runs.db"
        id_file = cell_dir / "run_id"
        run_id = id_file.read_text().strip() if id_file.exists() else "never-started"
        at_kill = _load_all(db, run_id)
        saved: dict[str, int] = json.loads(saved_file.read_text()) if saved_file.exists() else {}
        for member, count in saved.items():
            stored = len(at_kill.get(member, ()))
            if stored < count:
                cell.violations.append(f"committed events lost ({count} committed, {stored} kept)")
        if cell.first_exit != 0:
            if not id_file.exists():
                id_file.write_text(run_id)
            resumer = self._worker(cell_dir, "resume", f"--stats={cell_dir / 'stats-resume'}")
            self._attend(resumer, cell_dir, cell)
            cell.resumer_exit = resumer.exitcode
        log = cell_dir / "effects"
        effects: dict[str, list[str]] = collections.defaultdict(list)
        for line in log.read_text().splitlines() if log.exists() else []:
            name, key = line.split(" ", 1)
            effects[name].append(key)
        cell.effects = dict(effects)
        final = _load_all(db, run_id)
        self._judge(cell, at_kill.get(run_id), final.get(run_id))
        return cell

    def _attend(self, process: Any, cell_dir: Path, cell: Cell) -> None:
        """Wait for the process; meanwhile decide its parked requests through the CLI."""
        decided: set[str] = set()
        id_file = cell_dir / "run_id"
        deadline = time.monotonic() + 120
        while process.is_alive() and time.monotonic() < deadline:
            if self.deciders and id_file.exists() and (cell_dir / "runs.db").exists():
                for request_id in _parked(cell_dir / "runs.db") - decided:
                    decided.add(request_id)
                    cell.deciders += _race(cell_dir / "runs.db", request_id, self.deciders)
            process.join(0.05)
        process.join(5)

    def _judge(self, cell: Cell, at_kill: Journal | None, final: Journal | None) -> None:
        v = cell.violations
        for name in IRREVERSIBLE:
            if len(cell.effects.get(name, [])) > 1:
                v.append(f"{name} ran {len(cell.effects[name])} times")
        if len(set(cell.effects.get("put", []))) > 1:
            v.append("put applied under two keys")
        if at_kill is None:
            if cell.effects:
                v.append(f"effects without a stored run: {sorted(cell.effects)}")
            return
        if final is None or not isinstance(final.events[-1], RunFinished):
            v.append("the run did not finish")
            return
        if final.events[-1].output != "done":
            v.append(f"wrong answer {final.events[-1].output!r}")
        if list(final.events[: len(at_kill)]) != list(at_kill.events):
            v.append("the stored prefix changed")
        approved = True
        if self.deciders:
            winners = [verb for verb, code in cell.deciders if code == 0]
            if len(cell.deciders) and len(winners) != 1:
                v.append(f"{len(winners)} of {len(cell.deciders)} deciders were told yes")
            verdicts = [e.verdict for e in final if isinstance(e, ApprovalDecided)]
            if winners and verdicts != winners[-1:]:
                v.append(f"the journal says {verdicts}, the deciders were told {winners}")
            approved = verdicts == ["approve"]
        # a rejection of `send` also refuses the side-effecting calls it held (its siblings)
        needed = ["pay", "put", "refund", "send"] if approved else []
        v.extend(f"{name} never took effect" for name in needed if not cell.effects.get(name))
        if not approved and cell.effects.get("send"):
            v.append("send ran although rejected")


def _load_all(db: Path, run_id: str) -> dict[str, Journal]:
    """Every run's journal in the file (the run and its child), read by a fresh process view."""
    if not db.exists():
        return {}
    store = SQLiteStore(db)
    try:
        found: dict[str, Journal] = {}
        for info in store.list_runs(limit=100):
            try:
                found[info.run_id] = store.load_run(info.run_id)
            except JournalError:
                continue
        return found
    finally:
        store.close()


def _parked(db: Path) -> set[str]:
    store = SQLiteStore(db)
    try:
        return {a.request_id for a in store.approvals() if a.state == "parked"}
    finally:
        store.close()


def _race(db: Path, request_id: str, mode: str) -> list[tuple[str, int]]:
    """Two CLI processes, `approve` and `reject`, decide one request at once."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    verbs = ["approve", "reject"]
    procs = [
        subprocess.Popen(
            [sys.executable, str(DECIDER), mode, "runs", verb, request_id, "--store", str(db)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for verb in verbs
    ]
    for proc in procs:
        assert proc.stdout is not None
        proc.stdout.readline()  # ready
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results: list[tuple[str, int]] = []
    for verb, proc in zip(verbs, procs, strict=True):
        proc.communicate(timeout=120)
        results.append((verb, proc.returncode))
    return results


@pytest.fixture(scope="module", autouse=True)
def _stop_servers() -> Iterator[None]:
    """Stop the fork server (and its resource tracker) after this module."""
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
    path = Path(tempfile.mkdtemp(prefix="legato-edge-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _events(matrix: EdgeMatrix) -> int:
    cell = matrix.run("none")
    assert cell.violations == [] and cell.first_exit == 0, cell
    stats = matrix.root / f"cell{matrix.counter}" / "stats-run"
    return int(json.loads(stats.read_text())["events"])


def _report(label: str, cells: list[Cell]) -> collections.Counter[str]:
    violations: collections.Counter[str] = collections.Counter()
    for cell in cells:
        for item in cell.violations:
            violations[item.split(" (", 1)[0]] += 1
    killed = sum(1 for c in cells if c.first_exit == -9)
    print(
        f"\nedge cells {label}: {len(cells)} cells, {killed} kills; violations {dict(violations) or 0}"
    )
    return violations


PEER_AT = 3
TWO_OBJECTS = ("--two-objects", f"--peer-at={PEER_AT}")


@pytest.mark.timeout(1500)
def test_two_legato_objects_on_one_file_every_kill_point(workdir: Path) -> None:
    matrix = EdgeMatrix(workdir, *TWO_OBJECTS)
    events = _events(matrix)
    cells = [matrix.run(f"event:{n}") for n in range(PEER_AT + 1, events + 1, 2)]
    _report("two legato objects on one file", cells)
    assert [c for c in cells if c.violations] == []


def test_twin_a_plain_descriptor_of_the_file_loses_committed_events(workdir: Path) -> None:
    matrix = EdgeMatrix(workdir, *TWO_OBJECTS)
    cells = [matrix.run(f"event:{n}", first_only=["--plain-open"]) for n in (12, 20)]
    _report("twin: plain open+close in the worker", cells)
    assert all(any(v.startswith("committed events lost") for v in c.violations) for c in cells)


@pytest.mark.timeout(1500)
def test_the_cli_deciding_while_a_worker_runs_every_few_kill_points(workdir: Path) -> None:
    matrix = EdgeMatrix(workdir, "--wait-decision", deciders="safe")
    events = _events(matrix)
    cells = [matrix.run(f"event:{n}") for n in range(1, events + 1, 4)]
    _report("the CLI deciding while a worker runs", cells)
    assert [(c.kill, c.violations) for c in cells if c.violations] == []
    # every run that was stored went through the deciders (one killed before its first
    # commit is not stored, and its resumer has nothing to resume)
    assert all(len(c.deciders) >= 2 for c in cells if c.resumer_exit == 0), [
        (c.kill, c.resumer_exit, c.deciders) for c in cells
    ]


def test_twin_deciders_without_the_condition_are_both_told_yes(workdir: Path) -> None:
    matrix = EdgeMatrix(workdir, "--wait-decision", deciders="unconditional")
    cell = matrix.run("none")
    _report("twin: deciders with a plain write", [cell])
    assert any("2 of 2 deciders were told yes" in v for v in cell.violations)
