"""Budgets on the wire: the reserved output cap is sent, calls are priced without `prices=`.

The official OpenAI SDK talks to `legato.simulator` on 127.0.0.1; the simulated provider
generates up to the cap it is sent (6,000 tokens when it is sent none), as a real one does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from legato import Agent
from legato.budgets import Budget, Prices
from legato.effects import unsafe_switches
from legato.exceptions import BudgetExceeded, PriceUnknown
from legato.messages import Usage
from legato.models import ModelProfile, ModelSettings, ProviderSettings, RetryPolicy
from legato.models.openai_chat import OpenAIChatModel
from legato.simulator import RecordedRequest, SimTurn, SimUsage, WireSimulator
from legato.testing import ScriptedModel

pytest.importorskip("openai")
pytest.importorskip("genai_prices")

UNCAPPED = 6_000
"""Output tokens the simulated model writes when the request sets no cap."""
NO_RETRY = ProviderSettings(retry=RetryPolicy(max_attempts=1))


def obeys_the_cap(request: RecordedRequest) -> SimTurn:
    cap = request.body.get("max_completion_tokens") or request.body.get("max_tokens")
    written = min(int(cap), UNCAPPED) if isinstance(cap, int) else UNCAPPED
    return SimTurn(text="a long essay", usage=SimUsage(input_tokens=200, output_tokens=written))


@pytest.fixture
def sim() -> Iterator[WireSimulator]:
    with WireSimulator(obeys_the_cap) as simulator:
        yield simulator


def gpt(sim: WireSimulator, name: str = "gpt-4o") -> OpenAIChatModel:
    return OpenAIChatModel(name, base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY)


def sent_cap(request: RecordedRequest) -> Any:
    return request.body.get("max_completion_tokens")


async def test_a_dollar_budget_sends_the_reserved_cap_and_holds() -> None:
    with WireSimulator(obeys_the_cap) as sim:
        budget = Budget(dollars=0.05)  # no prices=: legato's price table prices gpt-4o
        result = await Agent(gpt(sim)).run("write an essay", budget=budget)
    assert result.output == "a long essay"
    (request,) = sim.requests
    assert sent_cap(request) == 4096  # the output_reserve that was reserved
    assert budget.used.output_tokens == 4096
    assert 0 < budget.used.dollars <= 0.05
    assert result.cost == pytest.approx(budget.used.dollars)


async def test_twin_without_the_cap_the_same_call_overshoots() -> None:
    with WireSimulator(obeys_the_cap) as sim, unsafe_switches(cap_output=False):
        budget = Budget(dollars=0.05)
        await Agent(gpt(sim)).run("write an essay", budget=budget)
    (request,) = sim.requests
    assert sent_cap(request) is None
    assert budget.used.output_tokens == UNCAPPED
    assert budget.used.dollars > 0.05  # reserved 4,096 tokens' worth, spent 6,000 tokens'


async def test_a_cap_the_caller_set_is_kept(sim: WireSimulator) -> None:
    budget = Budget(dollars=0.05)
    agent = Agent(gpt(sim), model_settings=ModelSettings(max_tokens=300))
    await agent.run("short", budget=budget)
    assert sent_cap(sim.requests[0]) == 300
    assert budget.used.output_tokens == 300


async def test_a_budget_that_bounds_no_output_sends_no_cap(sim: WireSimulator) -> None:
    budget = Budget(model_calls=3)  # nothing an uncapped answer could overshoot
    await Agent(gpt(sim)).run("essay", budget=budget)
    assert sent_cap(sim.requests[0]) is None


async def test_a_token_limit_caps_the_output_and_counts_input_and_output(
    sim: WireSimulator,
) -> None:
    budget = Budget(tokens=5_000)
    await Agent(gpt(sim)).run("essay", budget=budget)
    assert sent_cap(sim.requests[0]) == 4096
    assert budget.used.tokens == 200 + 4096
    with pytest.raises(BudgetExceeded) as info:  # the next worst case no longer fits
        await Agent(gpt(sim)).run("another", budget=budget)
    assert info.value.resource == "tokens"
    assert len(sim.requests) == 1  # refused before it was sent


async def test_an_unknown_price_is_a_typed_error_before_the_call(sim: WireSimulator) -> None:
    with pytest.raises(PriceUnknown) as info:
        await Agent(gpt(sim, "house-model-7")).run("hi", budget=Budget(dollars=1.0))
    assert info.value.model.endswith(":house-model-7")
    assert sim.requests == []
    # explicit prices (zeros for a free model) make the same budget usable
    priced = Budget(dollars=1.0, prices=Prices(input=0, output=0))
    await Agent(gpt(sim, "house-model-7")).run("hi", budget=priced)
    assert len(sim.requests) == 1


async def test_a_model_without_a_price_table_needs_prices() -> None:
    model = ScriptedModel(["never sent"], profile=ModelProfile())
    with pytest.raises(PriceUnknown):
        await Agent(model).run("hi", budget=Budget(dollars=1.0))
    assert model.requests == []


def test_the_price_table_prices_the_worst_case(sim: WireSimulator) -> None:
    model = gpt(sim)
    worst = Budget(dollars=1.0, input_margin=1.0).model_call_worst_case(
        input_tokens=1000, max_tokens=4096, model=model
    )
    assert worst.dollars == pytest.approx(
        model.price(Usage(input_tokens=1000, output_tokens=4096)) or 0
    )
    assert worst.tokens == 5096


def test_wrapped_models_price_like_the_models_they_wrap(sim: WireSimulator) -> None:
    from legato.models import FallbackModel, RetryingModel, price_of

    usage = Usage(input_tokens=1000, output_tokens=1000)
    cheap, dear = gpt(sim, "gpt-4o-mini"), gpt(sim, "gpt-4o")
    assert price_of(RetryingModel(dear), usage) == dear.price(usage)
    chain = FallbackModel([cheap, dear])
    assert price_of(chain, usage) == max(cheap.price(usage) or 0, dear.price(usage) or 0)
    unknown = FallbackModel([cheap, ScriptedModel([])])
    assert price_of(unknown, usage) is None  # one member cannot be priced: nor can the chain


async def test_the_cap_leaves_room_for_a_thinking_budget() -> None:
    model = ScriptedModel(["thought it through"])
    settings = ModelSettings(thinking_budget=8000)
    budget = Budget(output_tokens=50_000)
    await Agent(model, model_settings=settings).run("think", budget=budget)
    (request,) = model.requests
    assert request.settings.max_tokens == 8000 + 4096  # above the thinking budget
