"""Verified state: a typed, versioned state of trusted facts, and Hoare-style tool contracts.

```python
from pydantic import BaseModel
from legato import Agent, RunContext, tool
from legato.contracts import arg, at_least, decreased_by, has, unchanged_except

class Bank(BaseModel):
    user: str | None = None
    balance: int = 0

@tool(
    requires=[has("user"), at_least("balance", arg("amount"))],
    ensures=[decreased_by("balance", arg("amount")), unchanged_except("balance")],
    writes=["balance"],
)
def withdraw(ctx: RunContext, amount: int) -> str:
    \"\"\"Withdraw money.\"\"\"
    ctx.state["balance"] -= amount
    return "done"

agent = Agent("anthropic:claude-sonnet-4-5", tools=[withdraw], state=Bank(user="ann", balance=50))
```

A tool with a contract runs on a draft of the state. Its preconditions decide whether the
call runs at all; its postconditions, over (old, new, args, result), decide whether the
draft is committed as one new version. Each check returns an explicit outcome: `Allow`,
`Reject(message)` (the model is told) or `Halt(reason)` (the run stops with
`ContractHalt`). Every commit and rejection is a journal event.
"""

from legato.contracts._checks import (
    Arg,
    arg,
    at_least,
    at_most,
    check,
    decreased_by,
    equals,
    greater,
    has,
    increased_by,
    less,
    unchanged_except,
)
from legato.contracts._contract import (
    Allow,
    Check,
    Contract,
    Halt,
    Outcome,
    Reject,
    Verdict,
    contract,
    ensures,
    requires,
)
from legato.contracts._session import StateOptions, StateSession
from legato.contracts._state import Change, Commit, Draft, Snapshot, State

__all__ = [
    "Allow",
    "Arg",
    "Change",
    "Check",
    "Commit",
    "Contract",
    "Draft",
    "Halt",
    "Outcome",
    "Reject",
    "Snapshot",
    "State",
    "StateOptions",
    "StateSession",
    "Verdict",
    "arg",
    "at_least",
    "at_most",
    "check",
    "contract",
    "decreased_by",
    "ensures",
    "equals",
    "greater",
    "has",
    "increased_by",
    "less",
    "requires",
    "unchanged_except",
]
