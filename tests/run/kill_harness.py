"""The one runner and judge of the kill matrices (test_kill_matrix*.py, test_gate_kill_matrix.py).

A cell starts a worker (kill_worker.py, forked from a server that has legato loaded, so a
cell costs milliseconds, not an interpreter start), kills it at one point, then resumes the
run by id, with one resumer or several started together, again and again until it ends; a
person decides from this process each time it parks, or two `legato runs approve|reject`
processes decide while a worker waits. Then the cell is judged from outside the framework:

- the effects log shows each effect as often as the scenario says (an irreversible one
  exactly once or never; the idempotent `put` under one key), and nothing ran while a
  request was open and the run parked, nor without a stored run;
- the run finished with the uninterrupted run's answer; what the store held at each kill is
  a prefix of the final journal, and no event a worker had committed was lost;
- of resumers started together exactly one goes on (none for a finished run), and the
  others run nothing and exit with a typed error;
- no call of any run of the tree is refused and later admitted, and every `SpawnStarted`
  has its `SpawnFinished` before the parent's next end;
- with CLI deciders, exactly one of them is told yes and the journal follows that one.
"""

from __future__ import annotations

import asyncio
import collections
import json
import multiprocessing
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kill_worker

from legato.approvals import Approve, PostgresApprovalStore, Reject, SQLiteApprovalStore
from legato.events import (
    ApprovalDecided,
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

DECIDER = Path(__file__).resolve().parents[1] / "store" / "cli_decider.py"
SRC = Path(__file__).resolve().parents[2] / "src"
MANY = 1_000_000

MATRIX = {"pay": (1, 1), "put": (1, MANY), "send": (1, 1), "refund": (1, 1)}
"""The matrix scenario's effects: how often each runs, at least and at most."""
MATRIX_REJECTED = {"pay": (0, 1), "put": (0, MANY), "send": (0, 0), "refund": (0, 1)}
"""...when the CLI rejected `send` (which also refuses the side-effecting calls it held)."""
GATE = {
    "rejected": {},
    "approved": {"wire": 1, "charge": 1},
    "child": {"log": 1},
    "parked": {},
    "child-parked": {"log": 1},
}
"""The effects of each gate scenario (every effect not listed: never)."""
PARKS = ("parked", "child-parked")


def expected(scenario: str) -> dict[str, tuple[int, int]]:
    """How often each effect of `scenario` runs: (at least, at most)."""
    if scenario == "matrix":
        return MATRIX
    listed = GATE[scenario]
    return {n: (listed.get(n, 0), listed.get(n, 0)) for n in ("wire", "charge", "log")}


@dataclass
class Cell:
    """One kill point of one scenario: what the processes did, and what broke."""

    scenario: str
    kill: str
    exits: list[int | None] = field(default_factory=list[int | None])
    """Every worker's exit code, in the order they started (-9: killed)."""
    rounds: list[list[int]] = field(default_factory=list[list[int]])
    """The workers started together, as indexes into `exits`."""
    stats: list[dict[str, int]] = field(default_factory=list[dict[str, int]])
    effects: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    """Each effect's idempotency keys, one per time it ran."""
    deciders: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    answer: str | None = None
    violations: list[str] = field(default_factory=list[str])

    @property
    def first_exit(self) -> int | None:
        """The first worker's exit code."""
        return self.exits[0]

    @property
    def resumer_exits(self) -> list[int | None]:
        """The exit codes of the first resumers (started together)."""
        return [self.exits[i] for i in self.rounds[1]] if len(self.rounds) > 1 else []


@dataclass
class _Run:
    """What a cell learns while its processes run."""

    cell_dir: Path
    prefixes: list[Journal] = field(default_factory=list[Journal])
    finished_before: list[bool] = field(default_factory=list[bool])
    """Per round: whether the run had finished when its workers started."""
    decided: bool = False
    finished: bool = False
    """Whether the stored run had finished after the last round."""


class Harness:
    """Runs cells of one scenario against one store target (a SQLite file per cell, or one
    PostgreSQL database), with `flags` given to every worker."""

    def __init__(
        self,
        target: str | None,
        root: Path,
        scenario: str = "matrix",
        *flags: str,
        deciders: str = "",
        rounds: int = 8,
        always_resume: bool = False,
    ) -> None:
        """`deciders`: "", or cli_decider's mode ("safe", "unconditional"); `rounds`: how
        many times workers are started at most; `always_resume`: resume a run that finished."""
        self.target = target
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.scenario = scenario
        self.flags = list(flags)
        self.deciders = deciders
        self.max_rounds = rounds
        self.always_resume = always_resume
        self.answer: str | None = "done" if scenario == "matrix" else None
        self.counter = 0
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["kill_worker"])
        self.ctx = ctx

    def store_arg(self, cell_dir: Path) -> str:
        """The worker's `--store`."""
        return self.target if self.target is not None else str(cell_dir / "runs.db")

    def _open(self, cell_dir: Path) -> Any:
        target = self.store_arg(cell_dir)
        return PostgresStore(target) if target.startswith("postgresql://") else SQLiteStore(target)

    def _load(self, cell_dir: Path, run_ids: list[str]) -> dict[str, Journal]:
        """The stored journals of `run_ids`, read by a store opened for it (and closed: a
        SQLite connection held across the run would change what the edge twins show)."""
        if self.target is None and not (cell_dir / "runs.db").exists():
            return {}
        store = self._open(cell_dir)
        try:
            found: dict[str, Journal] = {}
            for run_id in run_ids:
                try:
                    found[run_id] = store.load_run(run_id)
                except JournalError:
                    continue
            return found
        finally:
            store.close()

    def _start(self, cell_dir: Path, mode: str, *extra: str) -> Any:
        argv = [
            "--scenario", self.scenario,
            "--store", self.store_arg(cell_dir),
            "--effects", str(cell_dir / "effects"),
            "--mode", mode,
            "--run-id-file", str(cell_dir / "run_id"),
            *self.flags,
            *extra,
        ]  # fmt: skip
        process = self.ctx.Process(target=kill_worker.run_worker, args=(argv,))
        process.start()
        return process

    def run(
        self,
        kill: str,
        *,
        phase: str = "run",
        resumers: int = 1,
        off: str = "",
        reconcile: bool = True,
        barrier: bool = False,
        staggered: bool = False,
        first_only: tuple[str, ...] = (),
    ) -> Cell:
        """Kill the worker of `phase` (`run`: the first; `resume`: the first resumer after a
        person decided) at `kill`, then resume until the run ends, and judge.

        `resumers` start together on the first resume (after each has read the stored run,
        with `barrier`; the first paused inside `pay` when the next looks, with `staggered`).
        """
        self.counter += 1
        cell_dir = self.root / f"cell{self.counter}"
        cell_dir.mkdir()
        cell = Cell(scenario=self.scenario, kill=kill if phase == "run" else f"{phase}:{kill}")
        run = _Run(cell_dir)
        flags = [f"--off={off}"] if off else []
        if not reconcile:
            flags.append("--no-reconcile")
        kills_left, mode = 1, "run"
        while len(cell.rounds) < self.max_rounds:
            armed = kills_left > 0 and (mode == "run" if phase == "run" else run.decided)
            kills_left -= 1 if armed else 0
            many = resumers if mode == "resume" and len(cell.rounds) == 1 else 1
            extra = [*flags, *([f"--kill={kill}"] if armed else [])]
            if mode == "run":
                extra += [f"--saved={cell_dir / 'saved'}", *first_only]
            if many > 1 and barrier:
                extra.append(f"--barrier={many}")
            run.finished_before.append(run.finished)
            codes = self._round(cell, run, mode, many, extra, staggered=staggered and many > 1)
            if mode == "run":
                self._check_committed(cell, run)
            if not self._go_on(cell, run, codes, mode):
                break
            mode = "resume"
        self._judge(cell, run)
        return cell

    def _round(
        self, cell: Cell, run: _Run, mode: str, many: int, extra: list[str], *, staggered: bool
    ) -> list[int | None]:
        """Start `many` workers together, wait for them (deciding meanwhile), keep what they
        left: exit codes, stats, the stored journal when one was killed."""
        cell_dir = run.cell_dir
        started: list[tuple[Any, Path]] = []
        for index in range(many):
            stats = cell_dir / f"stats{len(cell.exits) + index}"
            pause = ["--kill=pause:pay:before"] if staggered and index == 0 else []
            started.append((self._start(cell_dir, mode, f"--stats={stats}", *extra, *pause), stats))
            if staggered and index == 0:
                started[0][0].join(0.6)  # the first is live (inside `pay`) when the next looks
        for process, _ in started:
            self._attend(process, cell_dir, cell)
        codes: list[int | None] = [p.exitcode for p, _ in started]
        cell.rounds.append(list(range(len(cell.exits), len(cell.exits) + many)))
        cell.exits += codes
        cell.stats += [json.loads(s.read_text()) if s.exists() else {} for _, s in started]
        id_file = cell_dir / "run_id"
        if not id_file.exists():  # killed inside `agent.start`, before it returned the id
            id_file.write_text("never-started")
        found = self._load(cell_dir, [_run_id(cell_dir)]).get(_run_id(cell_dir))
        if -9 in codes and found is not None:
            run.prefixes.append(found)
        run.finished = found is not None and isinstance(found.events[-1], RunFinished)
        return codes

    def _go_on(self, cell: Cell, run: _Run, codes: list[int | None], mode: str) -> bool:
        """Whether the run needs another round; a person decides a parked run first."""
        if mode == "run" and codes == [0]:
            return self.always_resume
        if any(c in (0, 4) for c in codes):  # finished (4: it had, or it was never stored)
            return False
        if 6 in codes:
            if not run.decided and (early := _effects(run.cell_dir / "effects")):
                cell.violations.append(f"{', '.join(sorted(early))} ran before the decision")
            asyncio.run(_decide(self.store_arg(run.cell_dir)))
            run.decided = True
            return True
        failed = [c for c in codes if c not in (-9, 3)]
        if failed:
            cell.violations.append(f"a worker failed with exit code {failed[0]}")
            return False
        return True

    def _attend(self, process: Any, cell_dir: Path, cell: Cell) -> None:
        """Wait for the process; meanwhile CLI deciders decide its parked requests."""
        decided: set[str] = set()
        id_file = cell_dir / "run_id"
        db = cell_dir / "runs.db"
        deadline = time.monotonic() + 120
        while process.is_alive() and time.monotonic() < deadline:
            if self.deciders and id_file.exists() and db.exists():
                for request_id in _parked(db) - decided:
                    decided.add(request_id)
                    cell.deciders += _race(db, request_id, self.deciders)
            process.join(0.05)
        process.join(5)
        if process.exitcode is None:
            process.kill()
            process.join()

    def _check_committed(self, cell: Cell, run: _Run) -> None:
        """Every event the first worker's recorder had committed is in the store."""
        saved_file = run.cell_dir / "saved"
        saved: dict[str, int] = json.loads(saved_file.read_text()) if saved_file.exists() else {}
        stored = self._load(run.cell_dir, sorted(saved))
        for member, count in saved.items():
            kept = len(stored[member]) if member in stored else 0
            if kept < count:
                cell.violations.append(f"committed events lost ({count} committed, {kept} kept)")

    # -- the judge -------------------------------------------------------------------------------

    def _judge(self, cell: Cell, run: _Run) -> None:
        v = cell.violations
        log = run.cell_dir / "effects"
        effects: dict[str, list[str]] = collections.defaultdict(list)
        for line in log.read_text().splitlines() if log.exists() else []:
            name, key = line.split(" ", 1)
            effects[name].append(key)
        cell.effects = dict(effects)
        run_id = _run_id(run.cell_dir)
        final = self._load(run.cell_dir, [run_id]).get(run_id)
        v.extend(self._judge_rounds(cell, run, stored=final is not None))
        if final is None:  # never stored: nothing may have happened
            if cell.effects:
                v.append(f"effects without a stored run: {sorted(cell.effects)}")
            return
        approved = self._judge_deciders(cell, final)
        want = expected(self.scenario) if approved else MATRIX_REJECTED
        for name, (least, most) in want.items():
            ran = len(cell.effects.get(name, []))
            if not least <= ran <= most:
                v.append(f"{name} ran {ran} times, not {least if ran < least else most}")
        if len(set(cell.effects.get("put", []))) > 1:
            v.append("put applied under two keys")
        last = final.events[-1]
        if not isinstance(last, RunFinished):
            v.append(f"the run did not finish ({last.kind})")
            return
        cell.answer = str(last.output)
        if self.answer is not None and cell.answer != self.answer:
            v.append(f"the answer changed: {cell.answer!r}")
        if any(list(final.events[: len(p)]) != list(p.events) for p in run.prefixes):
            v.append("the stored prefix changed")
        v.extend(_pairing(final))
        children = {e.lineage.run_id for e in final if isinstance(e, SpawnStarted)}
        for journal in (final, *self._load(run.cell_dir, sorted(children)).values()):
            v.extend(_refused_then_admitted(journal))

    def _judge_rounds(self, cell: Cell, run: _Run, *, stored: bool) -> list[str]:
        """Of resumers started together exactly one goes on (none for a finished run or one
        never stored); the others run nothing."""
        found: list[str] = []
        for index, members in enumerate(cell.rounds[1:], start=1):
            codes = [cell.exits[i] for i in members]
            went_on = [c for c in codes if c in (0, 6, -9)]
            if not stored and any(c != 4 for c in codes):
                found.append(f"resumers of an unstored run exited {codes}")
            elif run.finished_before[index] and went_on:
                found.append("a finished run was resumed")
            elif stored and not run.finished_before[index] and len(went_on) != 1:
                found.append(f"resumer exits {codes}: not exactly one went on")
            losers = [cell.stats[i] for i in members if cell.exits[i] not in (0, 6, -9)]
            if any(s.get("requests", 0) + s.get("tools", 0) > 0 for s in losers):
                found.append("a losing resumer ran something")
            if any(c not in (0, 3, 4, 6, -9) for c in codes):
                found.append(f"a resumer failed: {codes}")
        return found

    def _judge_deciders(self, cell: Cell, final: Journal) -> bool:
        """With CLI deciders: one was told yes and the journal follows it. Whether approved."""
        if not self.deciders:
            return True
        winners = [verb for verb, code in cell.deciders if code == 0]
        if cell.deciders and len(winners) != 1:
            cell.violations.append(f"{len(winners)} of {len(cell.deciders)} deciders were told yes")
        verdicts = [e.verdict for e in final if isinstance(e, ApprovalDecided)]
        if winners and verdicts != winners[-1:]:
            cell.violations.append(f"the journal says {verdicts}, the deciders were told {winners}")
        return verdicts == ["approve"]

    def baseline(self) -> tuple[int, int]:
        """Run the scenario uninterrupted: keep its answer; the events its first and its last
        worker recorded (the same worker, unless the run parked)."""
        cell = self.run("none")
        assert cell.violations == [] and cell.answer is not None, cell
        self.answer = cell.answer
        counts = [s["events"] for s in cell.stats if s]
        return counts[0], counts[-1]


def _run_id(cell_dir: Path) -> str:
    path = cell_dir / "run_id"
    return path.read_text().strip() if path.exists() else "never-started"


def _effects(log: Path) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for line in log.read_text().splitlines() if log.exists() else []:
        counts[line.split(" ", 1)[0]] += 1
    return dict(counts)


async def _decide(target: str) -> None:
    """A person answers every open request from this process: reject `wire`, approve others."""
    store: Any = (
        PostgresStore(target) if target.startswith("postgresql://") else SQLiteStore(target)
    )
    approvals: Any = (
        PostgresApprovalStore(store)
        if isinstance(store, PostgresStore)
        else SQLiteApprovalStore(store)
    )
    try:
        for request in await approvals.pending():
            decision = (
                Reject(message=kill_worker.REJECTION) if request.tool == "wire" else Approve()
            )
            await approvals.decide(request.id, request.token, decision)
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


def report(label: str, cells: list[Cell]) -> collections.Counter[str]:
    """Print the cells' counts (docs/durability.md records them) and their violations."""
    violations: collections.Counter[str] = collections.Counter()
    for cell in cells:
        for item in cell.violations:
            violations[item.split(" (", 1)[0]] += 1
    killed = sum(1 for c in cells if -9 in c.exits)
    print(f"\n{label}: {len(cells)} cells, {killed} kills; violations {dict(violations) or 0}")
    return violations
