"""Resuming a run on another model: `ResumeOptions.model` serves the rest of the run and the
journal's `RunResumed` says which model that is."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from legato import Agent, tool
from legato.approvals import ApprovalPolicy, Approve, Rule, SQLiteApprovalStore
from legato.events import ApprovalRequested, Journal, ModelResponded, RunResumed
from legato.exceptions import ModelOverloaded, RunParked
from legato.models import ModelRequest
from legato.store import SQLiteStore
from legato.testing import FunctionModel, ScriptedModel, call, reply


@tool(side_effects="irreversible")
def ship(order: str) -> str:
    """Ship an order.

    Args:
        order: Which order.
    """
    return f"shipped {order}"


def _down(request: ModelRequest) -> str:
    raise ModelOverloaded("the provider is down")


def _parked(db: Path) -> tuple[str, ApprovalPolicy]:
    """A run parked on an approval of `ship`, after one call of model A; then approved."""
    approvals = SQLiteApprovalStore(db)
    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=approvals)
    first = ScriptedModel([reply(call("ship", {"order": "C3"}))], name="test:a")
    agent = Agent(first, tools=[ship], store=SQLiteStore(db), approvals=policy)
    with pytest.raises(RunParked) as parked:
        agent.run_sync("ship C3")
    run_id = parked.value.parked.run_id

    async def approve() -> None:
        for event in SQLiteStore(db).load_run(run_id):
            if isinstance(event, ApprovalRequested):
                request = await approvals.get(event.request_id)
                assert request is not None
                await approvals.decide(request.id, request.token, Approve())

    asyncio.run(approve())
    return run_id, policy


def test_a_parked_run_resumes_on_another_model(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, policy = _parked(db)
    down = FunctionModel(_down, name="test:a")  # the agent's model: its provider is down
    other = ScriptedModel(["shipped, says B"], name="test:b")
    agent = Agent(down, tools=[ship], store=SQLiteStore(db), approvals=policy)
    result = agent.resume_sync(run_id, model=other)
    assert result.output == "shipped, says B"
    assert len(other.requests) == 1  # B saw the whole conversation, tool result included
    assert [r.text for m in other.requests[0].messages for r in m.tool_results] == ["shipped C3"]
    stored = SQLiteStore(db).load_run(run_id)
    [resumed] = [e for e in stored if isinstance(e, RunResumed)]
    assert resumed.model == "test:b"
    assert stored.events[0].model == "test:a"  # type: ignore[union-attr]
    # which model served which step: the steps after the resume are B's
    position = stored.events.index(resumed)
    steps = [(i > position, e.step) for i, e in enumerate(stored) if isinstance(e, ModelResponded)]
    assert steps == [(False, 1), (True, 2)]


def test_twin_without_model_the_agents_model_serves_and_fails(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, policy = _parked(db)
    down = FunctionModel(_down, name="test:a")
    agent = Agent(down, tools=[ship], store=SQLiteStore(db), approvals=policy)
    with pytest.raises(ModelOverloaded):
        agent.resume_sync(run_id)
    [resumed] = [e for e in SQLiteStore(db).load_run(run_id) if isinstance(e, RunResumed)]
    assert resumed.model == "test:a"


def test_an_interrupted_journal_resumes_on_a_model_named_by_string() -> None:
    model = ScriptedModel([reply(call("ship", {"order": "C3"})), "done"], name="test:a")
    finished = Agent(model, tools=[ship]).run_sync("ship C3")
    # the process died after the tool's outcome, before the model was asked again
    cut = next(i for i, e in enumerate(finished.journal) if e.kind == "tool_call_finished")
    interrupted = Journal(list(finished.journal.events[: cut + 1]))
    agent = Agent(FunctionModel(_down, name="test:a"), tools=[ship])
    result = agent.resume_sync(interrupted, model="test:echo")
    [resumed] = [e for e in result.journal if isinstance(e, RunResumed)]
    assert resumed.model == "test:echo"
    assert result.output == "echo: ship C3"  # test:echo answered


def test_a_journal_written_before_the_model_was_recorded_still_loads() -> None:
    old = json.dumps({"kind": "run_resumed", "owner": "host:1"})
    [event] = list(Journal.from_jsonl(_with_start(old)))[1:]
    assert isinstance(event, RunResumed) and event.model is None


def _with_start(line: str) -> str:
    start = Agent(ScriptedModel(["x"])).run_sync("hi").journal.events[0]
    return Journal([start]).to_jsonl().rstrip("\n") + "\n" + line + "\n"
