"""Budgets: reservation, settlement, limits per resource, children, and fan-out."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from legato import Agent, tool
from legato.approvals import ApprovalDesk, ApprovalPolicy, MemoryApprovalStore, Rule
from legato.budgets import Budget, BudgetLimits, Prices, Spend, nested_budget
from legato.events import (
    Lineage,
    ModelResponded,
    RefusalReason,
    RunEvent,
    RunFailed,
    SpawnFinished,
    ToolCallAdmitted,
    ToolCallRefused,
)
from legato.exceptions import BudgetExceeded, ConfigurationError, PriceUnknown, RunParked
from legato.messages import Message, ModelResponse, Usage
from legato.models import ModelRequest, ModelSettings
from legato.security import Allow, Block, Hook, HookContext, RequestOutcome, ResponseOutcome
from legato.testing import FunctionModel, ScriptedModel, call, estimate_usage, reply

PRICES = Prices(input=3.0, output=15.0)


def test_reserve_settle_release_and_the_figures_of_the_error() -> None:
    budget = Budget(model_calls=3, output_tokens=1000)
    first = budget.reserve(Spend(model_calls=1, output_tokens=600))
    with pytest.raises(BudgetExceeded) as info:
        budget.reserve(Spend(model_calls=1, output_tokens=600))
    error = info.value
    assert (error.resource, error.limit, error.used, error.reserved, error.requested) == (
        "output_tokens",
        1000,
        0,
        600,
        600,
    )
    assert "limit 1000" in str(error)
    first.settle(Spend(model_calls=1, output_tokens=250))
    assert budget.used.output_tokens == 250 and budget.reserved == Spend()
    second = budget.reserve(Spend(model_calls=1, output_tokens=600))
    second.release()
    assert budget.remaining().output_tokens == 750
    assert budget.remaining().model_calls == 2


def test_dollar_limits_without_prices_or_an_estimate_need_a_priced_model() -> None:
    unpriced = Budget(dollars=1.0)  # no prices: the model's own price table prices calls
    with pytest.raises(PriceUnknown, match="prices="):
        unpriced.model_call_worst_case(input_tokens=10, max_tokens=5)
    with pytest.raises(ConfigurationError, match="negative"):
        BudgetLimits(steps=-1)
    estimated = Budget(dollars=0.1, call_estimate=0.04)
    assert estimated.model_call_worst_case(input_tokens=10, max_tokens=5).dollars == 0.04


def test_worst_case_uses_max_tokens_and_prices() -> None:
    budget = Budget(dollars=1.0, prices=PRICES, input_margin=1.0)
    worst = budget.model_call_worst_case(input_tokens=1000, max_tokens=2000)
    assert worst.dollars == pytest.approx((1000 * 3 + 2000 * 15) / 1e6)
    assert budget.model_call_worst_case(input_tokens=1, max_tokens=None).output_tokens == 4096


def test_agent_run_stops_with_budget_exceeded_on_model_calls() -> None:
    model = FunctionModel(lambda r: reply(call("ping")))

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    agent = Agent(model, tools=[ping], budget=BudgetLimits(model_calls=3))
    with pytest.raises(BudgetExceeded) as info:
        agent.run_sync("go")
    assert info.value.resource == "model_calls" and info.value.used == 3
    assert len(model.requests) == 3  # the fourth call was never made


def test_tool_call_limit_stops_the_run_before_the_call() -> None:
    ran: list[int] = []

    @tool(side_effects="irreversible")
    def act(n: int) -> str:
        """Act."""
        ran.append(n)
        return "ok"

    model = ScriptedModel([reply(call("act", {"n": 1})), reply(call("act", {"n": 2})), "done"])
    agent = Agent(model, tools=[act])
    with pytest.raises(BudgetExceeded, match="tool_calls"):
        agent.run_sync("go", budget=BudgetLimits(tool_calls=1))
    assert ran == [1]


def test_per_run_limits_make_a_fresh_budget_each_run_and_a_budget_object_is_shared() -> None:
    agent = Agent(FunctionModel(lambda r: "hi"), budget=BudgetLimits(model_calls=1))
    agent.run_sync("one")
    agent.run_sync("two")  # a fresh budget per run
    shared = Budget(model_calls=1)
    agent.run_sync("three", budget=shared)
    with pytest.raises(BudgetExceeded):
        agent.run_sync("four", budget=shared)


def test_failed_run_journals_the_budget_error() -> None:
    agent = Agent(FunctionModel(lambda r: "hi"))
    budget = Budget(model_calls=0)
    events: list[RunEvent] = []

    def consume() -> None:
        events.extend(agent.stream_sync("x", budget=budget))

    with pytest.raises(BudgetExceeded):
        consume()
    assert isinstance(events[-1], RunFailed) and events[-1].error_type == "BudgetExceeded"


def test_split_moves_amounts_to_a_child_and_close_returns_the_rest() -> None:
    parent = Budget(dollars=1.0, model_calls=10, prices=PRICES)
    child = parent.split(dollars=0.4, model_calls=4)
    assert parent.remaining().dollars == pytest.approx(0.6)
    with pytest.raises(BudgetExceeded):  # the parent cannot spend what it moved
        parent.reserve(Spend(dollars=0.7))
    with pytest.raises(BudgetExceeded):  # the child cannot spend more than it got
        child.reserve(Spend(dollars=0.5))
    child.charge(Spend(dollars=0.1, model_calls=1))
    used = child.close()
    assert used.dollars == pytest.approx(0.1)
    assert parent.used.dollars == pytest.approx(0.1)
    assert parent.remaining().dollars == pytest.approx(0.9)
    with pytest.raises(ConfigurationError):
        child.reserve(Spend(dollars=0.01))
    with pytest.raises(BudgetExceeded):
        parent.split(dollars=2.0)
    with pytest.raises(ConfigurationError):
        parent.split(euros=1.0)


def test_resources_a_child_was_not_given_are_shared_with_the_parent() -> None:
    parent = Budget(model_calls=3)
    child = parent.split(steps=10)
    child.charge(Spend(model_calls=2))
    assert parent.used.model_calls == 2
    with pytest.raises(BudgetExceeded):
        child.reserve(Spend(model_calls=2))
    child.close()
    assert parent.remaining().model_calls == 1


def test_a_budget_with_min_output_fits_calls_to_what_is_left() -> None:
    request = ModelRequest(messages=(Message.user("x" * 400),))  # about 100 input tokens
    fitting = Budget(tokens=1000, min_output=200)
    sent, hold = fitting.reserve_model_call(request)
    assert sent.settings.max_tokens == 1000 - 125  # the 4,096 reserve lowered to what fits
    hold.settle(Spend(tokens=500))
    sent, hold = fitting.reserve_model_call(request)
    assert sent.settings.max_tokens == 500 - 125
    hold.release()
    asked = ModelRequest(messages=request.messages, settings=ModelSettings(max_tokens=300))
    sent, hold = fitting.reserve_model_call(asked)  # a smaller cap that fits is kept
    assert sent.settings.max_tokens == 300
    hold.settle(Spend(tokens=300))
    with pytest.raises(BudgetExceeded, match="this call needs"):  # 75 fit, below the floor
        fitting.reserve_model_call(request)
    # without min_output the same budget refuses the call its default cap does not fit
    with pytest.raises(BudgetExceeded):
        Budget(tokens=1000).reserve_model_call(request)


def test_a_closed_child_settles_with_its_parent_when_its_last_hold_ends() -> None:
    root = Budget(steps=10)
    child = root.split(steps=6)
    grandchild = child.split(steps=4)  # held in the child
    child.charge(Spend(steps=1))
    child.close()
    assert root.remaining().steps == 4  # the grandchild's share is not handed out again
    grandchild.charge(Spend(steps=1))
    grandchild.close()
    assert root.remaining().steps == 8 and root.used.steps == 2
    assert root.reserved == Spend()


def test_wall_time() -> None:
    budget = Budget(wall_time=0.0)
    budget.reserve(Spend(steps=1))  # starts the clock; any later moment is past the limit
    time.sleep(0.001)
    with pytest.raises(BudgetExceeded, match="wall_time"):
        budget.reserve(Spend(steps=1))


# -- fan-out: the reservation and its twin, the naive check ------------------------------------------


@tool
async def lookup(q: str) -> str:
    """Read-only lookup."""
    return q


def child_model(rng: random.Random) -> FunctionModel:
    turns = rng.randint(2, 4)

    async def answer(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(rng.uniform(0.0005, 0.002))
        done = sum(1 for m in request.messages if m.role == "assistant")
        prompt = estimate_usage(request, reply("")).input_tokens
        usage = Usage(input_tokens=prompt, output_tokens=rng.randint(100, 500), requests=1)
        cost = PRICES.cost(usage.input_tokens, usage.output_tokens)
        if done < turns:
            return reply(call("lookup", {"q": str(done)}), usage=usage, cost=cost)
        return reply("done", usage=usage, cost=cost)

    return FunctionModel(answer)


class NaiveLimit(Hook):
    """Check-then-act: refuse once the limit is spent; count costs when calls return."""

    def __init__(self, limit: float) -> None:
        self.limit, self.spent = limit, 0.0

    async def before_model_request(self, request: ModelRequest, ctx: HookContext) -> RequestOutcome:
        return Block("spent") if self.spent >= self.limit else Allow()

    async def after_model_response(
        self, response: ModelResponse, ctx: HookContext
    ) -> ResponseOutcome:
        self.spent += response.cost or 0.0
        return Allow()


async def fan_out(seed: int, *, reserve: bool, limit: float) -> float:
    rng = random.Random(seed)
    budget, naive = Budget(dollars=limit, prices=PRICES), NaiveLimit(limit)
    settings = ModelSettings(max_tokens=500)
    runs = [
        Agent(
            child_model(random.Random(rng.random())),
            tools=[lookup],
            model_settings=settings,
            hooks=[] if reserve else [naive],
        ).run("go", budget=budget if reserve else None)
        for _ in range(6)
    ]
    await asyncio.gather(*runs, return_exceptions=True)
    return budget.used.dollars if reserve else naive.spent


async def test_fan_out_reservation_never_overshoots_and_the_naive_check_does() -> None:
    limit = 0.03
    reserved = [await fan_out(s, reserve=True, limit=limit) for s in range(30)]
    naive = [await fan_out(s, reserve=False, limit=limit) for s in range(30)]
    over_reserved = sum(s > limit for s in reserved)
    over_naive = sum(s > limit for s in naive)
    print(f"\nfan-out, 30 trials: naive overshoots {over_naive}/30, reservation {over_reserved}/30")
    assert over_reserved == 0
    assert over_naive > 0


async def test_fan_out_with_enough_budget_refuses_nothing() -> None:
    budget = Budget(dollars=10.0, prices=PRICES)
    settings = ModelSettings(max_tokens=500)
    rng = random.Random(3)
    runs = [
        Agent(
            child_model(random.Random(rng.random())), tools=[lookup], model_settings=settings
        ).run("go", budget=budget)
        for _ in range(6)
    ]
    results = await asyncio.gather(*runs)
    assert all(r.output == "done" for r in results)
    assert budget.reserved == Spend() and budget.used.model_calls == sum(
        r.usage.requests for r in results
    )


def test_a_failed_model_call_gives_its_reservation_back() -> None:
    def broken(request: ModelRequest) -> str:
        raise RuntimeError("provider down")

    budget = Budget(dollars=1.0, prices=PRICES, model_calls=5)
    with pytest.raises(RuntimeError, match="provider down"):
        Agent(FunctionModel(broken)).run_sync("go", budget=budget)
    assert budget.reserved == Spend() and budget.used == Spend()


# -- a budget that draws from another (sub-agents) ----------------------------------------------------


def test_a_budget_drawing_from_a_parent_holds_both_limits() -> None:
    parent = Budget(model_calls=5, output_tokens=1000)
    child = Budget(BudgetLimits(model_calls=3), parent=parent)
    assert child.draws_from(parent) and not parent.draws_from(child)
    held = child.reserve(Spend(model_calls=1, output_tokens=600))
    assert parent.reserved == Spend(model_calls=1, output_tokens=600)
    # the parent's output limit is the tighter one here: refused, and nothing held anywhere
    with pytest.raises(BudgetExceeded) as info:
        child.reserve(Spend(model_calls=1, output_tokens=600))
    assert info.value.resource == "output_tokens" and info.value.limit == 1000
    assert child.reserved == Spend(model_calls=1, output_tokens=600)
    assert parent.reserved == Spend(model_calls=1, output_tokens=600)
    held.settle(Spend(model_calls=1, output_tokens=100))
    assert parent.used == child.used == Spend(model_calls=1, output_tokens=100)
    assert parent.reserved == Spend()
    # the child's own call limit is the tighter one now
    child.charge(Spend(model_calls=2))
    with pytest.raises(BudgetExceeded) as info:
        child.reserve(Spend(model_calls=1))
    assert (info.value.resource, info.value.limit) == ("model_calls", 3)
    assert child.remaining().model_calls == 0 and parent.remaining().model_calls == 2
    # what the parent has left bounds what the child can still reserve
    assert child.remaining().output_tokens == 900
    parent.charge(Spend(output_tokens=850))
    assert child.remaining().output_tokens == 50


def test_a_drawing_budget_prices_calls_like_its_parent() -> None:
    parent = Budget(dollars=0.01, prices=PRICES)
    child = Budget(BudgetLimits(model_calls=10), parent=parent)
    worst = child.model_call_worst_case(input_tokens=100, max_tokens=400)
    assert worst.dollars == pytest.approx(PRICES.cost(125, 400))
    reservations = 0
    with pytest.raises(BudgetExceeded, match="dollars"):
        while True:
            child.reserve(worst)
            reservations += 1
    assert reservations == int(0.01 // worst.dollars)


def test_nested_budget_combines_a_child_budget_with_its_parents() -> None:
    parent = Budget(model_calls=4)
    assert nested_budget(None, None) is None
    assert nested_budget(None, parent) is parent
    own_limits = nested_budget(BudgetLimits(model_calls=2), None)
    assert own_limits is not None and own_limits.limits.model_calls == 2
    nested = nested_budget(BudgetLimits(model_calls=10), parent)
    assert nested is not None and nested.draws_from(parent)
    moved = parent.split(tool_calls=1)
    assert nested_budget(moved, parent) is moved  # already spends from the parent
    assert nested_budget(parent, moved) is moved  # the parent's spending reaches `parent`
    moved.close()
    # a budget object shared by several runs is left as it is; the child draws from both
    shared = Budget(model_calls=2)
    joint = nested_budget(shared, parent)
    assert joint is not None and joint not in (shared, parent)
    assert joint.draws_from(shared) and joint.draws_from(parent)
    joint.charge(Spend(model_calls=1))
    assert shared.used.model_calls == 1 and parent.used.model_calls == 1
    other = Budget(model_calls=1)
    other.charge(Spend(model_calls=1))
    parent_full = nested_budget(Budget(model_calls=9), other)
    assert parent_full is not None
    with pytest.raises(BudgetExceeded):
        parent_full.reserve(Spend(model_calls=1))
    assert parent_full.reserved == Spend()  # refused by the second source: the first holds nothing
    joint.charge(Spend(model_calls=1))
    with pytest.raises(BudgetExceeded):  # the shared budget's limit is reached first
        joint.reserve(Spend(model_calls=1))
    assert parent.reserved == Spend() and parent.used.model_calls == 2


# -- a resumed run ------------------------------------------------------------------------------------


def _nothing_spent(self: Budget, events: object) -> Spend:
    del self, events
    return Spend()


@pytest.mark.parametrize("counted", [True, False])
def test_a_resumed_run_counts_what_it_spent_before_it_parked(
    counted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not counted:  # the twin: the resumed run's fresh budget forgets the first part
        monkeypatch.setattr(Budget, "spent_in", _nothing_spent)
    sent: list[str] = []

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    @tool(side_effects="irreversible")
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return "sent"

    store = MemoryApprovalStore()
    model = ScriptedModel(
        [
            reply(call("ping")),
            reply(call("send_email", {"to": "bob"})),  # needs approval: the run parks
            reply(call("ping")),
            "done",
        ]
    )
    agent = Agent(
        model,
        tools=[ping, send_email],
        approvals=ApprovalPolicy(rules=[Rule("send_email", "ask")], store=store),
        budget=BudgetLimits(model_calls=3, tool_calls=3),
    )
    with pytest.raises(RunParked) as info:
        agent.run_sync("go")  # two model calls and one tool call so far
    parked = info.value.parked
    request = parked.request_for("send_email")
    asyncio.run(
        ApprovalDesk(store).decide(request.id, {"token": request.token, "verdict": "approve"})
    )
    if counted:
        # 2 + 1 model calls fit; the 4th, which would answer "done", is refused before it is made
        with pytest.raises(BudgetExceeded) as exceeded:
            asyncio.run(agent.resume(parked.journal.to_jsonl()))
        assert exceeded.value.resource == "model_calls" and exceeded.value.used == 3
        assert len(model.requests) == 3
    else:
        assert asyncio.run(agent.resume(parked.journal.to_jsonl())).output == "done"
        assert len(model.requests) == 4  # one more model call than the limit allows
    assert sent == ["bob"]


def test_spent_in_reads_model_calls_tool_calls_and_each_childs_last_report() -> None:
    def responded(tokens_in: int, tokens_out: int) -> ModelResponded:
        usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out, requests=1)
        return ModelResponded(
            step=1, response=ModelResponse(message=Message.assistant("x"), usage=usage)
        )

    def refused(reason: RefusalReason) -> ToolCallRefused:
        return ToolCallRefused(
            step=1, call_id=reason, tool="t", effect_id="e", reason=reason, message="no"
        )

    def finished(child: str, requests: int, steps: int) -> SpawnFinished:
        lineage = Lineage(
            run_id=child, parent_run_id="p", parent_step=1, parent_call_id="c", agent="a"
        )
        usage = Usage(input_tokens=10 * requests, output_tokens=requests, requests=requests)
        return SpawnFinished(lineage=lineage, outcome="ok", usage=usage, steps=steps)

    events = [
        responded(100, 20),
        ToolCallAdmitted(step=1, call_id="a", tool="t", effect_id="e", epoch=0),
        refused("denied"),  # refused by the rules after it was charged: spent
        refused("held"),  # parked for approval: counted when admitted on resume
        refused("cancelled"),  # stopped at the fence: not spent
        finished("child-1", requests=2, steps=2),  # cancelled at a park ...
        finished("child-1", requests=5, steps=5),  # ... resumed: its last report covers all
        finished("child-2", requests=1, steps=1),
        responded(50, 10),
    ]
    budget = Budget(BudgetLimits(prices=Prices(input=1.0, output=2.0)))
    spent = budget.spent_in(events)
    assert spent.model_calls == 2 + 5 + 1
    assert spent.tool_calls == 2
    assert spent.steps == 2 + 5 + 1
    assert (spent.input_tokens, spent.output_tokens) == (150 + 50 + 10, 30 + 5 + 1)
    assert spent.dollars == pytest.approx((210 * 1.0 + 36 * 2.0) / 1e6)
    budget.count_spent(spent)
    assert budget.used == spent
