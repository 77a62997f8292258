"""The gate's decisions are a projection of the journal.

A run resumed (or forked) from any prefix of its journal decides exactly what the
uninterrupted run decided: a call the gate refused stays refused, a sibling held behind a
rejection stays held, whatever was in memory when the process stopped. Each check has a
twin with `project_decisions` off, showing the held call run after a resume.
"""

from __future__ import annotations

from pathlib import Path

from legato import Agent, tool
from legato._effects_parts import unsafe_switches
from legato.approvals import (
    ApprovalPolicy,
    ApprovalRequest,
    MemoryApprovalStore,
    Reject,
    Rule,
    SQLiteApprovalStore,
)
from legato.events import (
    ApprovalDecided,
    Journal,
    RunFinished,
    ToolCallFinished,
    ToolCallRefused,
)
from legato.messages import Message
from legato.models import ModelRequest
from legato.store import SQLiteStore
from legato.testing import FunctionModel, call, reply


class Bank:
    """The outside world: every transfer and charge that took effect."""

    def __init__(self) -> None:
        self.effects: list[str] = []

    def agent(self, approvals: ApprovalPolicy, store: SQLiteStore | None = None) -> Agent[str]:
        bank = self

        @tool(side_effects="irreversible")
        def wire(to: str) -> str:
            """Wire money.

            Args:
                to: Recipient.
            """
            bank.effects.append(f"wire {to}")
            return f"wired to {to}"

        @tool(side_effects="irreversible")
        def charge(amount: int) -> str:
            """Charge a card.

            Args:
                amount: How much.
            """
            bank.effects.append(f"charge {amount}")
            return f"charged {amount}"

        def answer(request: ModelRequest) -> Message:
            results = [m for m in request.messages if m.role == "tool"]
            if not results:
                return reply(
                    call("wire", {"to": "eve"}, id="c_wire"),
                    call("charge", {"amount": 9}, id="c_charge"),
                ).message
            texts = [p.text for m in results for p in m.tool_results]
            return Message.assistant(" | ".join(texts))

        return Agent(FunctionModel(answer), tools=[wire, charge], approvals=approvals, store=store)


def _rejecting(store: MemoryApprovalStore | SQLiteApprovalStore) -> ApprovalPolicy:
    async def reject(request: ApprovalRequest) -> Reject:
        return Reject(message="not to eve")

    return ApprovalPolicy(rules=[Rule("wire", "ask")], handler=reject, store=store)


def _cuts(journal: Journal) -> list[int]:
    """Every prefix a crash could leave: after each event but the run's end."""
    return list(range(1, len(journal.events)))


def _uninterrupted() -> tuple[Bank, Journal, str]:
    bank = Bank()
    result = bank.agent(_rejecting(MemoryApprovalStore())).run_sync("go")
    return bank, result.journal, result.output


def _resume_every_prefix() -> list[tuple[int, list[str], str]]:
    """(cut, effects after the resume, answer) for each prefix of the uninterrupted run."""
    _, journal, _ = _uninterrupted()
    found: list[tuple[int, list[str], str]] = []
    for cut in _cuts(journal):
        bank = Bank()
        store = MemoryApprovalStore()
        agent = bank.agent(_rejecting(store))
        prefix = Journal(list(journal.events[:cut]))
        found.append((cut, bank.effects, agent.resume_sync(prefix).output))
    return found


def test_the_uninterrupted_run_refuses_the_sibling_held_behind_a_rejection() -> None:
    bank, journal, output = _uninterrupted()
    assert bank.effects == []
    refusals = {e.tool: e.reason for e in journal if isinstance(e, ToolCallRefused)}
    assert refusals == {"wire": "rejected", "charge": "held"}
    assert "charged" not in output


def test_a_resume_from_any_prefix_decides_what_the_run_decided() -> None:
    _, _, expected = _uninterrupted()
    for cut, effects, output in _resume_every_prefix():
        assert effects == [], cut
        assert output == expected, cut


def test_twin_without_the_projection_a_held_call_runs_after_a_resume() -> None:
    with unsafe_switches(project_decisions=False):
        found = _resume_every_prefix()
    ran = [cut for cut, effects, _ in found if effects == ["charge 9"]]
    assert ran, found


def test_the_refusal_is_not_recorded_twice() -> None:
    _, journal, _ = _uninterrupted()
    refused_at = next(
        i
        for i, e in enumerate(journal.events)
        if isinstance(e, ToolCallRefused) and e.tool == "charge"
    )
    result = (
        Bank()
        .agent(_rejecting(MemoryApprovalStore()))
        .resume_sync(Journal(list(journal.events[: refused_at + 1])))
    )
    refusals = [e for e in result.journal if isinstance(e, ToolCallRefused) and e.tool == "charge"]
    finishes = [
        e for e in result.journal if isinstance(e, ToolCallFinished) and e.call.name == "charge"
    ]
    assert len(refusals) == 1
    assert [f.outcome for f in finishes] == ["refused"]
    assert finishes[0].result.text == refusals[0].message


def _fork_after_the_held_refusal(tmp_path: Path) -> tuple[Bank, str, str]:
    """Run with a store, fork between the two finishes, resume the fork."""
    store = SQLiteStore(tmp_path / "runs.db")
    approvals = SQLiteApprovalStore(store)
    bank = Bank()
    agent = bank.agent(_rejecting(approvals), store=store)
    result = agent.run_sync("go")
    events = list(result.journal.events)
    wire_done = next(
        i for i, e in enumerate(events) if isinstance(e, ToolCallFinished) and e.call.name == "wire"
    )
    assert any(isinstance(e, ToolCallRefused) and e.tool == "charge" for e in events[:wire_done])
    assert any(isinstance(e, ApprovalDecided) for e in events[:wire_done])
    fork = agent.fork(result.run_id, wire_done + 1)
    resumed = agent.resume_sync(fork)
    assert isinstance(resumed.journal.events[-1], RunFinished)
    return bank, result.output, resumed.output


def test_a_fork_between_the_two_finishes_decides_what_the_run_decided(tmp_path: Path) -> None:
    bank, original, forked = _fork_after_the_held_refusal(tmp_path)
    assert bank.effects == []
    assert forked == original


def test_twin_without_the_projection_the_fork_charges(tmp_path: Path) -> None:
    with unsafe_switches(project_decisions=False):
        bank, original, forked = _fork_after_the_held_refusal(tmp_path)
    assert bank.effects == ["charge 9"]
    assert forked != original


def _unit_by_unit(tmp_path: Path) -> tuple[Bank, str]:
    """Drive a stored run one unit at a time, each by a driver of its own resumed from the
    store (as a durable engine's activities do, on any worker)."""
    import asyncio

    store = SQLiteStore(tmp_path / "units.db")
    bank = Bank()
    agent = bank.agent(_rejecting(SQLiteApprovalStore(store)), store=store)
    first = agent.new_driver("go")
    first.flush()
    run_id = first.state.run_id

    async def drive() -> str:
        for _ in range(20):
            ended = store.load_run(run_id).events[-1]
            if isinstance(ended, RunFinished):
                return str(ended.output)
            driver = agent.resumed_driver(run_id, takeover=True)
            async for _event in driver.advance(driver.next_unit()):
                pass
        raise AssertionError("the run did not end")

    return bank, asyncio.run(drive())


def test_units_driven_by_separate_drivers_decide_like_one_run(tmp_path: Path) -> None:
    _, _, expected = _uninterrupted()
    bank, output = _unit_by_unit(tmp_path)
    assert bank.effects == []
    assert output == expected


def test_twin_without_the_projection_the_next_unit_runs_the_held_call(tmp_path: Path) -> None:
    with unsafe_switches(project_decisions=False):
        bank, _ = _unit_by_unit(tmp_path)
    assert bank.effects == ["charge 9"]
