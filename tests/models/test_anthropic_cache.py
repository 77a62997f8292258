"""Anthropic prompt caching: on by default for agent runs from an `"anthropic:..."` string,
breakpoints on the tools, the instructions and a rolling one on the history; off through
`ModelSettings(prompt_cache=False)`; cache reads and the dollars saved in the usage."""

from __future__ import annotations

from typing import Any, cast

import pytest

from legato import Agent, tool
from legato.events import ModelResponded
from legato.messages import Message, Usage
from legato.models import ModelSettings
from legato.models._base import ModelRequest, ResponseCompleted
from legato.models._provider import ProviderSettings, cost_in_dollars
from legato.models.anthropic import AnthropicModel
from legato.models.retry import RetryPolicy
from legato.simulator import SimCall, SimTurn, SimUsage, WireSimulator


@tool
def get_weather(city: str) -> str:
    """Current weather.

    Args:
        city: City name.
    """
    return f"sunny in {city}"


def _script(sim: WireSimulator) -> None:
    sim.enqueue(
        SimTurn(calls=(SimCall(id="t1", name="get_weather", arguments={"city": "Paris"}),)),
        SimTurn(calls=(SimCall(id="t2", name="get_weather", arguments={"city": "Rome"}),)),
        SimTurn(text="Paris sunny, Rome sunny."),
    )


def _breakpoints(body: dict[str, Any]) -> list[str]:
    """Where `cache_control` sits: 'tools', 'system', or 'messages[i]' (message index)."""
    found: list[str] = []
    found += ["tools" for t in body.get("tools", []) if "cache_control" in t]
    found += ["system" for b in body.get("system", []) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        content: Any = message["content"]
        blocks = cast(list[dict[str, Any]], content if isinstance(content, list) else [])
        found += [f"messages[{i}]" for b in blocks if "cache_control" in b]
    return found


@pytest.fixture
def env(sim: WireSimulator, monkeypatch: pytest.MonkeyPatch) -> WireSimulator:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", sim.url)
    return sim


def test_an_agent_from_a_string_caches_tools_instructions_and_a_rolling_history(
    env: WireSimulator,
) -> None:
    _script(env)
    agent = Agent("anthropic:claude-sonnet-4-5", tools=[get_weather], instructions="Be brief.")
    result = agent.run_sync("Weather in Paris and Rome?")
    assert result.output == "Paris sunny, Rome sunny."
    bodies = [r.body for r in env.requests]
    assert [_breakpoints(b) for b in bodies] == [
        ["tools", "system", "messages[0]"],
        ["tools", "system", "messages[0]", "messages[2]"],
        ["tools", "system", "messages[2]", "messages[4]"],
    ]
    # Rolling: each step's newest breakpoint is where the next step's older one sits, so
    # the next step reads the whole earlier conversation from the cache.
    assert bodies[1]["messages"][2] == bodies[2]["messages"][2]
    assert all(len(_breakpoints(b)) <= 4 for b in bodies)


def test_twin_prompt_cache_off_in_the_settings_marks_nothing(env: WireSimulator) -> None:
    _script(env)
    agent = Agent(
        "anthropic:claude-sonnet-4-5",
        tools=[get_weather],
        instructions="Be brief.",
        model_settings=ModelSettings(prompt_cache=False),
    )
    agent.run_sync("Weather in Paris and Rome?")
    assert [_breakpoints(r.body) for r in env.requests] == [[], [], []]


def test_explicit_constructor_flags_still_win(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="ok"))
    model = AnthropicModel(
        "claude-sonnet-4-5", base_url=sim.url, api_key="k", cache_history=False, cache_tools=False
    )
    body = model.body(ModelRequest(messages=(Message.user("hi"),), instructions="Be brief."))
    assert _breakpoints(body) == ["system"]


async def test_cache_reads_and_saved_dollars_are_in_the_usage(sim: WireSimulator) -> None:
    sim.enqueue(
        SimTurn(
            text="cached",
            usage=SimUsage(input_tokens=10_000, output_tokens=50, cached_tokens=9_000),
        ),
        SimTurn(text="cold", usage=SimUsage(input_tokens=10_000, output_tokens=50)),
    )
    settings = ProviderSettings(retry=RetryPolicy(max_attempts=1))
    model = AnthropicModel("claude-sonnet-4-5", base_url=sim.url, api_key="k", settings=settings)
    responses: list[Any] = []
    try:
        for _ in range(2):
            async for event in model.stream(ModelRequest(messages=(Message.user("hi"),))):
                if isinstance(event, ResponseCompleted):
                    responses.append(event.response)
    finally:
        await model.aclose()
    cached, cold = responses
    assert cached.usage.cache_read_tokens == 9_000
    uncached = cost_in_dollars(
        Usage(input_tokens=10_000, output_tokens=50),
        model="claude-sonnet-4-5",
        provider_id="anthropic",
    )
    assert uncached is not None and cached.cost is not None
    assert cached.usage.cache_savings == pytest.approx(uncached - cached.cost)
    assert cached.usage.cache_savings > 0.02  # 9,000 tokens at a tenth of the input price
    assert cold.usage.cache_savings == 0.0  # twin: nothing read from the cache, nothing saved
    assert (cached.usage + cold.usage).cache_savings == cached.usage.cache_savings


def test_a_run_sums_the_savings_of_its_calls(env: WireSimulator) -> None:
    cached = SimUsage(input_tokens=5_000, output_tokens=20, cached_tokens=4_000)
    env.enqueue(
        SimTurn(
            calls=(SimCall(id="t1", name="get_weather", arguments={"city": "Oslo"}),),
            usage=SimUsage(input_tokens=5_000, output_tokens=20, cache_write_tokens=4_000),
        ),
        SimTurn(text="Sunny in Oslo.", usage=cached),
    )
    result = Agent("anthropic:claude-sonnet-4-5", tools=[get_weather]).run_sync("Oslo?")
    steps = [e for e in result.journal.events if isinstance(e, ModelResponded)]
    savings = [e.response.usage.cache_savings for e in steps]
    assert savings[0] < 0 < savings[1]  # a write costs extra; the read that follows saves more
    assert result.usage.cache_savings == pytest.approx(sum(savings))
    assert result.usage.cache_read_tokens == 4_000
