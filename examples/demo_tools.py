"""Demo section: a tool call. A travel helper streams its answer and calls two tools.

Run alone: `python examples/demo_tools.py`. The model is scripted (offline, exact); the
same agent runs on a real model in `demo_local.py`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from legato import Agent, tool
from legato.events import RunFinished, TextDelta, ToolCallFinished, ToolCallStarted
from legato.models import Model
from legato.testing import ScriptedModel, call, reply

_WEATHER = {"paris": (18, "light rain"), "rome": (24, "sunny"), "oslo": (6, "overcast")}
PROMPT = "I'm visiting Paris and then Rome this week. What should I pack?"


@tool
def get_weather(city: str, unit: Literal["C", "F"] = "C") -> str:
    """Current weather for a city.

    Args:
        city: City name, for example "Paris".
        unit: Temperature unit.
    """
    temp, sky = _WEATHER.get(city.lower(), (15, "clear"))
    if unit == "F":
        temp = round(temp * 9 / 5 + 32)
    return f"{city}: {temp}°{unit}, {sky}"


@tool
def packing_list(conditions: Annotated[list[str], Field(max_length=4)]) -> list[str]:
    """Suggest what to pack for the given weather conditions.

    Args:
        conditions: Short weather descriptions, e.g. ["light rain", "sunny"].
    """
    items = {"passport", "charger"}
    for condition in conditions:
        if "rain" in condition:
            items.add("umbrella")
        if "sun" in condition:
            items.add("sunglasses")
        if "overcast" in condition or "cold" in condition:
            items.add("sweater")
    return sorted(items)


def scripted_model() -> ScriptedModel:
    """A scripted model that plays the conversation this section shows."""
    return ScriptedModel(
        [
            reply(
                "Let me check both cities.",
                call("get_weather", {"city": "Paris"}),
                call("get_weather", {"city": "Rome"}),
            ),
            reply(call("packing_list", {"conditions": ["light rain", "sunny"]})),
            "Paris is 18°C with light rain and Rome is 24°C and sunny. "
            "Pack an umbrella, sunglasses, your passport and a charger.",
        ],
        name="test:demo-script",
    )


def travel_agent(model: Model | str) -> Agent:
    """The travel helper on any model."""
    return Agent(
        model,
        tools=[get_weather, packing_list],
        instructions="You are a concise travel assistant. Use the tools; answer in two sentences.",
        name="travel",
    )


def stream(agent: Agent, prompt: str = PROMPT) -> tuple[RunFinished | None, list[str]]:
    """Run `agent` on `prompt`, printing text, tool calls and results as they stream.

    Returns the run's end and the results of the tools it called.
    """
    print(f"model: {agent.model.name}")
    finished: RunFinished | None = None
    results: list[str] = []
    for event in agent.stream_sync(prompt):
        if isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
        elif isinstance(event, ToolCallStarted):
            print(f"\n  -> {event.call.name}({event.call.raw_arguments})")
        elif isinstance(event, ToolCallFinished):
            print(f"  <- {event.result.text}")
            results.append(event.result.text)
        elif isinstance(event, RunFinished):
            finished = event
            u = event.usage
            print(
                f"\n[done: {u.requests} model calls, {u.input_tokens} in / {u.output_tokens} out tokens]"
            )
    return finished, results


def main() -> None:
    stream(travel_agent(scripted_model()))


if __name__ == "__main__":
    main()
