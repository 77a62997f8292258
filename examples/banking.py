"""A banking agent whose state changes only through verified transfers.

The state (who is logged in, every balance) is typed and versioned. `transfer` may run only
for the logged-in user's own account with enough money (preconditions), and its result is
committed only when the sender's balance dropped by exactly the amount and the recipient's
rose by it, with nothing else touched (postconditions).

    python examples/banking.py                      # a scripted model, offline
    python examples/banking.py anthropic:claude-sonnet-4-5   # a real model (needs its key)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from pydantic import BaseModel, Field

from legato import Agent, RunContext, RunResult, tool
from legato.contracts import (
    StateOptions,
    arg,
    at_least,
    check,
    decreased_by,
    has,
    increased_by,
    unchanged_except,
)
from legato.models import Model
from legato.testing import ScriptedModel, call, reply


class Bank(BaseModel):
    """The verified facts of the bank."""

    user: str | None = None
    balances: dict[str, int] = Field(default_factory=dict)


@dataclass(kw_only=True)
class Backend:
    """Stands for the bank's real system; `fee` simulates a bug that takes a hidden fee."""

    fee: int = 0
    calls: int = 0


@tool(
    requires=check(
        lambda state, args: args["name"] in state["balances"],
        name="known customer",
        message="there is no customer by that name",
    ),
    ensures=[has("user"), unchanged_except("user")],
    reads=["balances"],
    writes=["user"],
)
def login(ctx: RunContext[Backend], name: str) -> str:
    """Log a customer in.

    Args:
        name: The customer's name.
    """
    assert ctx.state is not None
    ctx.state["user"] = name
    return f"logged in as {name}"


@tool(
    requires=[
        has("user"),
        check(
            lambda state, args: state["user"] == args["source"],
            name="own account",
            message="you can only transfer from the logged-in customer's own account",
        ),
        check(lambda state, args: args["amount"] > 0, name="positive amount"),
        check(lambda state, args: args["source"] != args["target"], name="two accounts"),
        has(("balances", arg("target"))),
        at_least(("balances", arg("source")), arg("amount")),
    ],
    ensures=[
        decreased_by(("balances", arg("source")), arg("amount")),
        increased_by(("balances", arg("target")), arg("amount")),
        unchanged_except(("balances", arg("source")), ("balances", arg("target"))),
    ],
    reads=["user", "balances"],
    writes=["balances"],
    side_effects="irreversible",
)
def transfer(ctx: RunContext[Backend], source: str, target: str, amount: int) -> str:
    """Move money from the logged-in customer's account to another account.

    Args:
        source: The account to take the money from (the logged-in customer).
        target: The account to pay.
        amount: Whole currency units, more than zero.
    """
    assert ctx.state is not None
    ctx.deps.calls += 1
    balances = ctx.state["balances"]
    balances[source] -= amount + ctx.deps.fee
    balances[target] += amount
    return f"moved {amount} from {source} to {target}"


def make_agent(model: Model | str) -> Agent:
    """The banking agent: the state is shown to the model, and it may also read it."""
    return Agent(
        model,
        tools=[login, transfer],
        instructions="You are a bank assistant. Use the tools; never invent balances.",
        state=Bank(balances={"ann": 100, "bob": 20}),
        state_options=StateOptions(read_tool=True, max_rejections=4),
    )


def scripted_model() -> ScriptedModel:
    """A model that logs in, pays bob, then tries to overdraw."""
    return ScriptedModel(
        [
            reply(call("login", {"name": "ann"})),
            reply(call("transfer", {"source": "ann", "target": "bob", "amount": 30})),
            reply(call("transfer", {"source": "ann", "target": "bob", "amount": 500})),
            "Paid bob 30. A second transfer of 500 was refused: not enough money.",
        ]
    )


def run_demo(model: Model | str | None = None, *, backend: Backend | None = None) -> RunResult:
    """Run the demo conversation and return its result."""
    agent = make_agent(model or scripted_model())
    return agent.run_sync(
        "Log me in as ann, pay bob 30, then pay him 500 more.", deps=backend or Backend()
    )


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    result = run_demo(args[0] if args else None)
    print(result.output)
    assert result.state is not None
    print(f"state v{result.state.version}: {result.state.as_model()}")
    for commit in result.state.history("balances"):
        (change,) = commit.changes
        print(f"  v{commit.version} by {commit.tool}: {change.old} -> {change.new}")


if __name__ == "__main__":
    main()
