"""The example agent `make demo` runs: a travel helper with two tools.

It streams its events to the terminal. The model is chosen like `legato.models.default_model`
does: `LEGATO_MODEL` if set, else Anthropic, OpenAI or Gemini when their key is set, else the
in-process local model (SmolLM2-135M through llama.cpp, shipped on PyPI: no key, no network).
`python examples/demo.py --scripted` plays a fixed conversation instead (what the tests use
to check the output exactly).
"""

from __future__ import annotations

import sys
from typing import Annotated, Literal

from pydantic import Field

from legato import Agent, tool
from legato.events import RunFinished, TextDelta, ToolCallFinished, ToolCallStarted
from legato.models import LOCAL_MODEL, Model, ModelSettings, default_model
from legato.testing import ScriptedModel, call, reply

_WEATHER = {"paris": (18, "light rain"), "rome": (24, "sunny"), "oslo": (6, "overcast")}


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


def pick_model(*, scripted: bool = False) -> Model | str:
    """A hosted model when a key is set, else the local model; or the scripted conversation."""
    if scripted:
        return scripted_model()
    chosen = default_model()
    if chosen != LOCAL_MODEL:
        return chosen
    from legato.models.llamacpp import LlamaCppModel

    # A 135M model does not choose tools on its own: ask it to call one first, then answer.
    return LlamaCppModel(
        "smollm2", call_tool_first=True, settings=ModelSettings(temperature=0, max_tokens=200)
    )


def scripted_model() -> ScriptedModel:
    """A scripted model that plays the conversation the demo shows (offline, exact)."""
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


def main(argv: list[str] | None = None) -> None:
    """Run the demo agent and stream what it does."""
    args = sys.argv[1:] if argv is None else argv
    agent = Agent(
        pick_model(scripted="--scripted" in args),
        tools=[get_weather, packing_list],
        instructions="You are a concise travel assistant. Use the tools; answer in two sentences.",
        name="travel",
    )
    print(f"model: {agent.model.name}")
    for event in agent.stream_sync(
        "I'm visiting Paris and then Rome this week. What should I pack?"
    ):
        if isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
        elif isinstance(event, ToolCallStarted):
            print(f"\n  -> {event.call.name}({event.call.raw_arguments})")
        elif isinstance(event, ToolCallFinished):
            print(f"  <- {event.result.text}")
        elif isinstance(event, RunFinished):
            u = event.usage
            print(
                f"\n[done: {u.requests} model calls, {u.input_tokens} in / {u.output_tokens} out tokens]"
            )


if __name__ == "__main__":
    main()
