"""A run's model calls outside its loop (compaction summaries) spend from its budget."""

from __future__ import annotations

import pytest

from legato import Agent, tool
from legato.budgets import Budget
from legato.context import CharCounter, ContextPolicy, Summarize
from legato.effects import unsafe_switches
from legato.exceptions import BudgetExceeded
from legato.models import ModelProfile, ModelRequest
from legato.testing import FunctionModel, ScriptedModel, call, reply


@tool
def fetch(page: int) -> str:
    """Fetch a large page.

    Args:
        page: Page number.
    """
    return f"page {page}: " + "lorem ipsum " * 800


def reading_agent(summaries: list[ModelRequest]) -> tuple[Agent[str], ScriptedModel]:
    def summarizer(request: ModelRequest) -> str:
        summaries.append(request)
        return "Pages were read; all lorem ipsum."

    turns = [reply(f"Reading page {i}.", call("fetch", {"page": i})) for i in range(6)]
    model = ScriptedModel([*turns, "All read."], profile=ModelProfile(context_window=12_000))
    policy = ContextPolicy(
        strategy=Summarize(model=FunctionModel(summarizer)), counter=CharCounter()
    )
    return Agent(model, tools=[fetch], context=policy), model


def test_a_summary_call_is_reserved_in_the_run_budget() -> None:
    summaries: list[ModelRequest] = []
    agent, model = reading_agent(summaries)
    budget = Budget(model_calls=50, output_tokens=100_000)
    agent.run_sync("Read every page.", budget=budget)
    assert summaries
    assert budget.used.model_calls == len(model.requests) + len(summaries)
    assert all(r.settings.max_tokens == 4096 for r in summaries)  # capped like the loop's


def test_twin_without_metering_the_summary_is_spent_outside_the_budget() -> None:
    summaries: list[ModelRequest] = []
    agent, model = reading_agent(summaries)
    budget = Budget(model_calls=50, output_tokens=100_000)
    with unsafe_switches(meter_side_calls=False):
        agent.run_sync("Read every page.", budget=budget)
    assert summaries
    assert budget.used.model_calls == len(model.requests)  # the summaries went uncounted


@pytest.mark.parametrize("limit", range(2, 8))
def test_summaries_and_loop_calls_together_never_cross_the_limit(limit: int) -> None:
    # whichever call does not fit (a summary or a loop call), it is refused unsent and the
    # run stops with BudgetExceeded, not a CompactionFailed
    summaries: list[ModelRequest] = []
    agent, model = reading_agent(summaries)
    budget = Budget(model_calls=limit)
    with pytest.raises(BudgetExceeded):
        agent.run_sync("Read every page.", budget=budget)
    assert len(model.requests) + len(summaries) == limit == budget.used.model_calls
