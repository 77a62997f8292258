"""Approvals on Temporal: a parked run waits on a condition; decisions arrive as updates.

Of 16 concurrent decisions exactly one gets in (the validator, and the handler recording
before any await); without the validator more do. A request nobody decides expires after
its ttl (24 h, under time skipping) and the call is rejected with the reason.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporal_agents import activity_types, approving, open_request
from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from legato.effects import unsafe_switches
from legato.events import ApprovalDecided, RunFinished, ToolCallFinished
from legato.exceptions import DecisionAlreadyUsed, DecisionTokenInvalid
from legato.store import SQLiteStore
from legato.temporal import (
    DecisionInput,
    LegatoActivities,
    LegatoRun,
    RunInput,
    RunOutcome,
    TemporalRuns,
    legato_worker,
)


@workflow.defn(name="legato.run.unvalidated", sandboxed=False)
class Unvalidated(LegatoRun):
    """The twin: the run workflow with its decision validator switched off."""

    @workflow.run
    async def run(self, run: RunInput) -> RunOutcome:
        return await super().run(run)

    def _admit(self, decision: DecisionInput) -> None:
        return None


async def race(address: str, run_id: str, request_id: str, queue: str) -> list[str]:
    """16 clients, each on its own connection, approve the same request at once."""

    async def one(index: int) -> str:
        runs = TemporalRuns(await Client.connect(address), task_queue=queue)
        try:
            await runs.decide(run_id, request_id, "approve")
        except DecisionAlreadyUsed:
            return "already decided"
        except DecisionTokenInvalid:
            return "run ended"  # the accepted decision let the run finish first
        return "accepted"

    return list(await asyncio.gather(*(one(i) for i in range(16))))


async def test_sixteen_concurrent_decisions_exactly_one_is_accepted(
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
        with pytest.raises(DecisionTokenInvalid):
            await runs.decide(run_id, "apr_unknown", "approve")  # a request it does not wait on
        verdicts = await race(temporal_address, run_id, request_id, queue)
        outcome = await runs.result(run_id)
        with pytest.raises(DecisionTokenInvalid):  # the run has ended
            await runs.decide(run_id, request_id, "approve")

    assert verdicts.count("accepted") == 1 and "already decided" in verdicts
    assert outcome.status == "finished" and shipped == ["A1"]
    events = list(SQLiteStore(tmp_path / "runs.db").load_run(run_id).events)
    assert len([e for e in events if isinstance(e, ApprovalDecided)]) == 1


async def test_twin_without_the_validator_more_than_one_decision_gets_in(
    temporal_address: str, tmp_path: Path
) -> None:
    agent = approving(tmp_path / "runs.db", [])
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[Unvalidated],
        activities=LegatoActivities({"shipper": agent}).all(),
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    # the store's conditional write (`decide_once`) would still let only one in: off too
    with unsafe_switches(decide_once=False):
        verdicts = await _race_unvalidated(temporal_address, client, worker, queue)
    assert verdicts.count("accepted") > 1


async def _race_unvalidated(address: str, client: Client, worker: Worker, queue: str) -> list[str]:
    async with worker:
        runs = TemporalRuns(client, task_queue=queue)
        run_id = uuid.uuid4().hex
        run = RunInput(run_id=run_id, agent="shipper", prompt="Ship A1")
        await client.start_workflow("legato.run.unvalidated", run, id=run_id, task_queue=queue)
        request_id = await open_request(runs, run_id)
        verdicts = await race(address, run_id, request_id, queue)
        await client.get_workflow_handle(run_id).result()
    return verdicts


async def test_an_undecided_request_expires_after_24_hours_and_the_call_is_rejected(
    tmp_path: Path,
) -> None:
    server = Path(sys.executable).parent / "temporal-test-server"
    if not server.exists():
        pytest.skip("temporal-test-server is not installed (the `dev` extra installs it)")
    shipped: list[str] = []
    agent = approving(tmp_path / "runs.db", shipped, ttl=24 * 3600)
    env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=str(server))
    try:
        queue = f"q-{uuid.uuid4().hex}"
        async with legato_worker(env.client, task_queue=queue, agents={"shipper": agent}):
            runs = TemporalRuns(env.client, task_queue=queue)
            run_id = await runs.start("shipper", "Ship A1")
            await open_request(runs, run_id)  # parked, its 24 h timer started
            before = await env.get_current_time()
            await env.sleep(25 * 3600)  # the workflow clock moves 25 h, in no wall time
            outcome = await runs.result(run_id)
            assert (await env.get_current_time() - before).total_seconds() >= 24 * 3600
    finally:
        await env.shutdown()
    assert outcome.status == "finished" and shipped == []
    events: list[Any] = list(SQLiteStore(tmp_path / "runs.db").load_run(run_id).events)
    decided = [e for e in events if isinstance(e, ApprovalDecided)]
    assert [d.verdict for d in decided] == ["reject"]
    assert "expired: no decision within 86400 seconds" in (decided[0].message or "")
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished[0].outcome == "refused" and "expired" in finished[0].result.text
    assert isinstance(events[-1], RunFinished)


async def test_an_ask_on_a_local_tool_call_parks_and_the_decision_runs_it_once(
    temporal_address: str, tmp_path: Path
) -> None:
    # an idempotent tool's call runs as a local activity: it parks the run from inside the
    # worker's workflow task, and the decision's regular activities resume it
    shipped: list[str] = []
    agent = approving(tmp_path / "runs.db", shipped, side_effects="idempotent")
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"shipper": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("shipper", "Ship A1")
        request_id = await open_request(runs, run_id)
        assert shipped == []
        await runs.decide(run_id, request_id, "approve")
        outcome = await runs.result(run_id)
        history = await runs.handle(run_id).fetch_history()
    assert outcome.status == "finished"
    assert shipped == ["A1"]
    local = activity_types(history, only="local")
    assert local.count("legato.tool") == 2  # parked, then run after the decision
    regular = activity_types(history, only="regular")
    assert "legato.record" in regular and "legato.decide" in regular
