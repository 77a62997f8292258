"""Property: whatever the model proposes and however the tools fail, every committed version
of the state is one the contracts passed — checked here by an independent oracle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from legato import Agent, RunContext, Tool, tool
from legato.contracts import (
    State,
    StateOptions,
    arg,
    at_least,
    check,
    contract,
    decreased_by,
    has,
    increased_by,
    unchanged_except,
)
from legato.events import (
    Journal,
    ModelResponded,
    StateCommitted,
    StateLoaded,
)
from legato.models import ModelRequest
from legato.testing import FunctionModel, call, reply

ACCOUNTS = ("a", "b", "c")
Fault = Literal[
    "none", "wrong_amount", "wrong_id", "stale", "double", "malformed", "undeclared", "raise"
]
FAULTS: tuple[Fault, ...] = (
    "none",
    "wrong_amount",
    "wrong_id",
    "stale",
    "double",
    "malformed",
    "undeclared",
    "raise",
)


class Ledger(BaseModel):
    balances: dict[str, int]
    transfers: int = 0
    note: str = ""


@dataclass(kw_only=True)
class Memory:
    """What a stale tool remembers from earlier calls."""

    seen: dict[str, int] = field(default_factory=lambda: {})


def faulty(ctx: RunContext[Memory], source: str, target: str, amount: int, fault: str) -> str:
    """Transfer money, failing in the way `fault` says."""
    assert ctx.state is not None
    balances: dict[str, int] = ctx.state["balances"]
    remembered = dict(ctx.deps.seen)
    ctx.deps.seen.update(balances)
    if fault == "raise":
        raise RuntimeError("backend down")
    if fault == "stale" and source in remembered:
        balances[source] = remembered[source] - amount
    else:
        balances[source] -= amount + (1 if fault == "wrong_amount" else 0)
    credited = (
        next(a for a in ACCOUNTS if a not in (source, target)) if fault == "wrong_id" else target
    )
    balances[credited] += amount * (2 if fault == "double" else 1)
    if fault == "malformed":
        ctx.state["balances"] = {**balances, source: "NaN"}
    else:
        ctx.state["balances"] = balances
    if fault == "undeclared":
        ctx.state["note"] = "sneaky"
    ctx.state["transfers"] = ctx.state["transfers"] + 1
    return "ok"


GUARDED = contract(
    requires=[
        check(lambda state, args: args["amount"] > 0, name="positive"),
        check(lambda state, args: args["source"] != args["target"], name="two accounts"),
        has(("balances", arg("source"))),
        has(("balances", arg("target"))),
        at_least(("balances", arg("source")), arg("amount")),
    ],
    ensures=[
        decreased_by(("balances", arg("source")), arg("amount")),
        increased_by(("balances", arg("target")), arg("amount")),
        increased_by("transfers", 1),
        unchanged_except(("balances", arg("source")), ("balances", arg("target")), "transfers"),
    ],
    reads=["balances", "transfers"],
    writes=["balances", "transfers"],
)
transfer = Tool.from_function(faulty, name="transfer", max_retries=1000, contract=GUARDED)
unguarded = transfer.replace(
    contract=contract(writes=["balances", "transfers", "note"], unchecked_writes=True)
)


@tool
def noop() -> str:
    """Do nothing (a tool without a contract in the mix)."""
    return "nothing"


Call = tuple[str, str, int, Fault]
calls_strategy = st.tuples(
    st.sampled_from(ACCOUNTS + ("zz",)),
    st.sampled_from(ACCOUNTS),
    st.integers(-1, 9),
    st.sampled_from(("none",) * 7 + FAULTS[1:]),  # about half the calls are sound
)
steps_strategy = st.lists(st.lists(calls_strategy, min_size=1, max_size=3), min_size=1, max_size=6)


def run(steps: Sequence[Sequence[Call]], the_tool: Tool) -> tuple[Journal, State[Ledger]]:
    turns = iter(steps)

    def propose(request: ModelRequest) -> Any:
        step = next(turns, None)
        if step is None:
            return "finished"
        parts = [
            call("transfer", {"source": s, "target": t, "amount": n, "fault": f})
            for s, t, n, f in step
        ]
        return reply(*parts, call("noop"))

    agent = Agent(
        FunctionModel(propose),
        tools=[the_tool, noop],
        state=Ledger(balances={"a": 10, "b": 10, "c": 10}),
        state_options=StateOptions(max_rejections=1000, show="none"),
    )
    journal = Journal()
    try:
        for event in agent.stream_sync("go", deps=Memory()):
            if isinstance(event, (StateLoaded, StateCommitted, ModelResponded)):
                journal.append(event)  # the oracle needs only these
    except Exception:  # a run may end early (retry limits); its state must still be sound
        pass
    loaded = next(e for e in journal if isinstance(e, StateLoaded))
    commits = [e for e in journal if isinstance(e, StateCommitted)]
    return journal, State.from_journal(loaded, commits, Ledger)


def violations(journal: Journal, state: State[Ledger]) -> list[str]:
    """Every committed version the contract should not have let through, by an oracle."""
    arguments: dict[str, dict[str, Any]] = {}
    for event in journal:
        if isinstance(event, ModelResponded):
            for c in event.response.message.tool_calls:
                assert isinstance(c.arguments, dict)
                arguments[c.id] = c.arguments
    found: list[str] = []
    for commit in state.commits:
        before = state.at(commit.version - 1).as_model()
        after = state.at(commit.version).as_model()
        args = arguments[commit.call_id or ""]
        source, target, amount = args["source"], args["target"], args["amount"]
        expected = dict(before.balances)
        legal = source in expected and target in expected and source != target and 0 < amount
        legal = legal and expected[source] >= amount
        if legal:
            expected[source] -= amount
            expected[target] += amount
        if not legal or after.balances != expected or after.transfers != before.transfers + 1:
            found.append(f"v{commit.version}: {args} took {before} to {after}")
        if after.note != before.note or min(after.balances.values()) < 0:
            found.append(f"v{commit.version}: invariant broken: {after}")
    return found


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=steps_strategy)
def test_no_committed_version_fails_its_contract(steps: list[list[Call]]) -> None:
    journal, state = run(steps, transfer)
    assert violations(journal, state) == []
    assert sum(state["balances"].values()) == 30
    sound = [c for step in steps for c in step if c[3] == "none" and c[0] != c[1] and c[2] > 0]
    if len(steps) == 1 and len(steps[0]) == 1 and sound and sound[0][0] != "zz":
        assert state.version == (1 if sound[0][2] <= 10 else 0)  # no false rejection


def test_the_oracle_sees_corruption_when_contracts_are_off() -> None:
    """The same harness with the checks off: faults reach the state."""
    steps: list[list[Call]] = [
        [("a", "b", 3, "wrong_amount")],
        [("b", "c", 50, "none")],  # more than b holds: the precondition would refuse it
        [("a", "b", 1, "undeclared"), ("a", "c", 2, "none")],  # a lost update in parallel
    ]
    journal, state = run(steps, unguarded)
    found = violations(journal, state)
    assert len(found) >= 3
    journal, state = run(steps, transfer)
    assert violations(journal, state) == []
    assert state.version >= 1  # the valid parallel transfer committed
