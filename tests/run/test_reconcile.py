"""Effects whose outcome a crash left unknown (admitted, never finished) are reconciled by
their tool's declared kind, never re-run blindly."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from legato import Agent, Tool, tool
from legato._effects_parts import unsafe_switches
from legato.approvals import ApprovalPolicy, Approve, MemoryApprovalStore, Reject
from legato.effects import UNKNOWN_OUTCOME
from legato.events import Journal, ToolCallAdmitted, ToolCallFinished
from legato.exceptions import RunParked
from legato.testing import ScriptedModel, call, reply
from legato.tools import Reconciled, RunContext


class Payments:
    """A payment provider that remembers the idempotency keys it has applied."""

    def __init__(self) -> None:
        self.charges: list[tuple[str, str | None]] = []

    def applied(self, key: str) -> bool:
        return any(k == key for _, k in self.charges)


def _interrupted(tools: list[Tool]) -> Journal:
    """A journal as a crash leaves it: the `pay` call admitted, its effect done, no finish."""
    model = ScriptedModel([reply(call("pay", {"amount": 30})), "paid"])
    journal = Agent(model, tools=tools).run_sync("pay 30").journal
    cut = next(i for i, e in enumerate(journal.events) if isinstance(e, ToolCallAdmitted))
    return Journal(journal.events[: cut + 1])


def _seen(model: ScriptedModel) -> str:
    """Everything the model was shown in its first request (tool results included)."""
    return " ".join(repr(m.parts) for m in model.requests[0].messages)


def _pay_tool(payments: Payments, *, kind: str = "irreversible", reconcile: Any = None) -> Tool:
    @tool(side_effects=kind, reconcile=reconcile)  # type: ignore[arg-type]
    async def pay(ctx: RunContext[None], amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        payments.charges.append((str(amount), ctx.idempotency_key))
        return f"paid {amount}"

    return pay


def test_an_irreversible_call_of_unknown_outcome_asks_a_person() -> None:
    payments = Payments()
    journal = _interrupted([_pay_tool(payments)])
    assert len(payments.charges) == 1
    store = MemoryApprovalStore()
    policy = ApprovalPolicy(store=store)
    agent = Agent(ScriptedModel(["done"]), tools=[_pay_tool(payments)], approvals=policy)
    with pytest.raises(RunParked) as parked:
        agent.resume_sync(journal)
    (request,) = parked.value.parked.requests
    assert request.rule == UNKNOWN_OUTCOME
    assert len(payments.charges) == 1  # not run again while nobody has answered

    asyncio.run(store.decide(request.id, request.token, Reject(message="it ran: receipt 42")))
    model = ScriptedModel(["done"])
    agent = Agent(model, tools=[_pay_tool(payments)], approvals=policy)
    result = agent.resume_sync(parked.value.parked.journal)
    assert result.output == "done"
    assert len(payments.charges) == 1
    assert "it ran: receipt 42" in _seen(model)


def test_a_person_can_say_retry_and_it_runs_with_the_same_key() -> None:
    payments = Payments()
    journal = _interrupted([_pay_tool(payments)])
    store = MemoryApprovalStore()

    async def retry(request: object) -> Approve:
        return Approve()

    policy = ApprovalPolicy(store=store, handler=retry)
    agent = Agent(ScriptedModel(["done"]), tools=[_pay_tool(payments)], approvals=policy)
    assert agent.resume_sync(journal).output == "done"
    assert len(payments.charges) == 2
    assert payments.charges[0][1] == payments.charges[1][1] is not None  # one key


def test_twin_without_dedup_the_payment_runs_again_without_asking() -> None:
    payments = Payments()
    journal = _interrupted([_pay_tool(payments)])
    agent = Agent(ScriptedModel(["done"]), tools=[_pay_tool(payments)])
    with unsafe_switches(dedup=False):
        agent.resume_sync(journal)
    assert len(payments.charges) == 2


def test_a_reconcile_hook_that_finds_the_effect_keeps_it_from_running_again() -> None:
    payments = Payments()

    def reconcile(key: str, arguments: Mapping[str, Any]) -> Reconciled:
        return Reconciled(ran=payments.applied(key), result=f"already paid {arguments['amount']}")

    journal = _interrupted([_pay_tool(payments, reconcile=reconcile)])
    model = ScriptedModel(["done"])
    agent = Agent(model, tools=[_pay_tool(payments, reconcile=reconcile)])
    assert agent.resume_sync(journal).output == "done"
    assert len(payments.charges) == 1
    assert "already paid 30" in _seen(model)


def test_a_reconcile_hook_that_finds_nothing_lets_it_run_once_more() -> None:
    payments = Payments()
    journal = _interrupted([_pay_tool(payments)])
    payments.charges.clear()  # the provider never received it

    async def reconcile(key: str, arguments: Mapping[str, Any]) -> Reconciled:
        return Reconciled(ran=payments.applied(key))

    agent = Agent(ScriptedModel(["done"]), tools=[_pay_tool(payments, reconcile=reconcile)])
    result = agent.resume_sync(journal)
    assert len(payments.charges) == 1
    finished = [e for e in result.journal if isinstance(e, ToolCallFinished)]
    assert [e.outcome for e in finished] == ["ok"]


def test_an_idempotent_call_runs_again_with_the_same_idempotency_key() -> None:
    payments = Payments()
    journal = _interrupted([_pay_tool(payments, kind="idempotent")])
    agent = Agent(ScriptedModel(["done"]), tools=[_pay_tool(payments, kind="idempotent")])
    agent.resume_sync(journal)
    assert len(payments.charges) == 2
    keys = {k for _, k in payments.charges}
    assert len(keys) == 1 and None not in keys
