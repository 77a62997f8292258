"""Budgets under parallel fan-out: a naive check overshoots, reservation does not.

30 trials. In each, a parent hands one dollar budget to 8 sub-agents that run
concurrently; each makes several model calls (with a tool call between), each call taking a
few milliseconds and costing up to `max_tokens` x price. The naive check ("stop if we
have spent the limit", then add the cost when the call returns) lets concurrent calls
pass the check together; `legato.budgets.Budget` reserves each call's worst case first.

Then the same fan-out as a real tree of runs: a parent given the budget spawns the 8
sub-agents in the background with `legato.spawn.spawn_tools`; they draw from the
parent's budget (every call reserved there first). The twin switches that off
(`unsafe_switches(tree_budget=False)`, test-only), as before the fix: the children spend
beside the parent's budget. The spend is what the models billed, across the whole tree.

Last, a child's token share: a spawned child with a 3,000-token share asks three helpers
(`agent.as_tool`) at once, each looping until the share stops it. The share is a `Budget`
split from the parent's, so every helper call is reserved in it before it is sent; the
twin (`unsafe_switches(reserve_worst_case=False)`, test-only) checks only what was spent,
the way a share was enforced before (spent below the limit, then call). The tokens are
what the models reported, across the child's subtree.

Run: python bench/budgets.py
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

from legato import Agent, tool
from legato.budgets import Budget, Prices
from legato.effects import unsafe_switches
from legato.events import SpawnFinished
from legato.exceptions import BudgetExceeded, HookBlocked
from legato.messages import ModelResponse, Usage
from legato.models import ModelRequest, ModelSettings
from legato.security import Allow, Block, Hook, HookContext, RequestOutcome, ResponseOutcome
from legato.spawn import BudgetShare, ChildLimits, SpawnLimits, spawn_tools
from legato.testing import FunctionModel, call, estimate_usage, reply

PRICES = Prices(input=3.0, output=15.0)  # dollars per million tokens
LIMIT = 0.05
MAX_TOKENS = 600
CHILDREN = 8
TRIALS = 30


@tool
async def lookup(q: str) -> str:
    """Read-only lookup."""
    return f"result for {q}"


Answer = Callable[[ModelRequest], Awaitable[ModelResponse]]


def sub_model(rng: random.Random, turns: int) -> FunctionModel:
    return FunctionModel(sub_answer(rng, turns))


def sub_answer(rng: random.Random, turns: int) -> Answer:
    async def answer(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(rng.uniform(0.001, 0.004))  # the provider takes a moment
        done = sum(1 for m in request.messages if m.role == "assistant")
        output = rng.randint(200, MAX_TOKENS)
        prompt = estimate_usage(request, reply("")).input_tokens  # as the provider counts it
        usage = Usage(input_tokens=prompt, output_tokens=output, requests=1)
        cost = PRICES.cost(usage.input_tokens, usage.output_tokens)
        if done < turns:
            return reply(call("lookup", {"q": f"q{done}"}), usage=usage, cost=cost)
        return reply("done", usage=usage, cost=cost)

    return answer


class NaiveLimit(Hook):
    """The naive check: refuse a call once spending reached the limit; add costs afterwards."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.spent = 0.0

    async def before_model_request(self, request: ModelRequest, ctx: HookContext) -> RequestOutcome:
        if self.spent >= self.limit:
            return Block("budget spent")
        return Allow()

    async def after_model_response(
        self, response: ModelResponse, ctx: HookContext
    ) -> ResponseOutcome:
        self.spent += response.cost or 0.0
        return Allow()


async def trial(seed: int, *, reserve: bool) -> float:
    """One fan-out; returns the dollars actually spent."""
    rng = random.Random(seed)
    settings = ModelSettings(max_tokens=MAX_TOKENS)
    budget = Budget(dollars=LIMIT, prices=PRICES)
    naive = NaiveLimit(LIMIT)
    runs: list[Awaitable[object]] = []
    for i in range(CHILDREN):
        model = sub_model(random.Random(rng.random()), turns=rng.randint(2, 5))
        if reserve:
            child = Agent(model, tools=[lookup], name=f"child{i}", model_settings=settings)
            runs.append(child.run("work", budget=budget))
        else:
            child = Agent(
                model, tools=[lookup], name=f"child{i}", model_settings=settings, hooks=[naive]
            )
            runs.append(child.run("work"))
    results = await asyncio.gather(*runs, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, BudgetExceeded | HookBlocked):
            raise r
    return budget.used.dollars if reserve else naive.spent


class Billed:
    """Every model of one tree adds what each call cost here (what the provider bills)."""

    def __init__(self) -> None:
        self.dollars = 0.0

    def model(self, answer: Answer) -> FunctionModel:
        async def billed(request: ModelRequest) -> ModelResponse:
            response = await answer(request)
            self.dollars += response.cost or 0.0
            return response

        return FunctionModel(billed)


async def tree_trial(seed: int, *, protect: bool) -> float:
    """One parent spawning the sub-agents in the background; returns the tree's spend."""
    rng = random.Random(seed)
    settings = ModelSettings(max_tokens=MAX_TOKENS)
    billed = Billed()
    turns = [rng.randint(2, 5) for _ in range(CHILDREN)]
    subs = [sub_answer(random.Random(rng.random()), turns=t) for t in turns]
    go = asyncio.Event()

    async def child(request: ModelRequest) -> ModelResponse:
        await go.wait()  # all children start together, once the parent is waiting for them
        task = next(m.text for m in request.messages if m.text.startswith("work on part"))
        return await subs[int(task.split()[-1])](request)

    async def lead(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "assistant")
        usage = Usage(input_tokens=200, output_tokens=100, requests=1)
        cost = PRICES.cost(200, 100)
        if done == 0:
            spawns = [
                call("spawn", {"task": f"work on part {i}", "tools": ["lookup"], "wait": False})
                for i in range(CHILDREN)
            ]
            return reply(*spawns, usage=usage, cost=cost)
        if done == 1:
            go.set()
            return reply(call("wait_children"), usage=usage, cost=cost)
        return reply("done", usage=usage, cost=cost)

    limits = SpawnLimits(
        max_children=CHILDREN,
        budget=BudgetShare(),  # no step share: only the parent's budget limits the tree
        child=ChildLimits(max_steps=10, settings=settings),
    )
    spawner = spawn_tools([lookup], model=billed.model(child), limits=limits)
    parent = Agent(billed.model(lead), tools=[spawner], model_settings=settings)
    budget = Budget(dollars=LIMIT, prices=PRICES)
    try:
        if protect:
            await parent.run("work", budget=budget)
        else:
            with unsafe_switches(tree_budget=False):
                await parent.run("work", budget=budget)
    except BudgetExceeded:
        pass  # the parent's own last call did not fit: the tree spent the budget
    return billed.dollars


SHARE = 3000


async def share_trial(seed: int, *, protect: bool) -> int:
    """Tokens a child's subtree spent on a `SHARE`-token share (three concurrent helpers)."""
    rng = random.Random(seed)
    spent: list[int] = []

    async def helper_answer(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(rng.uniform(0.0005, 0.002))
        cap = request.settings.max_tokens or 200
        usage = Usage(
            input_tokens=estimate_usage(request, reply("")).input_tokens,
            output_tokens=min(cap, rng.randint(50, 200)),
            requests=1,
        )
        spent.append(usage.total_tokens)
        return reply(call("lookup", {"q": str(len(spent))}), usage=usage)

    helper = Agent(
        FunctionModel(helper_answer),
        tools=[lookup],
        name="helper",
        max_steps=200,
        model_settings=ModelSettings(max_tokens=200),
    )
    ask = helper.as_tool(name="ask_helper", description="Ask a helper")

    def child(request: ModelRequest) -> ModelResponse:
        usage = estimate_usage(request, reply("asked"))
        spent.append(usage.total_tokens)
        if request.messages[-1].role == "tool":
            return reply("asked", usage=usage)
        return reply(*[call("ask_helper", {"task": f"job {i}"}) for i in range(3)], usage=usage)

    async def lead(request: ModelRequest) -> ModelResponse:
        if request.messages[-1].role == "tool":
            return reply("done")
        return reply(call("spawn", {"task": "ask", "tools": ["ask_helper"], "max_tokens": SHARE}))

    spawner = spawn_tools([ask], model=FunctionModel(child))
    parent = Agent(FunctionModel(lead), tools=[spawner])
    if protect:
        result = await parent.run("work")
    else:
        with unsafe_switches(reserve_worst_case=False):
            result = await parent.run("work")
    assert any(isinstance(e, SpawnFinished) for e in result.journal)
    return sum(spent)


def report(label: str, spent: list[float]) -> None:
    over = sum(s > LIMIT for s in spent)
    print(
        f"{label}{over}/{TRIALS} trials overshoot (worst ${max(spent):.4f}, "
        f"mean use {sum(spent) / TRIALS / LIMIT:.0%} of the limit)"
    )


async def main() -> None:
    naive = [await trial(seed, reserve=False) for seed in range(TRIALS)]
    reserved = [await trial(seed, reserve=True) for seed in range(TRIALS)]
    print(f"fan-out: {CHILDREN} concurrent sub-agents, limit ${LIMIT}, {TRIALS} trials")
    report("naive check:  ", naive)
    report("reservation:  ", reserved)
    beside = [await tree_trial(seed, protect=False) for seed in range(TRIALS)]
    drawn = [await tree_trial(seed, protect=True) for seed in range(TRIALS)]
    print(f"tree: a parent given the budget spawns {CHILDREN} background sub-agents")
    report("children spend beside the parent's budget (switched off):  ", beside)
    report("children draw from the parent's budget:                    ", drawn)
    print(f"share: a child with a {SHARE:,}-token share asks 3 helpers at once, {TRIALS} trials")
    for label, protect in (("spent below the share, then call", False), ("reserved", True)):
        tokens = [await share_trial(seed, protect=protect) for seed in range(TRIALS)]
        over = sum(t > SHARE for t in tokens)
        print(
            f"{label + ':':36}{over}/{TRIALS} trials over the share "
            f"(worst {max(tokens):,} tokens, mean {sum(tokens) / TRIALS:,.0f})"
        )


if __name__ == "__main__":
    asyncio.run(main())
