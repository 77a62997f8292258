"""Contracts inside runs: gating, commits, rejections, halts, parallel calls, replay."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel, Field
from rich.console import Console

from legato import Agent, RunContext, Tool, tool
from legato.cli._render import render_journal
from legato.contracts import (
    Contract,
    Halt,
    Reject,
    Snapshot,
    State,
    StateOptions,
    arg,
    at_least,
    check,
    contract,
    decreased_by,
    ensures,
    has,
    increased_by,
    requires,
    unchanged_except,
)
from legato.contracts._contract import predicate_name
from legato.events import (
    Journal,
    ModelRequested,
    ModelResponded,
    RunFailed,
    RunFinished,
    RunStarted,
    StateCommitted,
    StateLoaded,
    StateRejected,
    StepFinished,
    ToolCallFinished,
    ToolCallStarted,
    UserPrompt,
)
from legato.exceptions import (
    ConfigurationError,
    ContractHalt,
    ContractRetriesExceeded,
    ContractViolation,
    ToolDefinitionError,
    ToolRetriesExceeded,
    UndeclaredStateKey,
)
from legato.models import ModelRequest
from legato.run import RunState, replay
from legato.testing import FunctionModel, ScriptedModel, call, reply


class Bank(BaseModel):
    user: str | None = None
    balances: dict[str, int] = Field(default_factory=dict)


def initial() -> Bank:
    return Bank(balances={"ann": 100, "bob": 20})


TRANSFER_PRE = [
    has("user"),
    at_least(("balances", arg("source")), arg("amount")),
]
TRANSFER_POST = [
    decreased_by(("balances", arg("source")), arg("amount")),
    increased_by(("balances", arg("target")), arg("amount")),
    unchanged_except(("balances", arg("source")), ("balances", arg("target"))),
]
ran: list[str] = []


def move(ctx: RunContext[Any], source: str, target: str, amount: int, *, fee: int = 0) -> str:
    assert ctx.state is not None
    balances = ctx.state["balances"]
    balances[source] -= amount + fee
    balances[target] += amount
    ran.append(f"{source}->{target}:{amount}")
    return "ok"


@tool(requires=TRANSFER_PRE, ensures=TRANSFER_POST, reads=["user", "balances"], writes=["balances"])
def transfer(ctx: RunContext[Any], source: str, target: str, amount: int) -> str:
    """Move money between accounts."""
    return move(ctx, source, target, amount)


@tool(requires=TRANSFER_PRE, ensures=TRANSFER_POST, reads=["user", "balances"], writes=["balances"])
def buggy_transfer(ctx: RunContext[Any], source: str, target: str, amount: int) -> str:
    """Move money, but a bug takes a hidden fee of 1."""
    return move(ctx, source, target, amount, fee=1)


@tool(writes=["user"], ensures=has("user"))
def login(ctx: RunContext[Any], name: str) -> str:
    """Log in."""
    assert ctx.state is not None
    ctx.state["user"] = name
    return "in"


JOURNALED = (
    RunStarted,
    UserPrompt,
    ModelRequested,
    ModelResponded,
    ToolCallStarted,
    ToolCallFinished,
    StepFinished,
    RunFinished,
    RunFailed,
    StateLoaded,
    StateCommitted,
    StateRejected,
)
"""The journaled event classes, as a tuple `isinstance` narrows with."""


def run_collecting(
    agent: Agent, prompt: str = "go", **kwargs: Any
) -> tuple[Journal, Exception | None]:
    journal = Journal()
    try:
        for event in agent.stream_sync(prompt, **kwargs):
            if isinstance(event, JOURNALED):
                journal.append(event)
    except Exception as exc:
        return journal, exc
    return journal, None


def of_type(journal: Journal, kind: type) -> list[Any]:
    return [e for e in journal if isinstance(e, kind)]


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def bank_agent(turns: list[Any], *tools: Tool, **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(turns)
    return Agent(model, tools=list(tools) or [login, transfer], state=initial(), **kwargs), model


# -- the happy path ---------------------------------------------------------------------------


def test_passing_call_commits_one_versioned_event() -> None:
    agent, _ = bank_agent(
        [
            reply(call("login", {"name": "ann"})),
            reply(call("transfer", {"source": "ann", "target": "bob", "amount": 30})),
            "done",
        ]
    )
    result = agent.run_sync("pay bob 30")
    assert result.state is not None
    assert result.state["balances"] == {"ann": 70, "bob": 50}
    assert result.state.version == 2
    commits = of_type(result.journal, StateCommitted)
    assert [c.version for c in commits] == [1, 2]
    last = commits[1]
    assert last.tool == "transfer"
    assert last.call_id == result.messages[3].tool_calls[0].id
    assert [(c.key, c.old, c.new) for c in last.changes] == [
        ("balances", {"ann": 100, "bob": 20}, {"ann": 70, "bob": 50})
    ]
    assert last.checks[:2] == ("has user", "balances.<source> >= <amount>")
    assert "unchanged except balances.<source>, balances.<target>" in last.checks
    # the commit is journaled before the tool's finish, in the model's order
    kinds = [type(e).__name__ for e in result.journal]
    assert kinds.index("StateCommitted") < kinds.index("ToolCallFinished")
    # the agent's own state is untouched: every run works on a fork
    assert agent.state is not None
    assert agent.state.version == 0


def test_state_carries_over_when_passed_to_the_next_run() -> None:
    agent, _ = bank_agent([reply(call("login", {"name": "ann"})), "in"])
    first = agent.run_sync("log in")
    assert first.state is not None
    model = ScriptedModel(
        [reply(call("transfer", {"source": "ann", "target": "bob", "amount": 5})), "paid"]
    )
    second = agent.run_sync("pay", state=first.state, model=model)
    assert second.state is not None
    assert second.state["balances"]["ann"] == 95
    assert second.state.version == 2
    assert [c.tool for c in second.state.commits] == ["login", "transfer"]
    loaded = of_type(second.journal, StateLoaded)[0]
    assert (loaded.version, loaded.values["user"]) == (1, "ann")
    assert first.state.version == 1  # the first result is not changed by the second run


def test_a_model_instance_overrides_the_initial_state() -> None:
    agent, _ = bank_agent(
        [reply(call("transfer", {"source": "ann", "target": "bob", "amount": 5})), "x"]
    )
    result = agent.run_sync("pay", state=Bank(user="ann", balances={"ann": 5, "bob": 0}))
    assert result.state is not None
    assert result.state["balances"] == {"ann": 0, "bob": 5}


# -- preconditions -----------------------------------------------------------------------------


def test_failed_precondition_does_not_run_the_tool_and_tells_the_model() -> None:
    agent, model = bank_agent(
        [reply(call("transfer", {"source": "ann", "target": "bob", "amount": 30})), "sorry"]
    )
    result = agent.run_sync("pay bob")
    assert ran == []  # the body never ran
    (rejected,) = of_type(result.journal, StateRejected)
    assert (rejected.stage, rejected.predicate, rejected.halted) == ("pre", "has user", False)
    assert rejected.evidence == {
        "user": None,
        "args.source": "ann",
        "args.target": "bob",
        "args.amount": 30,
    }
    (finished,) = of_type(result.journal, ToolCallFinished)
    assert finished.outcome == "rejected"
    assert finished.result.is_error
    seen = model.requests[1].messages[-1].tool_results[0].text
    assert seen.startswith("Not run:")
    assert "user is not set" in seen
    assert result.state is not None
    assert result.state.version == 0


def test_without_contracts_the_same_call_runs_and_corrupts() -> None:
    """The protection switched off: the same call overdraws the account."""
    plain = transfer.replace(contract=contract(writes=["balances"], unchecked_writes=True))
    agent, _ = bank_agent(
        [reply(call("transfer", {"source": "ann", "target": "bob", "amount": 300})), "x"], plain
    )
    result = agent.run_sync("pay")
    assert result.state is not None
    assert result.state["balances"]["ann"] == -200
    checked, _ = bank_agent(
        [reply(call("transfer", {"source": "ann", "target": "bob", "amount": 300})), "x"]
    )
    guarded = checked.run_sync("pay", state=Bank(user="ann", balances={"ann": 100, "bob": 0}))
    assert guarded.state is not None
    assert guarded.state["balances"] == {"ann": 100, "bob": 0}


def test_halt_in_a_precondition_stops_the_run_with_the_evidence() -> None:
    frozen = check(
        lambda state, args: Halt("account frozen") if args["source"] == "bob" else True,
        name="not frozen",
    )
    guarded = requires(frozen)(transfer)
    agent, _ = bank_agent(
        [reply(call("transfer", {"source": "bob", "target": "ann", "amount": 1})), "x"], guarded
    )
    journal, error = run_collecting(agent, state=Bank(user="bob", balances={"ann": 0, "bob": 5}))
    assert isinstance(error, ContractHalt)
    assert (error.tool, error.predicate, error.reason) == (
        "transfer",
        "not frozen",
        "account frozen",
    )
    assert error.evidence["args.source"] == "bob"
    (rejected,) = of_type(journal, StateRejected)
    assert rejected.halted
    assert isinstance(journal.events[-1], RunFailed)
    assert journal.events[-1].error_type == "ContractHalt"
    assert ran == []


# -- postconditions ------------------------------------------------------------------------------


def test_failed_postcondition_discards_the_draft() -> None:
    agent, model = bank_agent(
        [reply(call("buggy_transfer", {"source": "ann", "target": "bob", "amount": 30})), "x"],
        buggy_transfer,
    )
    result = agent.run_sync("pay", state=Bank(user="ann", balances={"ann": 100, "bob": 20}))
    assert ran == ["ann->bob:30"]  # the body ran...
    assert result.state is not None
    assert result.state["balances"] == {"ann": 100, "bob": 20}  # ...but nothing was committed
    assert result.state.version == 0
    (rejected,) = of_type(result.journal, StateRejected)
    assert rejected.stage == "post"
    assert rejected.predicate == "balances.<source> decreased by <amount>"
    assert rejected.evidence["old.balances"] == {"ann": 100, "bob": 20}
    assert rejected.evidence["new.balances"] == {"ann": 69, "bob": 50}
    text = model.requests[1].messages[-1].tool_results[0].text
    assert "nothing was committed" in text
    assert "went from 100 to 69" in text


def test_postcondition_sees_the_result() -> None:
    def said_ok(
        old: Snapshot[Any], new: Snapshot[Any], args: Mapping[str, Any], result: Any
    ) -> object:
        return result == "ok" or Reject(f"the tool said {result!r}")

    @tool(ensures=said_ok, writes=["user"])
    def shaky(ctx: RunContext[Any], name: str) -> str:
        """Log in, maybe."""
        assert ctx.state is not None
        ctx.state["user"] = name
        return "ok" if name == "ann" else "timeout?"

    agent, _ = bank_agent(
        [reply(call("shaky", {"name": "eve"})), reply(call("shaky", {"name": "ann"})), "x"], shaky
    )
    result = agent.run_sync("go")
    assert result.state is not None
    assert result.state["user"] == "ann"
    assert of_type(result.journal, StateRejected)[0].message == "the tool said 'timeout?'"


# -- bad tools and bad contracts -----------------------------------------------------------------


def test_writes_outside_the_contract_or_of_the_wrong_type_are_rejected() -> None:
    @tool(writes=["balances"], unchecked_writes=True)
    def sneaky(ctx: RunContext[Any], what: str) -> str:
        """Write something it should not."""
        assert ctx.state is not None
        if what == "user":
            ctx.state["user"] = "mallory"
        elif what == "type":
            ctx.state["balances"] = {"ann": "lots"}
        elif what == "undeclared":
            ctx.state["owner"] = "mallory"
        else:
            ctx.state["balances"]["ann"] = "lots"  # in place, found at commit
        return "done"

    turns = [reply(call("sneaky", {"what": w})) for w in ("user", "type", "undeclared", "inplace")]
    agent, model = bank_agent([*turns, "x"], sneaky.replace(max_retries=5))
    result = agent.run_sync("go")
    assert result.state is not None
    assert result.state.version == 0
    assert result.state.snapshot() == State(initial()).snapshot()
    rejected = of_type(result.journal, StateRejected)
    assert [r.stage for r in rejected] == ["write"] * 4
    assert [r.evidence["error"] for r in rejected] == [
        "ContractViolation",
        "StateValidationError",
        "UndeclaredStateKey",
        "StateValidationError",
    ]
    assert [r.evidence["key"] for r in rejected] == ["user", "balances", "owner", "balances"]
    assert rejected[0].evidence["value"] == "mallory"
    texts = [m.tool_results[0].text for m in result.messages if m.role == "tool"]
    assert "tool 'sneaky'" in texts[0]
    assert "'user'" in texts[0]
    assert "StateValidationError" in texts[1]
    assert all(r.outcome == "rejected" for r in of_type(result.journal, ToolCallFinished))
    model.assert_complete()


def test_a_contract_that_raises_stops_the_run_and_corrupts_nothing() -> None:
    def broken(old: Any, new: Any, args: Any, result: Any) -> bool:
        return new["balances"]["nobody"] == 0  # KeyError: a bug in the contract

    agent, _ = bank_agent(
        [reply(call("transfer", {"source": "ann", "target": "bob", "amount": 1})), "x"],
        ensures(broken)(transfer),
    )
    journal, error = run_collecting(agent, state=Bank(user="ann", balances={"ann": 5, "bob": 0}))
    assert isinstance(error, ContractViolation)
    assert error.tool == "transfer"
    assert "broken" in str(error)
    assert "KeyError" in str(error)
    (rejected,) = of_type(journal, StateRejected)
    assert rejected.halted
    assert of_type(journal, StateCommitted) == []


def test_a_predicate_naming_an_undeclared_key_is_a_typed_error() -> None:
    helper = transfer.replace(
        contract=contract(requires=has("owner"), writes=["balances"], unchecked_writes=True)
    )
    agent, _ = bank_agent(
        [reply(call("transfer", {"source": "ann", "target": "bob", "amount": 1})), "x"], helper
    )
    _, error = run_collecting(agent)
    assert isinstance(error, UndeclaredStateKey)
    assert (error.key, error.tool) == ("owner", "transfer")

    plain = transfer.replace(
        contract=contract(
            requires=lambda state, args: state["owner"] == "x",
            writes=["balances"],
            unchecked_writes=True,
        )
    )
    agent, _ = bank_agent(
        [reply(call("transfer", {"source": "ann", "target": "bob", "amount": 1})), "x"], plain
    )
    _, error = run_collecting(agent)
    assert isinstance(error, UndeclaredStateKey)
    assert (error.key, error.tool) == ("owner", "transfer")
    assert ran == []


def test_tools_without_a_contract_read_but_cannot_write() -> None:
    @tool
    def peek(ctx: RunContext[Any]) -> str:
        """Look at the balances."""
        assert ctx.state is not None
        return str(ctx.state["balances"]["ann"])

    @tool
    def scribble(ctx: RunContext[Any]) -> str:
        """Try to write without a contract."""
        assert ctx.state is not None
        ctx.state["user"] = "mallory"
        return "done"

    agent, _ = bank_agent(
        [reply(call("peek"), call("scribble")), "x"], peek, scribble.replace(max_retries=3)
    )
    result = agent.run_sync("go")
    texts = [r.text for r in result.messages[2].tool_results]
    assert texts[0] == "100"
    assert "read-only snapshot" in texts[1]
    assert result.state is not None
    assert result.state["user"] is None


# -- bounded retries -----------------------------------------------------------------------------


def test_repeated_rejections_of_one_tool_end_the_run() -> None:
    model = FunctionModel(
        lambda request: reply(call("transfer", {"source": "ann", "target": "bob", "amount": 999}))
    )
    agent = Agent(model, tools=[transfer], state=Bank(user="ann", balances={"ann": 1, "bob": 0}))
    with pytest.raises(ToolRetriesExceeded) as info:
        agent.run_sync("go")
    assert "Not run" in info.value.last_error
    assert len(model.requests) == 2  # max_retries=1: two tries, then the run stops


def test_rejections_are_bounded_per_run_across_tools() -> None:
    calls = iter(range(100))

    def propose(request: ModelRequest) -> Any:
        name = "transfer" if next(calls) % 2 else "also"
        return reply(call(name, {"source": "ann", "target": "bob", "amount": 999}))

    also = transfer.replace(name="also")
    model = FunctionModel(propose)
    agent = Agent(
        model,
        tools=[transfer.replace(max_retries=50), also.replace(max_retries=50)],
        state=Bank(user="ann", balances={"ann": 1, "bob": 0}),
        state_options=StateOptions(max_rejections=3),
    )
    journal, error = run_collecting(agent)
    assert isinstance(error, ContractRetriesExceeded)
    assert error.limit == 3
    assert len(of_type(journal, StateRejected)) == 4
    assert "transfer" in error.last or "also" in error.last


# -- parallel calls ------------------------------------------------------------------------------


def parallel(*calls_: Any) -> list[Any]:
    return [reply(*calls_), "done"]


def test_parallel_calls_commit_in_model_order_even_when_finishing_out_of_order() -> None:
    second_done = asyncio.Event()

    @tool(writes=["user"], ensures=has("user"))
    async def rename(ctx: RunContext[Any], name: str) -> str:
        """Set the user; the first call waits until the second has finished."""
        if name == "ann":
            await asyncio.wait_for(second_done.wait(), 5)
        assert ctx.state is not None
        ctx.state["user"] = name
        if name == "bob":
            second_done.set()
        return name

    agent, _ = bank_agent(
        parallel(call("rename", {"name": "ann"}), call("rename", {"name": "bob"})), rename
    )
    result = agent.run_sync("go")
    commits = of_type(result.journal, StateCommitted)
    calls_ = result.messages[1].tool_calls
    assert [c.call_id for c in commits] == [calls_[0].id, calls_[1].id]
    # both started from version 0; the second's key was changed by the first, so re-checked
    assert [(c.version, c.rechecked) for c in commits] == [(1, False), (2, True)]
    assert result.state is not None
    assert result.state["user"] == "bob"  # the model's order, not the finishing order


def test_a_rechecked_draft_that_would_lose_an_update_is_rejected() -> None:
    @tool(
        requires=TRANSFER_PRE,
        ensures=TRANSFER_POST,
        reads=["user", "balances"],
        writes=["balances"],
    )
    async def slow_transfer(ctx: RunContext[Any], source: str, target: str, amount: int) -> str:
        """Transfer; both calls read the balances before either writes."""
        return move(ctx, source, target, amount)

    agent, _ = bank_agent(
        parallel(
            call("slow_transfer", {"source": "ann", "target": "bob", "amount": 10}),
            call("slow_transfer", {"source": "bob", "target": "cat", "amount": 5}),
        ),
        slow_transfer,
    )
    result = agent.run_sync("go", state=Bank(user="x", balances={"ann": 100, "bob": 10, "cat": 0}))
    assert result.state is not None
    # the second draft holds ann=100 from its snapshot; committing it would undo ann's -10
    assert result.state["balances"] == {"ann": 90, "bob": 20, "cat": 0}
    (rejected,) = of_type(result.journal, StateRejected)
    assert (rejected.stage, rejected.predicate) == (
        "recheck",
        "balances.<source> decreased by <amount>",
    )


def test_a_parallel_call_whose_reads_changed_is_rechecked_and_rejected() -> None:
    """Two transfers that each fit the balance but not together: the second must not commit."""
    both = parallel(
        call("transfer", {"source": "ann", "target": "bob", "amount": 60}),
        call("transfer", {"source": "ann", "target": "cat", "amount": 60}),
    )
    start = Bank(user="ann", balances={"ann": 100, "bob": 0, "cat": 0})
    agent, _ = bank_agent(both, transfer)
    result = agent.run_sync("go", state=start)
    assert ran == ["ann->bob:60", "ann->cat:60"]  # both ran on their own drafts
    assert result.state is not None
    assert result.state["balances"] == {"ann": 40, "bob": 60, "cat": 0}
    (rejected,) = of_type(result.journal, StateRejected)
    assert rejected.stage == "recheck"
    assert rejected.version == 1
    text = result.messages[2].tool_results[1].text
    assert "an earlier call of the same step changed balances" in text

    # the protection off (no checks): a lost update — 120 paid out of 100, ann at 40
    ran.clear()
    unchecked = transfer.replace(
        contract=contract(writes=["balances"], reads=["balances"], unchecked_writes=True)
    )
    agent, _ = bank_agent(both, unchecked)
    result = agent.run_sync("go", state=start)
    assert result.state is not None
    assert result.state["balances"] == {"ann": 40, "bob": 0, "cat": 60}  # bob's 60 vanished
    assert ran == ["ann->bob:60", "ann->cat:60"]  # 120 was paid out of an account holding 100


def test_recheck_follows_declared_reads() -> None:
    @tool(writes=["user"], reads=[], unchecked_writes=True)
    def set_user(ctx: RunContext[Any], name: str) -> str:
        """Set the user."""
        assert ctx.state is not None
        ctx.state["user"] = name
        return "ok"

    @tool(writes=["balances"], reads=["balances"], ensures=unchanged_except("balances"))
    def mint(ctx: RunContext[Any], amount: int) -> str:
        """Add money to ann's account (reads no user)."""
        assert ctx.state is not None
        ctx.state["balances"]["ann"] += amount
        return "ok"

    agent, _ = bank_agent(
        parallel(
            call("set_user", {"name": "ann"}),
            call("mint", {"amount": 5}),
            call("transfer", {"source": "ann", "target": "bob", "amount": 1}),
        ),
        set_user,
        mint,
        transfer,
    )
    result = agent.run_sync("go", state=Bank(user="zed", balances={"ann": 1, "bob": 0}))
    commits = of_type(result.journal, StateCommitted)
    # mint does not read the user: no re-check; transfer reads both keys: re-checked, and its
    # draft (from version 0) would undo mint's +5, so it is rejected
    assert [(c.tool, c.rechecked) for c in commits] == [("set_user", False), ("mint", False)]
    (rejected,) = of_type(result.journal, StateRejected)
    assert (rejected.tool, rejected.stage) == ("transfer", "recheck")
    assert result.state is not None
    assert result.state["balances"] == {"ann": 6, "bob": 0}


# -- what the model sees -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("show", "present", "absent"),
    [
        ("all", ['- user: "ann"', '- balances: {"ann": 100, "bob": 20}'], []),
        (("balances",), ['- balances: {"ann": 100, "bob": 20}'], ["- user"]),
        ("none", [], ["Verified state", "- user"]),
    ],
)
def test_state_rendering_into_instructions(
    show: Any, present: list[str], absent: list[str]
) -> None:
    model = ScriptedModel(["hi"])
    agent = Agent(
        model,
        instructions="Be brief.",
        state=Bank(user="ann", balances={"ann": 100, "bob": 20}),
        state_options=StateOptions(show=show),
    )
    agent.run_sync("hi")
    instructions = model.requests[0].instructions or ""
    assert instructions.startswith("Be brief.")
    for text in present:
        assert text in instructions
    for text in absent:
        assert text not in instructions


def test_rendered_state_follows_commits() -> None:
    agent, model = bank_agent([reply(call("login", {"name": "ann"})), "in"])
    agent.run_sync("log in")
    assert "version 0" in (model.requests[0].instructions or "")
    assert '- user: "ann"' in (model.requests[1].instructions or "")
    assert "version 1" in (model.requests[1].instructions or "")


def test_read_state_tool_is_read_only() -> None:
    model = ScriptedModel(
        [
            reply(call("read_state", {"keys": ["user"]}), call("read_state", {"keys": ["owner"]})),
            reply(call("read_state", {})),
            "x",
        ]
    )
    agent = Agent(model, state=initial(), state_options=StateOptions(read_tool=True, show="none"))
    result = agent.run_sync("what do you know?")
    assert "read_state" in [t.name for t in model.requests[0].tools]
    first, undeclared = result.messages[2].tool_results
    assert first.text == '{"version":0,"values":{"user":null}}'
    assert undeclared.is_error
    assert "owner" in undeclared.text
    assert '"balances":{"ann":100,"bob":20}' in result.messages[4].tool_results[0].text


def test_a_contract_without_a_state_is_a_configuration_error() -> None:
    agent = Agent(ScriptedModel(["x"]), tools=[transfer])
    with pytest.raises(ConfigurationError, match="'transfer' has a contract"):
        agent.run_sync("go")


def test_read_state_tool_name_clash_is_a_definition_error() -> None:
    @tool
    def read_state() -> str:
        """A tool of the same name."""
        return "mine"

    agent = Agent(
        ScriptedModel(["x"]),
        tools=[read_state],
        state=initial(),
        state_options=StateOptions(read_tool=True),
    )
    with pytest.raises(ToolDefinitionError, match="read_state"):
        agent.run_sync("go")


# -- replay and trace ------------------------------------------------------------------------------


def test_replay_rebuilds_the_same_state_from_the_journal() -> None:
    agent, _ = bank_agent(
        [
            reply(call("login", {"name": "ann"})),
            reply(
                call("transfer", {"source": "ann", "target": "bob", "amount": 30}),
                call("transfer", {"source": "ann", "target": "bob", "amount": 80}),
            ),
            "done",
        ]
    )
    result = agent.run_sync("go")
    assert result.state is not None
    again = replay(Journal.from_jsonl(result.journal.to_jsonl()), state_type=Bank)
    assert again.state is not None
    assert again.state.snapshot() == result.state.snapshot()
    assert again.state.version == result.state.version == 2
    assert again.state.commits == result.state.commits
    assert again.state.history("balances")[0].tool == "transfer"
    assert isinstance(again.state.as_model(), Bank)
    untyped = replay(result.journal.to_jsonl())
    assert untyped.state is not None
    assert untyped.state["balances"] == {"ann": 70, "bob": 50}
    projection = RunState.from_events(list(result.journal.events))
    assert projection.state_values == result.state.snapshot().to_json()
    assert projection.state_version == 2
    assert projection.contract_rejections == 1  # the second transfer, re-checked


def test_trace_shows_checks_commits_and_rejections() -> None:
    agent, _ = bank_agent(
        [
            reply(call("transfer", {"source": "ann", "target": "bob", "amount": 30})),
            reply(call("login", {"name": "ann"})),
            reply(call("transfer", {"source": "ann", "target": "bob", "amount": 30})),
            "done",
        ]
    )
    result = agent.run_sync("go")
    out = io.StringIO()
    render_journal(Console(file=out, width=200, no_color=True), result.journal)
    text = out.getvalue()
    assert 'state v0 loaded (Bank): user=null, balances={"ann": 100, "bob": 20}' in text
    assert (
        "✗ contract rejected transfer at pre (has user), state v0: has user: user is not set"
        in text
    )
    assert "evidence: user=null" in text
    assert "✓ state v2 committed by transfer" in text
    assert 'balances: {"ann": 100, "bob": 20} → {"ann": 70, "bob": 50}' in text
    assert "passed: has user; balances.<source> >= <amount>" in text
    assert "[rejected]" in text


# -- sequential tools, resume, the CLI -------------------------------------------------------------


def test_a_sequential_call_sees_the_commits_of_earlier_calls() -> None:
    both = [
        reply(
            call("login", {"name": "ann"}),
            call("transfer", {"source": "ann", "target": "bob", "amount": 5}),
        ),
        "done",
    ]
    # concurrent: the transfer is checked against the snapshot it started from (nobody in)
    agent, _ = bank_agent(both)
    result = agent.run_sync("go")
    (rejected,) = of_type(result.journal, StateRejected)
    assert (rejected.tool, rejected.predicate) == ("transfer", "has user")
    # sequential: it starts after the login is committed, and sees it
    agent, _ = bank_agent(both, login, transfer.replace(sequential=True))
    result = agent.run_sync("go")
    assert of_type(result.journal, StateRejected) == []
    assert [(c.tool, c.version) for c in of_type(result.journal, StateCommitted)] == [
        ("login", 1),
        ("transfer", 2),
    ]
    kinds = [type(e).__name__ for e in result.journal]
    second_start = [i for i, k in enumerate(kinds) if k == "ToolCallStarted"][1]
    assert kinds.index("StateCommitted") < second_start


async def test_a_resumed_run_rebuilds_its_state_from_the_journal() -> None:
    from legato.run import RunConfig, RunDriver
    from legato.run._output import OutputSchema

    turns: list[Any] = [
        reply(call("login", {"name": "ann"})),
        reply(call("transfer", {"source": "ann", "target": "bob", "amount": 30})),
        "done",
    ]
    config: RunConfig[str] = RunConfig(
        agent_name="bank",
        model=ScriptedModel(turns),
        instructions=None,
        tool_sources=[Agent(ScriptedModel([]), tools=[login, transfer]).toolset],
        output=OutputSchema.build(str),
        state=State(initial()),
    )
    first = RunDriver(config)
    first.start("go", [])
    events = [e async for e in first.events()]
    cut = next(i for i, e in enumerate(events) if isinstance(e, StateCommitted)) + 2
    partial = Journal([e for e in events[:cut] if isinstance(e, JOURNALED)])
    resumed = RunDriver(replace(config, model=ScriptedModel(turns[1:])), journal=partial)
    async for _ in resumed.events():
        pass
    result = resumed.result()
    assert result.state is not None
    assert result.state.version == 2
    assert [c.tool for c in result.state.commits] == ["login", "transfer"]
    assert result.state["balances"] == {"ann": 70, "bob": 50}


def test_legato_trace_prints_state_events(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from legato.cli._app import app

    agent, _ = bank_agent([reply(call("login", {"name": "ann"})), "in"])
    result = agent.run_sync("go")
    path = tmp_path / "run.jsonl"
    path.write_text(result.journal.to_jsonl(), encoding="utf-8")
    out = CliRunner().invoke(app, ["trace", str(path)], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert "✓ state v1 committed by login" in out.output
    assert 'user: null → "ann"' in out.output


def test_streamed_state_events_render_one_line_each() -> None:
    from legato.cli._render import render_event

    agent, _ = bank_agent(
        [
            reply(call("transfer", {"source": "ann", "target": "bob", "amount": 1})),
            reply(call("login", {"name": "ann"})),
            "in",
        ]
    )
    out = io.StringIO()
    console = Console(file=out, width=200, no_color=True)
    for event in agent.stream_sync("go"):
        render_event(console, event)
    text = out.getvalue()
    assert "✗ contract rejected transfer at pre (has user)" in text
    assert "✓ state v1 committed by login" in text


def test_many_parallel_increments_are_refused_not_silently_lost() -> None:
    """Twenty concurrent increments, all from version 0: one commits; the re-check refuses the
    other nineteen, whose drafts would each overwrite it with the same stale count."""

    class Counter(BaseModel):
        count: int = 0

    @tool(ensures=increased_by("count", 1), writes=["count"], max_retries=100)
    async def increment(ctx: RunContext[Any], label: str) -> str:
        """Add one."""
        assert ctx.state is not None
        await asyncio.sleep(0)
        ctx.state["count"] += 1
        return label

    model = ScriptedModel([reply(*(call("increment", {"label": str(i)}) for i in range(20))), "x"])
    agent = Agent(
        model, tools=[increment], state=Counter(), state_options=StateOptions(max_rejections=100)
    )
    result = agent.run_sync("go")
    assert result.state is not None
    assert result.state["count"] == 1
    assert len(of_type(result.journal, StateRejected)) == 19
    assert {r.stage for r in of_type(result.journal, StateRejected)} == {"recheck"}

    unchecked = increment.replace(contract=contract(writes=["count"], unchecked_writes=True))
    model = ScriptedModel([reply(*(call("increment", {"label": str(i)}) for i in range(20))), "x"])
    agent = Agent(model, tools=[unchecked], state=Counter())
    result = agent.run_sync("go")
    assert result.state is not None
    assert result.state["count"] == 1  # 20 increments ran, 19 were silently lost
    assert result.state.version == 1


def test_halt_in_a_postcondition_stops_the_run_and_commits_nothing() -> None:
    def sane(old: Any, new: Any, args: Any, result: Any) -> object:
        return (
            Halt("the ledger no longer balances") if sum(new["balances"].values()) != 120 else True
        )

    agent, _ = bank_agent(
        [reply(call("buggy_transfer", {"source": "ann", "target": "bob", "amount": 1})), "x"],
        ensures(sane)(
            buggy_transfer.replace(contract=contract(writes=["balances"], unchecked_writes=True))
        ),
    )
    journal, error = run_collecting(agent, state=Bank(user="ann", balances={"ann": 100, "bob": 20}))
    assert isinstance(error, ContractHalt)
    assert error.predicate == "sane"
    assert error.evidence["new.balances"] == {"ann": 98, "bob": 21}
    (rejected,) = of_type(journal, StateRejected)
    assert (rejected.stage, rejected.halted) == ("post", True)
    assert of_type(journal, StateCommitted) == []


def test_requires_and_ensures_decorators_extend_a_contract() -> None:
    extended = requires(has("user"), reads=["user"])(ensures(unchanged_except("user"))(login))
    assert extended.contract is not None
    made = Contract.of(extended.contract)
    assert [predicate_name(p, "pre", 0) for p in made.requires] == ["has user"]
    assert [predicate_name(p, "post", i) for i, p in enumerate(made.ensures)] == [
        "has user",
        "unchanged except user",
    ]
    assert made.writes == {"user"}
    assert made.reads == {"user"}
    agent, _ = bank_agent([reply(call("login", {"name": "ann"})), "x"], extended)
    result = agent.run_sync("go")  # nobody is logged in yet: the new precondition refuses
    (rejected,) = of_type(result.journal, StateRejected)
    assert (rejected.stage, rejected.predicate) == ("pre", "has user")
