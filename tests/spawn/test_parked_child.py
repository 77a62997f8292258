"""A child that parks says so in its parent's journal.

The parent's journal pairs every `SpawnStarted` with a `SpawnFinished` before its own end,
`Parked` included: a waited child that stops for an approval is recorded as
`SpawnFinished(outcome="parked")`, and when the tree is resumed and the child ends, its new
`SpawnFinished` supersedes that one (usage and budget shares count the child once). The
twin (`finish_children` off) shows the parent's journal with `SpawnStarted` then `Parked`,
and a resumed tree that no longer counts what the child spent before it parked.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from legato import Agent, tool
from legato._effects_parts import unsafe_switches
from legato.approvals import ApprovalPolicy, Approve, Rule, SQLiteApprovalStore
from legato.budgets import BudgetLimits
from legato.events import (
    ApprovalRequested,
    Journal,
    ModelResponded,
    Parked,
    RunFinished,
    SpawnFinished,
    SpawnStarted,
)
from legato.exceptions import BudgetExceeded, RunParked
from legato.spawn import tree_usage
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply


def _tree(db: Path, sent: list[str], child_turns: list[object], turns: list[object]) -> Agent:
    @tool(side_effects="irreversible")
    def send_email(to: str) -> str:
        """Send an e-mail.

        Args:
            to: Recipient.
        """
        sent.append(to)
        return f"sent to {to}"

    child = Agent(ScriptedModel(child_turns), name="mailer", tools=[send_email])  # type: ignore[arg-type]
    store = SQLiteStore(db)
    policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], store=SQLiteApprovalStore(store))
    return Agent(
        ScriptedModel(turns),  # type: ignore[arg-type]
        name="boss",
        tools=[child.as_tool(name="ask_mailer", description="Ask the mailer")],
        approvals=policy,
        store=store,
    )


def _park(db: Path, sent: list[str]) -> Journal:
    agent = _tree(
        db,
        sent,
        [reply(call("send_email", {"to": "bob"}))],
        [reply(call("ask_mailer", {"task": "mail bob"}))],
    )
    with pytest.raises(RunParked) as parked:
        agent.run_sync("mail bob")
    return SQLiteStore(db).load_run(parked.value.parked.run_id)


def _spawn_kinds(journal: Journal) -> list[str]:
    kinds: list[str] = []
    for event in journal:
        if isinstance(event, SpawnStarted):
            kinds.append("started")
        elif isinstance(event, SpawnFinished):
            kinds.append(f"finished:{event.outcome}")
        elif isinstance(event, Parked | RunFinished):
            kinds.append(event.kind)
    return kinds


def test_a_parked_child_is_recorded_as_parked_before_its_parent_parks(tmp_path: Path) -> None:
    sent: list[str] = []
    journal = _park(tmp_path / "runs.db", sent)
    assert sent == []
    assert _spawn_kinds(journal) == ["started", "finished:parked", "run_parked"]
    ended = next(e for e in journal if isinstance(e, SpawnFinished))
    assert ended.error is not None and "send_email" in ended.error
    assert ended.usage.requests == 1  # what the child spent before it stopped


def test_twin_without_finish_children_the_parent_journal_says_nothing(tmp_path: Path) -> None:
    with unsafe_switches(finish_children=False):
        journal = _park(tmp_path / "runs.db", [])
    assert _spawn_kinds(journal) == ["started", "run_parked"]


def test_the_resumed_child_supersedes_its_parked_record(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    sent: list[str] = []
    parked = _park(db, sent)
    store = SQLiteStore(db)
    child_id = next(e.lineage.run_id for e in parked if isinstance(e, SpawnStarted))
    approvals = SQLiteApprovalStore(store)

    async def approve() -> None:
        for event in store.load_run(child_id):
            if isinstance(event, ApprovalRequested):
                request = await approvals.get(event.request_id)
                assert request is not None
                await approvals.decide(request.id, request.token, Approve())

    asyncio.run(approve())
    agent = _tree(db, sent, ["mail sent"], ["all done"])
    result = agent.resume_sync(parked.run_id or "")
    assert result.output == "all done" and sent == ["bob"]
    final = store.load_run(parked.run_id or "")
    assert _spawn_kinds(final) == [
        "started",
        "finished:parked",
        "run_parked",
        "started",
        "finished:ok",
        "run_finished",
    ]
    # the parent's two model calls, and the child's two (one before the park) counted once
    assert tree_usage(final).requests == 2 + 2


def _calls_across_a_park(db: Path, limit: int) -> int:
    """Park the tree, approve, resume, each run limited to `limit` model calls; the model
    calls the whole tree made (every stored run's responses)."""
    sent: list[str] = []
    agent = _tree(
        db,
        sent,
        [reply(call("send_email", {"to": "bob"}))],
        [reply(call("ask_mailer", {"task": "mail bob"}))],
    )
    with pytest.raises(RunParked) as parked:
        agent.run_sync("mail bob", budget=BudgetLimits(model_calls=limit))
    run_id = parked.value.parked.run_id
    store = SQLiteStore(db)
    child_id = next(e.lineage.run_id for e in store.load_run(run_id) if isinstance(e, SpawnStarted))
    approvals = SQLiteApprovalStore(store)

    async def approve() -> None:
        for event in store.load_run(child_id):
            if isinstance(event, ApprovalRequested):
                request = await approvals.get(event.request_id)
                assert request is not None
                await approvals.decide(request.id, request.token, Approve())

    asyncio.run(approve())
    resumer = _tree(db, sent, ["mail sent"], ["all done"])
    with contextlib.suppress(BudgetExceeded):
        resumer.resume_sync(run_id, budget=BudgetLimits(model_calls=limit))
    runs = [store.load_run(r.run_id) for r in store.list_runs()]
    return sum(1 for journal in runs for e in journal if isinstance(e, ModelResponded))


def test_a_resumed_tree_counts_what_the_parked_child_spent(tmp_path: Path) -> None:
    """The tree needs four model calls; limited to three, it makes three, park or not."""
    assert _calls_across_a_park(tmp_path / "runs.db", limit=3) == 3


def test_twin_without_the_parked_record_the_resumed_tree_overspends(tmp_path: Path) -> None:
    with unsafe_switches(finish_children=False):
        made = _calls_across_a_park(tmp_path / "runs.db", limit=3)
    assert made == 4
