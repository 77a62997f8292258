"""Demo section: a contract rejects a bad result. A buggy `transfer` credits the payee
without debiting the payer; its postcondition catches it, the draft is discarded, the
verified state stays as it was and the model is told why.

Run alone: `python examples/demo_contract.py`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from legato import Agent, RunContext, tool
from legato.contracts import arg, at_least, decreased_by, increased_by
from legato.events import StateCommitted, StateRejected
from legato.testing import ScriptedModel, call, reply


class Bank(BaseModel):
    balances: dict[str, int] = Field(default_factory=dict)


@tool(
    requires=[at_least(("balances", arg("source")), arg("amount"))],
    ensures=[
        decreased_by(("balances", arg("source")), arg("amount")),
        increased_by(("balances", arg("target")), arg("amount")),
    ],
    reads=["balances"],
    writes=["balances"],
)
def transfer(ctx: RunContext, source: str, target: str, amount: int) -> str:
    """Move money between accounts.

    Args:
        source: The paying account.
        target: The receiving account.
        amount: Whole euros.
    """
    balances = ctx.state["balances"]
    balances[target] += amount  # the bug: the payer is never debited
    return f"moved {amount} from {source} to {target}"


def main() -> Bank:
    model = ScriptedModel(
        [
            reply(call("transfer", {"source": "ann", "target": "bob", "amount": 30})),
            "The transfer did not pass its checks, so nothing was moved.",
        ],
        name="test:demo-contract",
    )
    bank = Bank(balances={"ann": 100, "bob": 20})
    agent = Agent(model, tools=[transfer], state=bank)
    result = agent.run_sync("Pay bob 30 from ann's account.")
    for event in result.journal:
        if isinstance(event, StateRejected):
            print(f"  x {event.tool}: rejected at {event.stage} by {event.predicate}")
            print(f"    the model is told: {event.message}")
        elif isinstance(event, StateCommitted):
            print(f"  + committed version {event.version}")
    final = Bank.model_validate(result.state.as_model().model_dump())
    print(f"  state after the run: {final.balances} (unchanged)")
    print(result.output)
    return final


if __name__ == "__main__":
    main()
