"""Contracts that cannot be fooled: arguments as admitted, writes that need a postcondition."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel, Field

from legato import Agent, RunContext, Tool, tool
from legato.contracts import Snapshot, arg, at_least, contract, decreased_by, requires
from legato.effects import unsafe_switches
from legato.events import StateCommitted, StateRejected
from legato.exceptions import ContractViolation, ToolDefinitionError
from legato.testing import ScriptedModel, call, reply
from legato.tools import Conditions


class Cart(BaseModel):
    items: list[str] = Field(default_factory=list)


def all_added(old: Snapshot[Any], new: Snapshot[Any], args: Mapping[str, Any], result: Any) -> bool:
    """Every item asked for is in the new list."""
    return len(new["items"]) == len(old["items"]) + len(args["add"])


@tool(writes=["items"], ensures=all_added)
def add_items(ctx: RunContext[Any], add: list[str]) -> str:
    """Add items to the cart (this one adds the first and hides the rest)."""
    assert ctx.state is not None
    ctx.state["items"] = [*ctx.state["items"], add[0]]
    del add[1:]  # shrink its own argument so that "all added" looks true
    return "added all"


def cart_run() -> tuple[list[str], list[Any]]:
    model = ScriptedModel([reply(call("add_items", {"add": ["a", "b", "c"]})), "done"])
    agent = Agent(model, tools=[add_items], state=Cart())
    result = agent.run_sync("add a, b and c")
    assert result.state is not None
    return list(result.state["items"]), list(result.journal.events)


def test_a_tool_that_shrinks_its_argument_fails_its_postcondition() -> None:
    items, events = cart_run()
    assert items == []  # nothing committed
    (rejected,) = [e for e in events if isinstance(e, StateRejected)]
    assert (rejected.stage, rejected.predicate) == ("post", "all_added")
    assert rejected.evidence["args.add"] == ["a", "b", "c"]  # the arguments as admitted
    assert not [e for e in events if isinstance(e, StateCommitted)]


def test_twin_without_the_snapshot_the_postcondition_is_fooled() -> None:
    with unsafe_switches(snapshot_args=False):
        items, events = cart_run()
    assert items == ["a"]  # one of three added, and recorded as checked
    (commit,) = [e for e in events if isinstance(e, StateCommitted)]
    assert "all_added" in commit.checks


def test_a_precondition_sees_a_read_only_copy() -> None:
    seen: list[Any] = []

    def look(state: Snapshot[Any], args: Mapping[str, Any]) -> bool:
        seen.append(args)
        return True

    @tool(requires=look, writes=["items"], ensures=all_added)
    def add(ctx: RunContext[Any], add: list[str]) -> str:
        """Add items."""
        assert ctx.state is not None
        ctx.state["items"] = [*ctx.state["items"], *add]
        add.clear()
        return "ok"

    model = ScriptedModel([reply(call("add", {"add": ["x", "y"]})), "done"])
    result = Agent(model, tools=[add], state=Cart()).run_sync("go")
    assert result.state is not None and result.state["items"] == ["x", "y"]
    (args,) = seen
    assert args["add"] == ["x", "y"]  # cleared by the tool, not in the contract's copy
    with pytest.raises(TypeError):
        args["add"] = []


def test_arguments_that_cannot_be_copied_fail_closed() -> None:
    class Unpicklable:
        def __deepcopy__(self, memo: Any) -> Any:
            msg = "no copies"
            raise RuntimeError(msg)

    from legato.contracts._session import admitted

    with pytest.raises(ContractViolation, match="cannot be copied"):
        admitted({"x": Unpicklable()}, tool="t")


# -- writes need a postcondition, or an explicit opt-in --------------------------------------


class Account(BaseModel):
    balance: int = 100


def set_balance_body(ctx: RunContext[Any], value: int) -> str:
    """Set the balance."""
    assert ctx.state is not None
    ctx.state["balance"] = value
    return "ok"


def test_writes_without_ensures_is_a_definition_error() -> None:
    with pytest.raises(ToolDefinitionError, match="unchecked_writes=True"):
        tool(writes=["balance"])(set_balance_body)
    with pytest.raises(ToolDefinitionError, match="without ensures"):
        contract(writes=["balance"])
    with pytest.raises(ToolDefinitionError, match="writes nothing"):
        tool(unchecked_writes=True)(set_balance_body)


def test_a_contract_assembled_without_ensures_is_refused_at_run_start() -> None:
    # built in ways no keyword check sees: a decorator, a hand-made contract value
    decorated = requires(lambda state, args: True, writes=["balance"])(tool(set_balance_body))
    handmade = Tool.from_function(
        set_balance_body, contract=Conditions(writes=frozenset({"balance"}))
    )
    for unchecked in (decorated, handmade):
        model = ScriptedModel([reply(call("set_balance_body", {"value": -1_000_000})), "x"])
        agent = Agent(model, tools=[unchecked], state=Account())
        with pytest.raises(ToolDefinitionError, match="set_balance_body"):
            agent.run_sync("go")
        assert model.requests == []  # refused before the first model call


def balance_run(setter: Tool) -> int:
    model = ScriptedModel([reply(call("set_balance_body", {"value": -1_000_000})), "x"])
    result = Agent(model, tools=[setter], state=Account()).run_sync("go")
    assert result.state is not None
    return int(result.state["balance"])


def test_a_postcondition_keeps_a_type_valid_but_wrong_value_out() -> None:
    checked = tool(writes=["balance"], ensures=at_least("balance", 0))(set_balance_body)
    assert balance_run(checked) == 100


def test_twin_with_the_explicit_opt_in_any_type_valid_value_commits() -> None:
    opted_in = tool(writes=["balance"], unchecked_writes=True)(set_balance_body)
    assert opted_in.contract is not None
    assert balance_run(opted_in) == -1_000_000


# -- arguments an approver edited are the ones checked ---------------------------------------


def test_an_approvers_edit_is_checked_against_the_preconditions() -> None:
    from legato.approvals import ApprovalPolicy, CallbackApprover, Edit, Rule

    ran: list[int] = []

    @tool(
        side_effects="irreversible",
        requires=at_least("balance", arg("amount")),
        ensures=decreased_by("balance", arg("amount")),
        writes=["balance"],
    )
    def pay(ctx: RunContext[Any], amount: int) -> str:
        """Pay out."""
        assert ctx.state is not None
        ran.append(amount)
        ctx.state["balance"] -= amount
        return "paid"

    def run_with(edit_to: int) -> int:
        policy = ApprovalPolicy(
            rules=[Rule("pay", "ask")],
            handler=CallbackApprover(lambda r: Edit(arguments={"amount": edit_to})),
        )
        model = ScriptedModel([reply(call("pay", {"amount": 10})), "done"])
        result = Agent(model, tools=[pay], state=Account(), approvals=policy).run_sync("pay 10")
        assert result.state is not None
        return int(result.state["balance"])

    assert run_with(1000) == 100  # the edit overdraws: refused before the tool runs
    assert ran == []
    assert run_with(30) == 70  # a valid edit runs and commits against the edited amount
    assert ran == [30]
