"""`legato runs approve/reject --temporal ADDRESS` decides a run on Temporal (an update)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporal_agents import approving, open_request
from temporalio.client import Client
from typer.testing import CliRunner

from legato.cli._app import app
from legato.events import ApprovalDecided
from legato.store import SQLiteStore
from legato.temporal import TemporalRuns, legato_worker

runner = CliRunner()


async def test_the_terminal_rejects_a_run_on_temporal_and_the_model_is_told(
    temporal_address: str, tmp_path: Path
) -> None:
    shipped: list[str] = []
    agent = approving(tmp_path / "runs.db", shipped)
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"shipper": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("shipper", "Ship A1")
        request_id = await open_request(runs, run_id)
        args = ["runs", "reject", run_id, "--temporal", temporal_address, "--message", "not now"]
        done = await asyncio.to_thread(runner.invoke, app, args)
        assert done.exit_code == 0, done.output
        assert f"reject: {request_id}" in done.output
        await runs.result(run_id)
        again = await asyncio.to_thread(runner.invoke, app, args)  # the run has ended
        assert again.exit_code == 1 and "nothing to decide" in again.output
        unknown = ["runs", "approve", "no-such-run", "--temporal", temporal_address]
        missing = await asyncio.to_thread(runner.invoke, app, unknown)
        assert missing.exit_code == 1 and "error" in missing.output
    assert shipped == []
    events = list(SQLiteStore(tmp_path / "runs.db").load_run(run_id).events)
    decided = [e for e in events if isinstance(e, ApprovalDecided)]
    assert [(d.verdict, d.message) for d in decided] == [("reject", "not now")]
