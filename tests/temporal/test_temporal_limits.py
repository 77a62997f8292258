"""Only references travel: a 3 MB tool result completes with a small history; a 200-step
run continues as new and keeps one contiguous journal; bad input is a typed error."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from legato import Agent, tool
from legato.events import ModelResponded, RunFinished, RunStarted, ToolCallFinished
from legato.exceptions import DurableRunFailed, EngineInputInvalid
from legato.models import ModelRequest
from legato.store import SQLiteStore
from legato.temporal import (
    MAX_PROMPT_BYTES,
    ActivitySettings,
    LegatoActivities,
    LegatoRun,
    LocalResultLimit,
    Plan,
    RunRef,
    TemporalRuns,
    legato_worker,
)
from legato.temporal._types import StartInput
from legato.testing import FunctionModel, ScriptedModel, call, reply

BIG = 3 * 1024 * 1024


@tool
def dump() -> str:
    """Return a large text."""
    return "x" * BIG


@tool
def tick(n: int) -> int:
    """Count.

    Args:
        n: The step.
    """
    return n


def counter(steps: int) -> FunctionModel:
    """Calls `tick` until `steps` model calls were made, then answers."""

    def answer(request: ModelRequest) -> Any:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done + 1 >= steps:
            return "Counted."
        return reply(call("tick", {"n": done + 1}, id=f"t{done + 1}"))

    return FunctionModel(answer)


async def test_a_3mb_tool_result_completes_and_the_history_stays_small(
    temporal_address: str, tmp_path: Path
) -> None:
    model = ScriptedModel([reply(call("dump", {}, id="d1")), "Done."])
    agent = Agent(model, tools=[dump], store=SQLiteStore(tmp_path / "runs.db"))
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"dumper": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("dumper", "Dump it")
        outcome = await runs.result(run_id)
        history = await runs.handle(run_id).fetch_history()
    assert outcome.status == "finished"
    events = list(SQLiteStore(tmp_path / "runs.db").load_run(run_id).events)
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert len(finished.result.text) == BIG  # the whole result is in the store
    largest = max(event.ByteSize() for event in history.events)
    assert largest < 256 * 1024
    print(f"3 MiB result: largest history event {largest} B, history {len(history.events)} events")


async def test_a_200_step_run_continues_as_new_with_one_contiguous_journal(
    temporal_address: str, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent = Agent(counter(200), tools=[tick], store=store, max_steps=250)
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"counter": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("counter", "Count to 200", continue_every=100)
        outcome = await runs.result(run_id)
        history = await runs.handle(run_id).fetch_history()  # the last workflow run's
    assert outcome.status == "finished" and outcome.units >= 399
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.continued_execution_run_id  # this run continued an earlier one
    assert len(history.events) < 1000
    events = list(store.load_run(run_id).events)
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunFinished)
    assert sum(isinstance(e, RunStarted) for e in events) == 1
    steps = [e.step for e in events if isinstance(e, ModelResponded)]
    assert steps == list(range(1, 201))  # every step once, in order, in one journal
    assert outcome.ref.offset == len(events)


async def test_an_oversized_prompt_is_refused_before_anything_starts(
    temporal_address: str,
) -> None:
    runs = TemporalRuns(await Client.connect(temporal_address), task_queue="unused")
    with pytest.raises(EngineInputInvalid, match="bytes"):
        await runs.start("any", "x" * (MAX_PROMPT_BYTES + 1))


def test_an_agent_without_a_store_is_refused_by_the_worker() -> None:
    agent = Agent(ScriptedModel(["hi"]), tools=[tick])
    with pytest.raises(EngineInputInvalid, match="no store"):
        LegatoActivities({"nostore": agent})


async def test_an_unknown_agent_or_a_run_limit_fails_the_workflow_with_its_type(
    temporal_address: str, tmp_path: Path
) -> None:
    agent = Agent(counter(10), tools=[tick], store=SQLiteStore(tmp_path / "runs.db"), max_steps=2)
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"counter": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        unknown = await runs.start("nobody", "Hello")
        with pytest.raises(DurableRunFailed) as failed:
            await runs.result(unknown)
        assert failed.value.error_type == "EngineInputInvalid"
        limited = await runs.start("counter", "Count")
        with pytest.raises(DurableRunFailed) as failed:
            await runs.result(limited)
        assert failed.value.error_type == "MaxStepsExceeded"  # not retried: one attempt
    info = SQLiteStore(tmp_path / "runs.db").run_info(limited)
    assert info is not None and info.status == "failed"


async def test_a_tool_list_changed_while_a_run_is_in_flight_fails_it_with_a_typed_error(
    temporal_address: str, tmp_path: Path
) -> None:
    from temporal_agents import approving, open_request

    from legato.tools import Toolset

    agent = approving(tmp_path / "runs.db", [])
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"shipper": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("shipper", "Ship A1")
        request_id = await open_request(runs, run_id)
        agent.tool_sources.append(Toolset([tick], name="added"))  # a redeploy with a new tool
        await runs.decide(run_id, request_id, "approve")
        with pytest.raises(DurableRunFailed) as failed:
            await runs.result(run_id)
    assert failed.value.error_type == "EngineInputInvalid"
    assert "changed while run" in str(failed.value)


attempts: list[int] = []
third_attempt: list[asyncio.Event] = []  # set once the body has run three times


@activity.defn(name="legato.start")
async def oversized(start: StartInput) -> Plan:
    """A stand-in `legato.start` whose result is over Temporal's payload limit."""
    attempts.append(activity.info().attempt)
    if len(attempts) >= 3:
        for event in third_attempt:
            event.set()
    return Plan(kind="done", ref=RunRef(run_id=start.run_id, agent="x", digest="x" * BIG))


@workflow.defn(name="default-retries", sandboxed=False)
class DefaultRetries:
    """The twin: the same activity under Temporal's default retry policy (unbounded)."""

    @workflow.run
    async def run(self, start: StartInput) -> None:
        await workflow.execute_activity(
            oversized, start, start_to_close_timeout=timedelta(seconds=30)
        )


async def test_an_oversized_activity_result_fails_the_run_at_once_not_retried_forever(
    temporal_address: str,
) -> None:
    # only references travel, so this cannot happen with legato's activities; a stand-in
    # `legato.start` returning 3 MiB shows the workflow's retry policy stops at once
    attempts.clear()
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[LegatoRun], activities=[oversized]):
        runs = TemporalRuns(client, task_queue=queue)
        # a regular activity: a local one's result reaches the server only with its
        # workflow task (not covered here; legato's plans are references, far below it)
        settings = ActivitySettings(local_activities="none")
        run_id = await runs.start("any", "Hello", settings=settings)
        with pytest.raises(DurableRunFailed) as failed:
            await runs.result(run_id)
    assert failed.value.error_type == "PayloadsTooLarge"
    assert attempts == [1]  # non-retryable: one body


async def test_twin_under_the_default_retry_policy_the_oversized_result_runs_again(
    temporal_address: str,
) -> None:
    attempts.clear()
    third = asyncio.Event()
    third_attempt[:] = [third]
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[DefaultRetries],
        activities=[oversized],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    async with worker:
        start = StartInput(run_id="r", agent="x", prompt=None)
        handle = await client.start_workflow(
            DefaultRetries.run, start, id=f"twin-{uuid.uuid4().hex}", task_queue=queue
        )
        await third.wait()  # the body keeps running; nothing stops it but us
        await handle.terminate("the twin has shown the retries")
    assert attempts[:3] == [1, 2, 3]


async def oversized_local_run(address: str, *, bounded: bool) -> tuple[str, Any]:
    """The stand-in `legato.start` as a local activity (the default), with or without the
    worker's bound on local results; its workflow's handle."""
    client = await Client.connect(address)
    queue = f"q-{uuid.uuid4().hex}"
    interceptors = [LocalResultLimit()] if bounded else []
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[LegatoRun],
        activities=[oversized],
        interceptors=interceptors,
    )
    async with worker:
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("any", "Hello")
        if not bounded:
            await third_attempt[0].wait()  # the body keeps running; nothing stops it but us
            await runs.handle(run_id).terminate("the twin has shown the re-runs")
            return "re-run", None
        try:
            await runs.result(run_id)
        except DurableRunFailed as exc:
            return "failed", exc
    return "finished", None


async def test_an_oversized_local_activity_result_fails_the_run_at_once(
    temporal_address: str,
) -> None:
    attempts.clear()
    status, failed = await oversized_local_run(temporal_address, bounded=True)
    assert status == "failed" and failed.error_type == "PayloadsTooLarge"
    assert attempts == [1]  # non-retryable: one body


async def test_twin_without_the_bound_the_local_activity_runs_again_and_again(
    temporal_address: str,
) -> None:
    # the server refuses the workflow task's completion (the marker is too large): the
    # task fails, runs again, and runs the local activity again, without end
    attempts.clear()
    third_attempt[:] = [asyncio.Event()]
    status, _ = await oversized_local_run(temporal_address, bounded=False)
    assert status == "re-run" and len(attempts) >= 3
