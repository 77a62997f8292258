"""A worker's cached journal is used only while it is the stored one."""

from __future__ import annotations

from pathlib import Path

from temporal_agents import adder
from temporalio.testing import ActivityEnvironment

from legato.store import SQLiteStore
from legato.temporal import LegatoActivities, journal_digest
from legato.temporal._types import StartInput, UnitInput


async def test_a_worker_whose_cache_is_stale_reloads_the_run_and_the_journal_stays_one(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    first = LegatoActivities({"adder": adder(db)})
    second = LegatoActivities({"adder": adder(db)})
    env = ActivityEnvironment()
    plan = await env.run(first.start, StartInput(run_id="r1", agent="adder", prompt="2 + 3?"))
    plan = await env.run(first.model, UnitInput(plan=plan))  # `first` caches the journal
    assert plan.kind == "tool"
    plan = await env.run(second.tool, UnitInput(plan=plan))  # another worker goes on
    # `first` gets the next unit: its cached journal is behind the store, so it reloads
    # (with the stale copy its claim would take a stored position: JournalConflict)
    plan = await env.run(first.model, UnitInput(plan=plan))
    plan = await env.run(first.close, UnitInput(plan=plan))
    assert plan.kind == "done" and plan.status == "finished"
    events = list(SQLiteStore(db).load_run("r1").events)
    assert plan.ref.offset == len(events)
    assert plan.ref.digest == journal_digest(events)  # the chain over the stored journal
