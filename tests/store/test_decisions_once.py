"""One decision per request, across processes, and bad decisions refused with nothing done.

Several `legato runs approve|reject` processes decide one parked request at once, on SQLite
and on PostgreSQL: the store's conditional write lets exactly one in; the others exit 1
with `DecisionAlreadyUsed`, and the resumed run follows the one decision. The twin decides
with a plain write (no "still undecided" condition): more than one door says yes.

Bad input is a typed error and changes nothing: a decision for a run that has ended, an
unknown run, a run of another store, a store file that is not legato's or that another
program keeps locked.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from legato import Agent, tool
from legato.approvals import (
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    PostgresApprovalStore,
    Rule,
    SQLiteApprovalStore,
)
from legato.cli._app import app
from legato.events import ApprovalDecided, RunFailed
from legato.exceptions import (
    DecisionTokenInvalid,
    RunParked,
    StoreCorrupted,
    StoreLocked,
)
from legato.store import PostgresStore, SQLiteStore
from legato.testing import ScriptedModel, ScriptedTurn, call, reply
from pg_cluster import AnyStore

DECIDER = Path(__file__).with_name("cli_decider.py")
SRC = Path(__file__).resolve().parents[2] / "src"
runner = CliRunner()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store's `--store` value: a SQLite file, or a fresh PostgreSQL database's DSN."""
    if request.param == "sqlite":
        yield str(tmp_path / "runs.db")
    else:
        yield request.getfixturevalue("pg_dsn")


def _open(target: str) -> AnyStore:
    return PostgresStore(target) if target.startswith("postgresql://") else SQLiteStore(target)


def _agent(store: AnyStore, shipped: list[str], turns: list[ScriptedTurn]) -> Agent[str]:
    @tool(side_effects="irreversible")
    def ship(order: str) -> str:
        """Ship an order.

        Args:
            order: Which order.
        """
        shipped.append(order)
        return f"shipped {order}"

    approvals: Any = (
        SQLiteApprovalStore(store)
        if isinstance(store, SQLiteStore)
        else PostgresApprovalStore(store)
    )
    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=approvals)
    return Agent(ScriptedModel(turns), tools=[ship], approvals=policy, store=store, name="s")


def _park(store: AnyStore) -> tuple[str, ApprovalRequest]:
    with pytest.raises(RunParked) as parked:
        _agent(store, [], [reply(call("ship", {"order": "A1"}))]).run_sync("ship A1")
    return parked.value.parked.run_id, parked.value.parked.requests[0]


def _race(target: str, request_id: str, mode: str) -> list[tuple[str, int, str]]:
    """Four CLI processes (two approve, two reject) decide one request at once."""
    verbs = ["approve", "reject", "approve", "reject"]
    procs = [
        subprocess.Popen(
            [sys.executable, str(DECIDER), mode, "runs", verb, request_id, "--store", target],
            env=_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for verb in verbs
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:  # all loaded: let them go together
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results: list[tuple[str, int, str]] = []
    for verb, proc in zip(verbs, procs, strict=True):
        output, _ = proc.communicate(timeout=120)
        results.append((verb, proc.returncode, output))
    return results


def test_racing_deciders_in_separate_processes_one_gets_in(target: str) -> None:
    store = _open(target)
    run_id, request = _park(store)
    results = _race(target, request.id, "safe")
    winners = [verb for verb, code, _ in results if code == 0]
    losers = [output for _, code, output in results if code != 0]
    print(f"\nsafe: {len(winners)} accepted, {len(losers)} refused")
    assert len(winners) == 1
    assert all("already decided" in output for output in losers), losers
    shipped: list[str] = []
    _agent(store, shipped, ["Done."]).resume_sync(run_id)
    decided = [e for e in store.load_run(run_id) if isinstance(e, ApprovalDecided)]
    assert [d.verdict for d in decided] == winners  # the run follows the one decision
    assert shipped == (["A1"] if winners == ["approve"] else [])
    store.close()


def test_twin_deciders_without_the_condition_all_say_yes(target: str) -> None:
    store = _open(target)
    _, request = _park(store)
    results = _race(target, request.id, "unconditional")
    accepted = [verb for verb, code, _ in results if code == 0]
    print(f"\ntwin (plain write): {len(accepted)} accepted")
    assert len(accepted) > 1  # the violation: more than one door was told yes
    store.close()


# -- bad input --------------------------------------------------------------------------------


def _fail_run(store: AnyStore, run_id: str) -> None:
    """The run ends (its process failed) while its request is still undecided."""
    journal = store.load_run(run_id)
    failed = RunFailed(error_type="RuntimeError", message="the worker failed")
    store.append_events(run_id, [failed], start=len(journal))


def test_a_decision_for_a_run_that_ended_is_refused_and_changes_nothing(target: str) -> None:
    store = _open(target)
    run_id, request = _park(store)
    _fail_run(store, run_id)
    approvals: Any = (
        SQLiteApprovalStore(store)
        if isinstance(store, SQLiteStore)
        else PostgresApprovalStore(store)
    )
    with pytest.raises(DecisionTokenInvalid, match="has ended"):
        asyncio.run(approvals.decide(request.id, request.token, Approve()))
    for what in (request.id, run_id):  # by request id, and by run id
        done = runner.invoke(app, ["runs", "approve", what, "--store", target])
        assert done.exit_code == 1, done.output
        assert "has ended" in done.output
    record = store.approval(request.id)
    assert record is not None and record.state == "parked" and record.decision is None
    store.close()


def test_a_decision_for_a_finished_run_exits_1_and_runs_nothing(target: str) -> None:
    store = _open(target)
    shipped: list[str] = []
    run_id, request = _park(store)
    asyncio.run(_approvals_of(store).decide(request.id, request.token, Approve()))
    _agent(store, shipped, ["Done."]).resume_sync(run_id)
    assert shipped == ["A1"]
    before = list(store.load_run(run_id))
    for verb, what in (("reject", run_id), ("reject", request.id), ("approve", request.id)):
        done = runner.invoke(app, ["runs", verb, what, "--store", target])
        assert done.exit_code == 1, done.output
    assert list(store.load_run(run_id)) == before and shipped == ["A1"]
    store.close()


def test_an_unknown_or_foreign_run_is_refused(target: str, tmp_path: Path) -> None:
    store = _open(target)
    other = SQLiteStore(tmp_path / "other.db")  # a run of another store
    foreign_id, _ = _park(other)
    for what in ("no-such-run", foreign_id):
        done = runner.invoke(app, ["runs", "approve", what, "--store", target])
        assert done.exit_code == 1
        assert "no stored run" in done.output or "neither" in done.output, done.output
    assert other.approvals()[0].state == "parked"  # the other store is untouched
    other.close()
    store.close()


def _approvals_of(store: AnyStore) -> Any:
    if isinstance(store, SQLiteStore):
        return SQLiteApprovalStore(store)
    return PostgresApprovalStore(store)


def test_a_store_file_that_is_not_legatos_is_refused_untouched(tmp_path: Path) -> None:
    foreign = tmp_path / "invoices.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE invoices(id INTEGER)")
    conn.commit()
    conn.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    before = {p: p.read_bytes() for p in (foreign, text)}
    for path in (foreign, text):
        for args in (["runs", "approve", "r1"], ["runs", "list"], ["runs", "show", "r1"]):
            done = runner.invoke(app, [*args, "--store", str(path)])
            assert done.exit_code == 1, done.output
            assert "error" in done.output
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["invoices.db", "notes.txt"]


def test_a_decision_on_a_file_another_program_locks_is_a_typed_error(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteStore(db, timeout=0.2)
    _, request = _park(store)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "c.execute('UPDATE runs SET agent = agent')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.readline()\n"
            "c.execute('ROLLBACK')\n",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLocked):
            asyncio.run(SQLiteApprovalStore(store).decide(request.id, request.token, Approve()))
    finally:
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=60)
        holder.stdout.close()
    record = store.approval(request.id)
    assert record is not None and record.state == "parked"  # nothing half-written
    store.close()


def test_a_foreign_file_through_the_python_api_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    path.write_bytes(b"\x00" * 50)
    with pytest.raises(StoreCorrupted):
        SQLiteApprovalStore(path)
    assert path.read_bytes() == b"\x00" * 50
