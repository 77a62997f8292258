"""One decision per request on a run driven by Temporal, whichever door it comes through.

The doors: `legato runs approve|reject RUN --store DB` (the approvals store's conditional
write) and `legato runs approve|reject RUN --temporal ADDRESS` (the workflow's update). The
update writes its decision to the store through the same conditional write before it
returns, so the door that comes second gets `DecisionAlreadyUsed` and exit code 1, and the
run follows the first. The twin (`decide_once` off) is the old behaviour: both doors exit 0
and the run follows the store's decision while the workflow's was reported accepted.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import typer
from temporal_agents import approving, open_request
from temporalio.client import Client
from typer.testing import CliRunner

from legato.effects import unsafe_switches
from legato.events import ApprovalDecided
from legato.store import SQLiteStore
from legato.temporal import TemporalRuns, legato_worker
from legato.temporal._types import ActivitySettings

runner = CliRunner()
FAST = ActivitySettings(decision_poll=0.2, decision_poll_max=0.5)
SLOW = ActivitySettings(decision_poll=3600.0)  # the workflow never reads the store by itself


async def _two_doors(
    address: str,
    db: Path,
    first: list[str],
    second: list[str],
    settings: ActivitySettings = FAST,
) -> tuple[int, int, str, list[str], list[tuple[str, str]]]:
    """Decide one parked request through two doors.

    Returns the exit codes, the second door's output, what shipped, the journal's decisions.
    """
    shipped: list[str] = []
    agent = approving(db, shipped)
    client = await Client.connect(address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"shipper": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("shipper", "Ship A1", settings=settings)
        await open_request(runs, run_id)
        one = await asyncio.to_thread(runner.invoke, _app(), [*first[:2], run_id, *first[2:]])
        two = await asyncio.to_thread(runner.invoke, _app(), [*second[:2], run_id, *second[2:]])
        await runs.result(run_id)
    events = list(SQLiteStore(db).load_run(run_id).events)
    decided = [(e.verdict, e.message) for e in events if isinstance(e, ApprovalDecided)]
    return one.exit_code, two.exit_code, two.output, shipped, decided


def _app() -> typer.Typer:
    from legato.cli._app import app

    return app


async def test_the_store_door_first_then_the_temporal_door_is_refused(
    temporal_address: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    store_door = ["runs", "approve", "--store", str(db)]
    temporal_door = ["runs", "reject", "--temporal", temporal_address, "--message", "no"]
    one, two, output, shipped, decided = await _two_doors(
        temporal_address, db, store_door, temporal_door
    )
    assert (one, two) == (0, 1), output
    assert "already decided" in output
    assert shipped == ["A1"]  # the run follows the one decision, the first
    assert [v for v, _ in decided] == ["approve"]


async def test_the_temporal_door_first_then_the_store_door_is_refused(
    temporal_address: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    temporal_door = ["runs", "reject", "--temporal", temporal_address, "--message", "no"]
    store_door = ["runs", "approve", "--store", str(db)]
    one, two, output, shipped, decided = await _two_doors(
        temporal_address, db, temporal_door, store_door
    )
    assert (one, two) == (0, 1), output
    assert shipped == []
    assert decided == [("reject", "no")]


async def test_twin_without_the_store_write_both_doors_say_yes(
    temporal_address: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    store_door = ["runs", "approve", "--store", str(db)]
    temporal_door = ["runs", "reject", "--temporal", temporal_address, "--message", "no"]
    with unsafe_switches(decide_once=False):
        one, two, output, shipped, decided = await _two_doors(
            temporal_address, db, store_door, temporal_door, SLOW
        )
    # the violation: the rejection was reported accepted, and the tool ran anyway
    assert (one, two) == (0, 0), output
    assert shipped == ["A1"]
    assert [v for v, _ in decided] == ["approve"]


async def test_a_decision_through_the_store_alone_moves_the_workflow_on(
    temporal_address: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    shipped: list[str] = []
    agent = approving(db, shipped)
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"shipper": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("shipper", "Ship A1", settings=FAST)
        await open_request(runs, run_id)
        args = ["runs", "approve", run_id, "--store", str(db)]
        done = await asyncio.to_thread(runner.invoke, _app(), args)
        assert done.exit_code == 0, done.output
        outcome = await asyncio.wait_for(runs.result(run_id), timeout=120)
    assert outcome.status == "finished"
    assert shipped == ["A1"]
