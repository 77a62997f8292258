"""A legato run on Temporal: it completes, and its journal is the in-process run's."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporal_agents import adder, shape
from temporalio.client import Client

from legato.events import RunFinished
from legato.store import SQLiteStore
from legato.temporal import TemporalRuns, legato_worker


async def test_a_scripted_run_completes_with_the_in_process_journal(
    temporal_address: str, tmp_path: Path
) -> None:
    in_process = adder(tmp_path / "local.db")
    expected = await in_process.run("What is 2 + 3?")

    agent = adder(tmp_path / "temporal.db")
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"adder": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("adder", "What is 2 + 3?")
        outcome = await runs.result(run_id)

    assert outcome.status == "finished"
    stored = list(SQLiteStore(tmp_path / "temporal.db").load_run(run_id).events)
    assert outcome.ref.offset == len(stored)
    assert shape(stored) == shape(list(expected.journal.events))
    final = stored[-1]
    assert isinstance(final, RunFinished) and final.output == "It is 5."
    assert SQLiteStore(tmp_path / "temporal.db").run_info(run_id).status == "finished"  # type: ignore[union-attr]


async def test_watching_a_run_yields_its_stored_events_once_each_in_order(
    temporal_address: str, tmp_path: Path
) -> None:
    agent = adder(tmp_path / "runs.db")
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"adder": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("adder", "What is 2 + 3?")
        store = SQLiteStore(tmp_path / "runs.db")
        watched = [e async for e in runs.watch(store, run_id, poll=0.02)]
        await runs.result(run_id)
    assert watched == list(store.load_run(run_id).events)
    assert isinstance(watched[-1], RunFinished)
