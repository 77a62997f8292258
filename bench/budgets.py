"""Budgets under parallel fan-out: a naive check overshoots, reservation does not.

30 trials. In each, a parent hands one dollar budget to 8 sub-agents that run
concurrently; each makes several model calls (with a tool call between), each call taking a
few milliseconds and costing up to `max_tokens` x price. The naive check ("stop if we
have spent the limit", then add the cost when the call returns) lets concurrent calls
pass the check together; `legato.budgets.Budget` reserves each call's worst case first.

Run: python bench/budgets.py
"""

from __future__ import annotations

import asyncio
import random

from legato import Agent, tool
from legato.budgets import Budget, Prices
from legato.exceptions import BudgetExceeded, HookBlocked
from legato.messages import ModelResponse, Usage
from legato.models import ModelRequest, ModelSettings
from legato.security import Allow, Block, Hook, HookContext, RequestOutcome, ResponseOutcome
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


def sub_model(rng: random.Random, turns: int) -> FunctionModel:
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

    return FunctionModel(answer)


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
    runs = []
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


async def main() -> None:
    naive = [await trial(seed, reserve=False) for seed in range(TRIALS)]
    reserved = [await trial(seed, reserve=True) for seed in range(TRIALS)]
    over_naive = sum(s > LIMIT for s in naive)
    over_reserved = sum(s > LIMIT for s in reserved)
    print(f"fan-out: {CHILDREN} concurrent sub-agents, limit ${LIMIT}, {TRIALS} trials")
    print(f"naive check:  {over_naive}/{TRIALS} trials overshoot (worst ${max(naive):.4f})")
    print(
        f"reservation:  {over_reserved}/{TRIALS} trials overshoot (worst ${max(reserved):.4f}, "
        f"mean use {sum(reserved) / TRIALS / LIMIT:.0%} of the limit)"
    )


if __name__ == "__main__":
    asyncio.run(main())
