"""Durable runs in one process: write-ahead recording, resume by id, the resumer's claim.

The kill matrix (tests/run/test_kill_matrix.py) checks the same promises with real
processes killed by SIGKILL; these tests pin each mechanism down with its twin.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from legato import Agent, Tool, tool
from legato._effects_parts import unsafe_switches
from legato.approvals import ApprovalPolicy, Approve, Rule, SQLiteApprovalStore
from legato.events import (
    ApprovalRequested,
    Journal,
    RunFinished,
    RunResumed,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallRefused,
)
from legato.exceptions import JournalConflict, JournalError, RunNotResumable, RunParked
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply
from legato.tools import RunContext


class Effects:
    """What the tools did, and what the store held while they did it."""

    def __init__(self, db: Path | None) -> None:
        self.db = db
        self.shipped: list[str] = []
        self.admitted_before: list[bool] = []

    def tools(self) -> list[Tool]:
        @tool(side_effects="irreversible")
        async def ship(ctx: RunContext[None], order: str) -> str:
            """Ship an order.

            Args:
                order: Which order.
            """
            if self.db is not None:  # a second connection sees only what was committed
                try:
                    stored = SQLiteStore(self.db).load_run(ctx.run_id)
                except JournalError:  # nothing of the run is stored yet
                    stored = Journal()
                self.admitted_before.append(
                    any(
                        isinstance(e, ToolCallAdmitted) and e.call_id == ctx.tool_call_id
                        for e in stored
                    )
                )
            self.shipped.append(order)
            return f"shipped {order}"

        @tool
        async def lookup(order: str) -> str:
            """Look an order up (read-only).

            Args:
                order: Which order.
            """
            return f"{order}: ready"

        return [ship, lookup]


def _agent(effects: Effects, store: SQLiteStore, turns: list[object], **options: object) -> Agent:
    model = ScriptedModel(turns)  # type: ignore[arg-type]
    return Agent(model, tools=effects.tools(), store=store, **options)  # type: ignore[arg-type]


def test_an_admission_is_committed_before_the_effect_runs(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    effects = Effects(db)
    agent = _agent(effects, SQLiteStore(db), [reply(call("ship", {"order": "A1"})), "done"])
    result = agent.run_sync("ship A1")
    assert result.output == "done"
    assert effects.admitted_before == [True]
    stored = SQLiteStore(db).load_run(result.run_id)
    assert stored == result.journal  # everything, in order, once
    assert SQLiteStore(db).run_info(result.run_id).status == "finished"  # type: ignore[union-attr]


def test_twin_without_write_ahead_the_effect_runs_before_its_admission_is_stored(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    effects = Effects(db)
    agent = _agent(effects, SQLiteStore(db), [reply(call("ship", {"order": "A1"})), "done"])
    with unsafe_switches(write_ahead=False):
        result = agent.run_sync("ship A1")
    assert effects.admitted_before == [False]  # a crash here re-ships on resume
    assert SQLiteStore(db).load_run(result.run_id) == result.journal  # stored at the end


def test_an_outcome_is_committed_before_the_model_is_asked_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    effects = Effects(db)
    seen: list[bool] = []

    def second(request: object) -> str:
        run_id = agent_runs[0]
        seen.append(any(isinstance(e, ToolCallFinished) for e in SQLiteStore(db).load_run(run_id)))
        return "done"

    agent_runs: list[str] = []
    store = SQLiteStore(db)
    agent = _agent(effects, store, [reply(call("ship", {"order": "B2"})), second])

    async def main() -> None:
        handle = agent.start("ship B2")
        agent_runs.append(handle.run_id)
        await handle.result()

    asyncio.run(main())
    assert seen == [True]


def _parked_run(db: Path) -> tuple[str, Effects, SQLiteApprovalStore]:
    """A session run parked on an approval of `ship`, with a read-only sibling."""
    effects = Effects(db)
    approvals = SQLiteApprovalStore(db)
    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=approvals)
    agent = _agent(
        effects,
        SQLiteStore(db),
        [reply(call("ship", {"order": "C3"}), call("lookup", {"order": "C3"}))],
        approvals=policy,
    )
    with pytest.raises(RunParked) as parked:
        agent.run_sync("ship C3", session="orders")
    return parked.value.parked.run_id, effects, approvals


def _approve_all(approvals: SQLiteApprovalStore, journal: Journal) -> None:
    async def decide() -> None:
        for event in journal:
            if isinstance(event, ApprovalRequested):
                request = await approvals.get(event.request_id)
                assert request is not None
                await approvals.decide(request.id, request.token, Approve())

    asyncio.run(decide())


def test_a_run_resumed_by_id_is_saved_and_its_session_gets_the_turn(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, effects, approvals = _parked_run(db)
    store = SQLiteStore(db)
    assert store.run_info(run_id).status == "parked"  # type: ignore[union-attr]
    _approve_all(approvals, store.load_run(run_id))
    # another agent object (as another process would build it) resumes by id
    resumer = _agent(
        effects,
        SQLiteStore(db),
        ["shipped it"],
        approvals=ApprovalPolicy(rules=[Rule("ship", "ask")], store=approvals),
    )
    result = resumer.resume_sync(run_id)
    assert result.output == "shipped it"
    assert effects.shipped == ["C3"]
    stored = SQLiteStore(db).load_run(run_id)
    assert stored == result.journal
    assert any(isinstance(e, RunResumed) for e in stored)
    assert isinstance(stored.events[-1], RunFinished)
    assert SQLiteStore(db).run_info(run_id).status == "finished"  # type: ignore[union-attr]
    session = SQLiteStore(db).load_session("orders")
    assert [m.text for m in session if m.role == "user"] == ["ship C3"]
    assert session[-1].text == "shipped it"


def test_a_second_resumer_gets_a_typed_error_and_runs_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, effects, approvals = _parked_run(db)
    _approve_all(approvals, SQLiteStore(db).load_run(run_id))
    stale = SQLiteStore(db).load_run(run_id)  # read before the winner claimed the run
    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=approvals)
    winner = _agent(effects, SQLiteStore(db), ["ok"], approvals=policy)
    loser_model = ScriptedModel(["should not be asked"])
    loser = Agent(loser_model, tools=effects.tools(), store=SQLiteStore(db), approvals=policy)

    async def main() -> None:
        handle = winner.start_resumed(run_id)  # claims position N
        with pytest.raises(RunNotResumable, match="differs from the stored one"):
            loser.start_resumed(stale)
        await handle.result()

    asyncio.run(main())
    assert effects.shipped == ["C3"]
    assert loser_model.requests == []


def test_two_resumers_reading_the_same_prefix_one_claim_wins(tmp_path: Path) -> None:
    """Both read N events; both claim position N; the second claim is a `JournalConflict`."""
    db = tmp_path / "runs.db"
    run_id, effects, approvals = _parked_run(db)
    _approve_all(approvals, SQLiteStore(db).load_run(run_id))
    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=approvals)
    agents = [_agent(effects, SQLiteStore(db), ["ok"], approvals=policy) for _ in range(2)]
    prefixes = [a._resume_prefix(run_id) for a in agents]
    assert prefixes[0][1] == prefixes[1][1]
    from legato.run import RunDriver

    drivers = [
        RunDriver(replace(a.run_config(), store=SQLiteStore(db)), journal=Journal(p[0]), saved=p[1])
        for a, p in zip(agents, prefixes, strict=True)
    ]
    drivers[0].resumed("first")
    with pytest.raises(JournalConflict) as lost:
        drivers[1].resumed("second")
    assert lost.value.position == prefixes[0][1]
    stored = SQLiteStore(db).load_run(run_id)
    claims = [e for e in stored if isinstance(e, RunResumed)]
    assert [c.owner for c in claims] == ["first"]


def test_resuming_bad_input_is_a_typed_error_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    effects = Effects(db)
    store = SQLiteStore(db)
    agent = _agent(effects, store, [reply(call("ship", {"order": "D4"})), "done"])
    finished = agent.run_sync("ship D4")
    before = len(store.load_run(finished.run_id))
    with pytest.raises(RunNotResumable, match="no stored run"):
        agent.resume_sync("0123456789abcdef")
    with pytest.raises(RunNotResumable, match="already finished"):
        agent.resume_sync(finished.run_id)
    with pytest.raises(RunNotResumable, match="no store"):
        Agent(ScriptedModel([]), tools=effects.tools()).resume_sync(finished.run_id)
    assert len(store.load_run(finished.run_id)) == before
    assert effects.shipped == ["D4"]


def test_an_edited_journal_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, effects, approvals = _parked_run(db)
    store = SQLiteStore(db)
    stored = store.load_run(run_id)
    edited = Journal.from_jsonl(stored.to_jsonl().replace('"C3"', '"C9"'))
    assert edited != stored
    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=approvals)
    agent = _agent(effects, store, ["x"], approvals=policy)
    with pytest.raises(RunNotResumable, match="differs"):
        agent.resume_sync(edited)
    assert len(store.load_run(run_id)) == len(stored)
    assert effects.shipped == []


class _Raising:
    """An approval handler that fails (a UI that crashed)."""

    async def __call__(self, request: object) -> None:
        msg = "the approval UI crashed"
        raise RuntimeError(msg)


def _handler_run(effects: Effects) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([reply(call("ask_boss", {"order": "E5"}), call("ship", {"order": "E5"}))])

    @tool(side_effects="irreversible")
    async def ask_boss(order: str) -> str:
        """Ask the boss.

        Args:
            order: Which order.
        """
        return "asked"

    policy = ApprovalPolicy(rules=[Rule("ask_boss", "ask")], handler=_Raising())
    agent = Agent(model, tools=[*effects.tools(), ask_boss], approvals=policy)
    return agent, model


def test_an_approval_handler_that_raises_keeps_the_held_sibling_from_running(
    tmp_path: Path,
) -> None:
    effects = Effects(None)
    agent, _ = _handler_run(effects)

    async def main() -> Journal:
        handle = agent.start("go")
        with pytest.raises(RuntimeError, match="crashed"):
            await handle.result()
        return handle.journal

    journal = asyncio.run(main())
    assert effects.shipped == []
    held = [e for e in journal if isinstance(e, ToolCallRefused) and e.tool == "ship"]
    assert [e.reason for e in held] == ["held"]
    admitted = {e.call_id for e in journal if isinstance(e, ToolCallAdmitted)}
    finished = {e.call.id for e in journal if isinstance(e, ToolCallFinished)}
    assert admitted <= finished  # no admission without its finish


def test_twin_a_raising_handler_releases_the_sibling_without_the_protection(
    tmp_path: Path,
) -> None:
    effects = Effects(None)
    agent, _ = _handler_run(effects)

    async def main() -> None:
        handle = agent.start("go")
        with pytest.raises(RuntimeError):
            await handle.result()

    with unsafe_switches(hold_on_failure=False):
        asyncio.run(main())
    assert effects.shipped == ["E5"]
