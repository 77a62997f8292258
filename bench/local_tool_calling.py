"""Which in-process local model calls tools best: a fixed set of prompts, scored exactly.

Run: `python bench/local_tool_calling.py [GGUF ...]` (extra `local`). Each prompt has one
right tool and the arguments it needs; a model scores a point for the right tool, one for
the right arguments, and one when its final answer uses the tool's result. Two modes:
`auto` (the model decides whether to call a tool) and `first` (`call_tool_first=True`: a
call is required on the user's turn, as `make demo` runs SmolLM2). `smollm2` is always
measured; pass paths of other GGUF files to compare them on the same prompts.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from legato import Agent, tool
from legato.events import ToolCallFinished
from legato.models import ModelSettings
from legato.models.llamacpp import LlamaCppModel


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: City name, for example "Paris".
    """
    return {"paris": "18°C, light rain", "tokyo": "27°C, humid"}.get(city.lower(), "15°C, clear")


@tool
def convert_currency(amount: float, source: str, target: str) -> str:
    """Convert an amount of money between currencies.

    Args:
        amount: How much money.
        source: Currency code to convert from, e.g. "USD".
        target: Currency code to convert to, e.g. "EUR".
    """
    return f"{amount * 0.9:.2f} {target.upper()}"


@tool
def add_reminder(text: str, day: str) -> str:
    """Add a reminder to the user's calendar.

    Args:
        text: What to be reminded of.
        day: The day, e.g. "Monday".
    """
    return f"reminder set for {day}"


TOOLS = [get_weather, convert_currency, add_reminder]
# prompt, expected tool, expected arguments (compared case-insensitively), a word of the result
CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("What is the weather in Paris?", "get_weather", {"city": "paris"}, "rain"),
    ("Is it humid in Tokyo right now?", "get_weather", {"city": "tokyo"}, "humid"),
    (
        "Convert 100 USD to EUR.",
        "convert_currency",
        {"amount": 100, "source": "usd", "target": "eur"},
        "90",
    ),
    (
        "How many euros is 50 US dollars?",
        "convert_currency",
        {"amount": 50, "source": "usd", "target": "eur"},
        "45",
    ),
    ("Remind me to call Ann on Monday.", "add_reminder", {"day": "monday"}, "monday"),
    ("Set a reminder for Friday: buy milk.", "add_reminder", {"day": "friday"}, "friday"),
]


def _same(expected: dict[str, Any], got: dict[str, Any]) -> bool:
    def norm(value: Any) -> Any:
        return value.lower().strip() if isinstance(value, str) else float(value)

    try:
        return all(norm(got.get(k)) == norm(v) for k, v in expected.items())
    except (TypeError, ValueError, AttributeError):
        return False


def score(model_name: str, *, first: bool) -> tuple[int, int, int, int, float]:
    model = LlamaCppModel(
        model_name, call_tool_first=first, settings=ModelSettings(temperature=0, max_tokens=160)
    )
    right_tool = right_args = used = failed = 0
    started = time.perf_counter()
    for prompt, name, arguments, word in CASES:
        agent = Agent(
            model, tools=TOOLS, instructions="Use a tool, then answer in one sentence.", max_steps=3
        )
        try:
            result = agent.run_sync(prompt)
        except Exception:  # a model that loops or writes a bad call scores nothing here
            failed += 1
            continue
        calls = [e for e in result.journal if isinstance(e, ToolCallFinished)]
        if calls and calls[0].call.name == name:
            right_tool += 1
            if _same(arguments, dict(calls[0].call.arguments or {})):
                right_args += 1
        if calls and word in str(result.output).lower():
            used += 1
    return right_tool, right_args, used, failed, (time.perf_counter() - started) / len(CASES)


def main() -> None:
    models = ["smollm2", *sys.argv[1:]]
    n = len(CASES)
    print(
        f"{'model':<40} {'mode':<6} {'tool':>6} {'args':>6} {'used':>6} {'failed':>7} {'s/prompt':>9}"
    )
    for name in models:
        label = name if name == "smollm2" else Path(name).stem
        for first in (False, True):
            tool_ok, args_ok, used, failed, seconds = score(name, first=first)
            mode = "first" if first else "auto"
            print(
                f"{label:<40} {mode:<6} {tool_ok:>3}/{n} {args_ok:>3}/{n} {used:>3}/{n} {failed:>4}/{n} {seconds:>9.1f}"
            )


if __name__ == "__main__":
    main()
