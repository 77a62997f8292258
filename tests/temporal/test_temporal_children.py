"""A sub-agent that parks parks its parent's workflow; a decision resumes the tree."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporal_agents import delegating, open_request
from temporalio.client import Client

from legato.events import ApprovalDecided, RunFinished, SpawnFinished
from legato.store import SQLiteStore
from legato.temporal import TemporalRuns, legato_worker


async def test_a_parked_child_parks_the_parent_and_a_decision_resumes_both(
    temporal_address: str, tmp_path: Path
) -> None:
    shipped: list[str] = []
    agent = delegating(tmp_path / "runs.db", shipped)
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"parent": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("parent", "Ship A1 through the shipping agent")
        request_id = await open_request(runs, run_id)
        assert shipped == []  # parked: nothing ran
        await runs.decide(run_id, request_id, "approve")
        outcome = await runs.result(run_id)
    assert outcome.status == "finished" and shipped == ["A1"]
    store = SQLiteStore(tmp_path / "runs.db")
    parent = list(store.load_run(run_id).events)
    assert isinstance(parent[-1], RunFinished) and parent[-1].output == "All done."
    spawned = [e for e in parent if isinstance(e, SpawnFinished)]
    assert len(spawned) == 1
    child = list(store.load_run(spawned[0].lineage.run_id).events)
    assert [e.verdict for e in child if isinstance(e, ApprovalDecided)] == ["approve"]
    assert isinstance(child[-1], RunFinished)
