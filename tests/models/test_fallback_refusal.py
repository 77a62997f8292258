"""FallbackModel moves on when a model refuses a request before sending it
(`UnsupportedFeature`): real provider models against the wire simulator."""

from __future__ import annotations

from typing import Any

import pytest

from legato import Agent
from legato.exceptions import ModelOverloaded, UnsupportedFeature
from legato.models import FallbackModel, ModelSettings
from legato.models._provider import ProviderSettings
from legato.models.anthropic import AnthropicModel
from legato.models.builtin import WebFetch, WebSearch
from legato.models.openai_compatible import compatible_model
from legato.models.openai_responses import OpenAIResponsesModel
from legato.models.retry import RetryPolicy
from legato.simulator import Fault, SimServerTool, SimTurn, WireSimulator

NO_RETRY = ProviderSettings(retry=RetryPolicy(max_attempts=1))


def _groq(sim: WireSimulator) -> Any:
    """A Chat Completions server that runs no built-in tool."""
    return compatible_model("groq", "m", base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY)


def _claude(sim: WireSimulator) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", base_url=sim.url, api_key="k", settings=NO_RETRY)


def _searching(model: FallbackModel, tool: Any = None) -> Agent[str]:
    return Agent(model, model_settings=ModelSettings(builtin_tools=(tool or WebSearch(),)))


async def test_a_refusal_before_sending_moves_on_to_the_next_model(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(server_tools=(SimServerTool(kind="web_search"),), text="18 C, sunny."))
    first, second = _groq(sim), _claude(sim)
    model = FallbackModel([first, second])
    try:
        result = await _searching(model).run("Weather in Paris?")
    finally:
        await first.aclose()
        await second.aclose()
    assert result.output == "18 C, sunny."
    assert [r.api for r in sim.requests] == ["anthropic"]  # groq sent nothing
    [attempt] = model.attempts
    assert attempt.model == first.name
    assert isinstance(attempt.error, UnsupportedFeature)
    assert attempt.error.option == "the built-in tool 'web_search'"


async def test_twin_without_the_protection_the_refusal_ends_the_chain(
    sim: WireSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    class NeverRaised(Exception):
        pass

    # The old code path: only ModelErrors were caught, so the refusal went straight up.
    monkeypatch.setattr("legato.models.fallback.UnsupportedFeature", NeverRaised)
    sim.enqueue(SimTurn(text="never sent"))
    first, second = _groq(sim), _claude(sim)
    try:
        with pytest.raises(UnsupportedFeature):
            await _searching(FallbackModel([first, second])).run("Weather in Paris?")
    finally:
        await first.aclose()
        await second.aclose()
    assert sim.requests == []  # the model that could serve it was never asked


async def test_when_every_model_refuses_the_error_names_each(sim: WireSimulator) -> None:
    first = _groq(sim)
    second = OpenAIResponsesModel("gpt-5", base_url=f"{sim.url}/v1", api_key="k")
    model = FallbackModel([first, second])
    try:
        with pytest.raises(UnsupportedFeature) as caught:
            await _searching(model, WebFetch()).run("Read the page.")
    finally:
        await first.aclose()
        await second.aclose()
    assert sim.requests == []
    message = str(caught.value)
    assert "every model refused" in message
    assert first.name in message and second.name in message
    assert caught.value.option == "the built-in tool 'web_fetch'"
    assert [type(a.error) for a in model.attempts] == [UnsupportedFeature, UnsupportedFeature]


async def test_a_refusal_then_an_outage_raises_the_outage(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(fault=Fault(error="overloaded")))
    first, second = _groq(sim), _claude(sim)
    model = FallbackModel([first, second])
    try:
        with pytest.raises(ModelOverloaded):
            await _searching(model).run("Weather in Paris?")
    finally:
        await first.aclose()
        await second.aclose()
    assert [r.api for r in sim.requests] == ["anthropic"]
    assert [type(a.error) for a in model.attempts] == [UnsupportedFeature, ModelOverloaded]


async def test_fallback_on_is_not_asked_about_refusals(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(server_tools=(SimServerTool(kind="web_search"),), text="sunny"))
    seen: list[object] = []

    def never(error: object) -> bool:
        seen.append(error)
        return False

    first, second = _groq(sim), _claude(sim)
    try:
        result = await _searching(FallbackModel([first, second], fallback_on=never)).run("Hi")
    finally:
        await first.aclose()
        await second.aclose()
    assert result.output == "sunny" and seen == []
