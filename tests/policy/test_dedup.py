"""De-duplication: a replayed or re-delivered call never runs its effect twice."""

from __future__ import annotations

import asyncio

import pytest

from legato import Agent, Tool, tool
from legato.approvals import ApprovalPolicy, Approve, CallbackApprover, Rule
from legato.effects import UNKNOWN_OUTCOME, effect_id, unsafe_switches
from legato.events import Journal, ToolCallAdmitted, ToolCallFinished, ToolCallRefused
from legato.exceptions import RunParked
from legato.messages import ToolCallPart
from legato.security import AdmissionOutcome, Allow, Block, Hook, HookContext, ToolAdmission
from legato.testing import ScriptedModel, call, reply


def counting_tools(counts: dict[str, int]) -> list[Tool]:
    @tool(side_effects="irreversible")
    async def pay(amount: int) -> str:
        """Pay."""
        counts["pay"] = counts.get("pay", 0) + 1
        return f"paid {amount}"

    @tool(side_effects="idempotent")
    async def put(key: str) -> str:
        """Store."""
        counts["put"] = counts.get("put", 0) + 1
        return f"stored {key}"

    return [pay, put]


def test_effect_id_is_stable_and_binds_everything() -> None:
    a = ToolCallPart.from_arguments(id="c1", name="pay", arguments={"amount": 5, "to": "x"})
    same = ToolCallPart.from_arguments(id="c1", name="pay", arguments={"to": "x", "amount": 5})
    assert effect_id("r", a) == effect_id("r", same)  # canonical: key order does not matter
    others = [
        effect_id("r2", a),
        effect_id(
            "r",
            ToolCallPart.from_arguments(id="c2", name="pay", arguments={"amount": 5, "to": "x"}),
        ),
        effect_id(
            "r",
            ToolCallPart.from_arguments(id="c1", name="pay", arguments={"amount": 6, "to": "x"}),
        ),
    ]
    assert effect_id("r", a) not in others


async def crashed_journal(counts: dict[str, int], cut_after: type) -> tuple[Agent, Journal]:
    """Run to the end, then keep the journal only up to the first `cut_after` event."""
    model = ScriptedModel([reply(call("pay", {"amount": 5}), call("put", {"key": "k"})), "done"])
    agent = Agent(model, tools=counting_tools(counts))
    result = await agent.run("go")
    events = list(result.journal)
    index = max(i for i, e in enumerate(events) if isinstance(e, cut_after))
    return Agent(ScriptedModel(["done"]), tools=counting_tools(counts)), Journal(
        events[: index + 1]
    )


async def test_resume_after_crash_mid_effect_does_not_rerun_the_irreversible_effect() -> None:
    counts: dict[str, int] = {}
    agent, journal = await crashed_journal(counts, ToolCallAdmitted)  # admitted, not finished
    assert counts == {"pay": 1, "put": 1}
    with pytest.raises(RunParked) as parked:  # a person says what happened to the payment
        await agent.resume(journal)
    assert [r.tool for r in parked.value.parked.requests] == ["pay"]
    assert parked.value.parked.requests[0].rule == UNKNOWN_OUTCOME
    assert counts == {"pay": 1, "put": 1}  # the question holds the idempotent sibling too


async def test_resume_after_finished_calls_reuses_them() -> None:
    counts: dict[str, int] = {}
    agent, journal = await crashed_journal(counts, ToolCallFinished)
    resumed = await agent.resume(journal)
    assert resumed.output == "done"
    assert counts == {"pay": 1, "put": 1}


async def test_without_dedup_the_replayed_effect_runs_twice() -> None:
    """The twin: switch de-duplication off and the crash replay pays twice."""
    counts: dict[str, int] = {}
    agent, journal = await crashed_journal(counts, ToolCallAdmitted)
    with unsafe_switches(dedup=False):
        await agent.resume(journal)
    assert counts["pay"] == 2


@pytest.mark.parametrize("dedup", [True, False])
def test_redelivered_call_reuses_the_recorded_result(dedup: bool) -> None:
    counts: dict[str, int] = {}
    same = call("pay", {"amount": 5}, id="call_pay")
    model = ScriptedModel([reply(same), reply(same), "done"])  # the provider re-delivers it
    with unsafe_switches(dedup=dedup):
        result = Agent(model, tools=counting_tools(counts)).run_sync("go")
    if dedup:
        assert counts["pay"] == 1
        finished = [e for e in result.journal if isinstance(e, ToolCallFinished)]
        assert [f.result.text for f in finished] == ["paid 5", "paid 5"]
        assert any(
            isinstance(e, ToolCallRefused) and e.reason == "duplicate" for e in result.journal
        )
    else:
        assert counts["pay"] == 2


async def test_a_redelivered_asked_call_does_not_hold_its_siblings_forever() -> None:
    counts: dict[str, int] = {}
    same = call("pay", {"amount": 5}, id="call_pay")
    model = ScriptedModel([reply(same), reply(same, call("put", {"key": "k"})), "done"])
    policy = ApprovalPolicy(
        rules=[Rule("pay", "ask")], handler=CallbackApprover(lambda r: Approve())
    )
    async with asyncio.timeout(10):
        result = await Agent(model, tools=counting_tools(counts), approvals=policy).run("go")
    assert result.output == "done"
    assert counts == {"pay": 1, "put": 1}


async def test_a_blocked_asked_call_does_not_hold_its_siblings_forever() -> None:
    counts: dict[str, int] = {}

    class NoPay(Hook):
        async def before_tool_admission(
            self, admission: ToolAdmission, ctx: HookContext
        ) -> AdmissionOutcome:
            return Block("no payments") if admission.call.name == "pay" else Allow()

    model = ScriptedModel([reply(call("pay", {"amount": 1}), call("put", {"key": "k"})), "done"])
    policy = ApprovalPolicy(rules=[Rule("pay", "ask")])
    async with asyncio.timeout(10):
        await Agent(model, tools=counting_tools(counts), approvals=policy, hooks=[NoPay()]).run(
            "go"
        )
    assert counts == {"put": 1}
