"""A provider's own web search is billed per search on top of the tokens; legato counts it.

Anthropic reports its searches in `usage.server_tool_use.web_search_requests`; OpenAI's
Responses API lists one `web_search_call` item per search. Each becomes `Usage.web_searches`,
and the call's cost includes their fee, priced per model by the bundled `genai-prices` data
($0.01 a search for both models here), so budgets and reports see what the provider bills. The same turn without a search is the reference: same
tokens, no fee.
"""

from __future__ import annotations

import pytest
from conformance_cases import CASES, Case
from scenarios import call, close, make, request_for

from legato import Agent
from legato.messages import ModelResponse
from legato.simulator import SimServerTool, SimTurn, SimUsage, WireSimulator

SEARCHING = [c for c in CASES if c.id in ("anthropic", "openai-responses")]
USAGE = SimUsage(input_tokens=2_000, output_tokens=200)
FEE = 0.01  # dollars a search, for claude-sonnet-4-6 and gpt-4o in the bundled price data


async def answer(case: Case, sim: WireSimulator, turn: SimTurn, *, stream: bool) -> ModelResponse:
    sim.enqueue(turn)
    model = make(case, sim, stream=stream)
    try:
        return (await call(model, request_for())).response
    finally:
        await close(model)


@pytest.mark.parametrize("case", SEARCHING, ids=str)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_searches_are_counted_and_their_fee_is_in_the_cost(
    case: Case, sim: WireSimulator, stream: bool
) -> None:
    searches = (SimServerTool(kind="web_search"), SimServerTool(kind="web_search"))
    searched = await answer(
        case, sim, SimTurn(server_tools=searches, text="Found it.", usage=USAGE), stream=stream
    )
    plain = await answer(case, sim, SimTurn(text="Found it.", usage=USAGE), stream=stream)
    assert (searched.usage.web_searches, plain.usage.web_searches) == (2, 0)
    assert searched.cost is not None and plain.cost is not None
    assert searched.cost == pytest.approx(plain.cost + 2 * FEE)
    assert searched.usage.input_tokens == plain.usage.input_tokens  # the same tokens


async def test_a_runs_usage_and_cost_add_up_its_searches(sim: WireSimulator) -> None:
    case = next(c for c in SEARCHING if c.id == "anthropic")
    sim.enqueue(
        SimTurn(server_tools=(SimServerTool(kind="web_search"),), text="Legato.", usage=USAGE)
    )
    model = make(case, sim, stream=True)
    try:
        result = await Agent(model).run("What is legato?")
    finally:
        await close(model)
    assert result.usage.web_searches == 1
    assert result.cost is not None and result.cost > FEE
