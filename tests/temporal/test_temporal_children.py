"""Sub-agents as child workflows `<run id>/<call id>`: linked journals, a park that parks
the parent, a budget carved from the parent's, and a killed worker that runs nothing twice."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporal_agents import activity_types, add, adder, approving, delegating, open_request
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from legato import Agent
from legato.budgets import BudgetLimits
from legato.effects import unsafe_switches
from legato.events import (
    ApprovalDecided,
    JournalEvent,
    ModelResponded,
    Parked,
    RunFailed,
    RunFinished,
    RunStarted,
    SpawnFinished,
    SpawnStarted,
    ToolCallFinished,
)
from legato.exceptions import DecisionAlreadyUsed, DurableRunFailed
from legato.store import SQLiteStore
from legato.temporal import LegatoRun, TemporalRuns, legato_worker
from legato.testing import ScriptedModel, call, reply


def children_started(history: WorkflowHistory) -> list[str]:
    """The workflow ids of the child workflows a history started."""
    kind = EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
    return [
        e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
        for e in history.events
        if e.event_type == kind
    ]


def child_journal(store: SQLiteStore, parent: list[JournalEvent]) -> list[JournalEvent]:
    """The journal of the one child the parent's journal links."""
    spawned = [e for e in parent if isinstance(e, SpawnStarted)]
    assert spawned, "the parent's journal links no child"
    return list(store.load_run(spawned[0].lineage.run_id).events)


async def test_an_agent_tool_call_runs_as_a_child_workflow_with_the_call_id(
    temporal_address: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    helper = adder(db)
    model = ScriptedModel([reply(call("adding", {"task": "add 2 and 3"}, id="p1")), "It is 5."])
    tool = helper.as_tool(name="adding", description="Adds numbers.")
    parent = Agent(model, tools=[tool], store=SQLiteStore(db), name="parent")
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"parent": parent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("parent", "What is 2 + 3? Ask the adder.")
        outcome = await runs.result(run_id)
        history = await runs.handle(run_id).fetch_history()
        child_history = await client.get_workflow_handle(f"{run_id}/p1").fetch_history()
    assert outcome.status == "finished"
    assert children_started(history) == [f"{run_id}/p1"]
    # the child's model calls ran as the child workflow's activities, not inside the parent's
    child_activities = activity_types(child_history)  # regular and local
    assert child_activities.count("legato.model") == 2
    store = SQLiteStore(db)
    events = list(store.load_run(run_id).events)
    kinds = [type(e).__name__ for e in events]
    # linked before the child ran; its end recorded with the call's result afterwards
    assert kinds.index("SpawnStarted") < kinds.index("Parked") < kinds.index("SpawnFinished")
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [f.result.text for f in finished] == ["It is 5."]
    assert isinstance(events[-1], RunFinished) and events[-1].output == "It is 5."
    child = child_journal(store, events)
    assert isinstance(child[-1], RunFinished)
    assert sum(isinstance(e, ModelResponded) for e in child) == 2


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
        request_id = await open_request(runs, run_id)  # the child's request, on the parent
        assert shipped == []  # parked: nothing ran
        assert await runs.open_requests(f"{run_id}/p1") == [request_id]
        await runs.decide(run_id, request_id, "approve")  # one decision, to the parent
        outcome = await runs.result(run_id)
        history = await runs.handle(run_id).fetch_history()
        child_history = await runs.handle(f"{run_id}/p1").fetch_history()
    assert outcome.status == "finished" and shipped == ["A1"]
    assert children_started(history) == [f"{run_id}/p1"]
    # both histories (child workflow, signals both ways, the update) replay deterministically
    replayer = Replayer(workflows=[LegatoRun])
    await replayer.replay_workflow(history)
    await replayer.replay_workflow(child_history)
    store = SQLiteStore(tmp_path / "runs.db")
    parent = list(store.load_run(run_id).events)
    assert isinstance(parent[-1], RunFinished) and parent[-1].output == "All done."
    spawned = [e for e in parent if isinstance(e, SpawnFinished)]
    assert len(spawned) == 1
    child = list(store.load_run(spawned[0].lineage.run_id).events)
    assert [e.verdict for e in child if isinstance(e, ApprovalDecided)] == ["approve"]
    assert [e.request_ids for e in child if isinstance(e, Parked)] == [(request_id,)]
    assert isinstance(child[-1], RunFinished)


def unguarded(db: Path, shipped: list[str]) -> Agent[str]:
    """A parent whose policy asks before `ship`; its child has no approval policy at all."""
    from legato import tool
    from legato.approvals import ApprovalPolicy, Rule, SQLiteApprovalStore

    @tool(side_effects="irreversible")
    def ship(order: str) -> str:
        """Ship an order.

        Args:
            order: Which order.
        """
        shipped.append(order)
        return f"shipped {order}"

    model = ScriptedModel([reply(call("ship", {"order": "A1"}, id="c1")), "Done."])
    child = Agent(model, tools=[ship], name="free-shipper")
    as_tool = child.as_tool(name="shipping", description="Ships orders.")
    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=SQLiteApprovalStore(db))
    parent_model = ScriptedModel([reply(call("shipping", {"task": "ship A1"}, id="p1")), "Ok."])
    return Agent(
        parent_model, tools=[as_tool], store=SQLiteStore(db), approvals=policy, name="parent"
    )


async def ship_rejected(address: str, db: Path, shipped: list[str]) -> bool:
    """Run `unguarded`, rejecting whatever it asks; whether anything was asked."""
    client = await Client.connect(address)
    queue = f"q-{uuid.uuid4().hex}"
    asked = False
    async with legato_worker(client, task_queue=queue, agents={"parent": unguarded(db, shipped)}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("parent", "Ship A1 through the shipping agent")
        result = asyncio.ensure_future(runs.result(run_id))
        while not result.done():
            requests = await runs.open_requests(run_id)
            for request_id in requests:
                asked = True
                await runs.decide(run_id, request_id, "reject", message="Not today.")
            await asyncio.sleep(0.05)
        assert (await result).status == "finished"
    return asked


async def test_a_child_workflow_decides_under_its_parents_approval_policy(
    temporal_address: str, tmp_path: Path
) -> None:
    shipped: list[str] = []
    assert await ship_rejected(temporal_address, tmp_path / "runs.db", shipped)
    assert shipped == []  # the parent's `ask` held the child's call; rejected, it never ran


async def test_twin_without_inheriting_the_policy_the_child_ships_unasked(
    temporal_address: str, tmp_path: Path
) -> None:
    shipped: list[str] = []
    with unsafe_switches(inherit_gate=False):
        asked = await ship_rejected(temporal_address, tmp_path / "runs.db", shipped)
    assert not asked and shipped == ["A1"]


def spender(db: Path) -> Agent[str]:
    """A parent allowed 3 model calls whose child would make 5 (four `add` calls, an answer)."""
    steps = [reply(call("add", {"a": i, "b": 1}, id=f"a{i}")) for i in range(4)]
    child = Agent(ScriptedModel([*steps, "Done adding."]), tools=[add], name="counter")
    tool = child.as_tool(name="adding", description="Adds numbers.")
    model = ScriptedModel([reply(call("adding", {"task": "add a lot"}, id="p1")), "Over."])
    budget = BudgetLimits(model_calls=3)
    return Agent(model, tools=[tool], store=SQLiteStore(db), name="parent", budget=budget)


async def spend(address: str, db: Path) -> tuple[list[JournalEvent], list[JournalEvent]]:
    """Run `spender` to its end (a failure included): the parent's and the child's journals."""
    client = await Client.connect(address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"parent": spender(db)}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("parent", "Add a lot.")
        with pytest.raises(DurableRunFailed, match="BudgetExceeded"):
            await runs.result(run_id)  # the parent's last call finds the budget spent
    store = SQLiteStore(db)
    parent = list(store.load_run(run_id).events)
    return parent, child_journal(store, parent)


def model_calls(events: list[JournalEvent]) -> int:
    return sum(isinstance(e, ModelResponded) for e in events)


async def test_a_child_spends_at_most_the_share_carved_from_its_parents_budget(
    temporal_address: str, tmp_path: Path
) -> None:
    parent, child = await spend(temporal_address, tmp_path / "runs.db")
    # the parent had made 1 of its 3 model calls: the child's share was the other 2
    assert model_calls(child) == 2
    failed = child[-1]
    assert isinstance(failed, RunFailed) and failed.error_type == "BudgetExceeded"
    assert model_calls(parent) + model_calls(child) == 3  # the tree kept the parent's limit


async def test_twin_without_carving_the_child_spends_beyond_its_parents_budget(
    temporal_address: str, tmp_path: Path
) -> None:
    with unsafe_switches(tree_budget=False):
        parent, child = await spend(temporal_address, tmp_path / "runs.db")
    assert model_calls(child) == 5 and isinstance(child[-1], RunFinished)
    assert model_calls(parent) + model_calls(child) == 6  # twice the parent's limit


async def test_a_worker_killed_while_the_child_runs_the_effect_happens_once(
    temporal_address: str, tmp_path: Path
) -> None:
    from test_temporal_kill import kill_mid_tool

    outcome, effects, callers, events, first, second = await kill_mid_tool(
        temporal_address, tmp_path, dedup=True, agent="boss"
    )
    assert outcome.status == "finished"
    assert len(effects) == 1  # the child's effect ran once, though its activity ran twice
    assert callers == [str(first), str(second)]  # the child's model calls: none repeated
    bosses = (tmp_path / "boss_calls").read_text(encoding="utf-8").split()
    assert bosses == [str(first), str(second)]  # the parent's: one per step
    store = SQLiteStore(tmp_path / "runs.db")
    assert len([e for e in events if isinstance(e, SpawnStarted) and not e.resumed]) == 1
    child = child_journal(store, events)
    finished = [e for e in child if isinstance(e, ToolCallFinished)]
    assert [f.result.text for f in finished] == ["shipped (found)"]  # reconciled, not re-run
    started = events[0]
    assert isinstance(started, RunStarted)
    run_id = started.run_id
    client = await Client.connect(temporal_address)
    history = await client.get_workflow_handle(run_id).fetch_history()
    assert children_started(history) == [f"{run_id}/p1"]  # started once


async def test_a_grandchild_parked_parks_the_root_and_the_roots_decision_reaches_it(
    temporal_address: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    shipped: list[str] = []
    middle = delegating(db, shipped)  # its call delegates to the shipper, which asks
    as_tool = middle.as_tool(name="managing", description="Manages shipping.")
    model = ScriptedModel([reply(call("managing", {"task": "get A1 shipped"}, id="r1")), "Ok."])
    root = Agent(model, tools=[as_tool], store=SQLiteStore(db), name="root")
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"root": root}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("root", "Get A1 shipped")
        request_id = await open_request(runs, run_id)  # asked two levels down
        assert shipped == []
        await runs.decide(run_id, request_id, "approve")
        with pytest.raises(DecisionAlreadyUsed):  # consume-once on the root as well
            await runs.decide(run_id, request_id, "reject")
        outcome = await runs.result(run_id)
        middle_history = await runs.handle(f"{run_id}/r1").fetch_history()
    assert outcome.status == "finished" and shipped == ["A1"]
    # the middle run's id is its lineage id `<root>-r1`: its child is `<root>-r1/p1`
    assert children_started(middle_history) == [f"{run_id}-r1/p1"]
    events = list(SQLiteStore(db).load_run(run_id).events)
    assert isinstance(events[-1], RunFinished) and events[-1].output == "Ok."


async def test_a_failed_child_workflow_is_the_calls_error_and_the_parent_goes_on(
    temporal_address: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    looping = ScriptedModel([reply(call("add", {"a": 1, "b": 1}, id="a1")), "Never."])
    child = Agent(looping, tools=[add], name="looper", max_steps=1)
    tool = child.as_tool(name="adding", description="Adds numbers.")
    model = ScriptedModel([reply(call("adding", {"task": "add"}, id="p1")), "It failed."])
    parent = Agent(model, tools=[tool], store=SQLiteStore(db), name="parent")
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"parent": parent}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("parent", "Add, please.")
        outcome = await runs.result(run_id)
        with pytest.raises(DurableRunFailed, match="MaxStepsExceeded"):
            await runs.result(f"{run_id}/p1")  # the child workflow failed, not retried
    assert outcome.status == "finished"
    events = list(SQLiteStore(db).load_run(run_id).events)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert len(finished) == 1 and "MaxStepsExceeded" in finished[0].result.text
    ended = [e for e in events if isinstance(e, SpawnFinished)]
    assert [e.outcome for e in ended] == ["error"]
    assert isinstance(events[-1], RunFinished) and events[-1].output == "It failed."


async def test_max_depth_counts_across_child_workflows(
    temporal_address: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    shipped: list[str] = []
    shipper = approving(db, shipped)
    shipping = shipper.as_tool(name="shipping", description="Ships.", max_depth=1)
    middle_model = ScriptedModel([reply(call("shipping", {"task": "A1"}, id="p1")), "Could not."])
    middle = Agent(middle_model, tools=[shipping], name="middle")
    managing = middle.as_tool(name="managing", description="Manages shipping.")
    model = ScriptedModel([reply(call("managing", {"task": "ship A1"}, id="r1")), "Ok."])
    root = Agent(model, tools=[managing], store=SQLiteStore(db), name="root")
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"root": root}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("root", "Get A1 shipped")
        outcome = await runs.result(run_id)
        middle_history = await runs.handle(f"{run_id}/r1").fetch_history()
    assert outcome.status == "finished" and shipped == []
    assert children_started(middle_history) == []  # the grandchild (depth 2) was refused
    store = SQLiteStore(db)
    middle_events = child_journal(store, list(store.load_run(run_id).events))
    finished = [e for e in middle_events if isinstance(e, ToolCallFinished)]
    assert len(finished) == 1 and "beyond the limit of 1" in finished[0].result.text
