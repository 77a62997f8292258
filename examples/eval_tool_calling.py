"""An evaluation of tool calling: the prompts of bench/local_tool_calling.py as a dataset.

Run: `python examples/eval_tool_calling.py` evaluates a scripted model (keyless, offline);
`python examples/eval_tool_calling.py --local` evaluates SmolLM2 in process (extra `local`).
Each case checks the tool called, its arguments (a custom evaluator reading the journal,
values compared case-insensitively) and a word of the answer; the journals go to
`.legato/evals.db`, so running it again resumes instead of re-running.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from legato import Agent, tool
from legato.evals import Dataset, EvalContext, EvalReport, evaluate_sync, evaluator
from legato.messages import JsonValue, Message, ModelResponse
from legato.models import Model, ModelRequest
from legato.store import SQLiteStore
from legato.testing import FunctionModel, call, reply

HERE = Path(__file__).resolve().parent


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


def _norm(value: JsonValue) -> JsonValue:
    if isinstance(value, str):
        return value.lower().strip()
    if isinstance(value, int | float):
        return float(value)
    return value


@evaluator
def right_arguments(ctx: EvalContext) -> tuple[bool, str]:
    """The first tool call has the case's `metadata.arguments` (case-insensitively)."""
    wanted = ctx.case.metadata.get("arguments")
    calls = ctx.tool_calls()
    if not isinstance(wanted, dict) or not calls:
        return False, "no tool call"
    got = calls[0].arguments if isinstance(calls[0].arguments, dict) else {}
    wrong = [k for k, v in wanted.items() if _norm(got.get(k)) != _norm(v)]
    return not wrong, f"wrong {wrong} in {got}"


_SCRIPT: dict[str, tuple[str, dict[str, JsonValue]]] = {
    "Paris": ("get_weather", {"city": "Paris"}),
    "Tokyo": ("get_weather", {"city": "Tokyo"}),
    "100 USD": ("convert_currency", {"amount": 100, "source": "USD", "target": "EUR"}),
    "50 US dollars": ("convert_currency", {"amount": 50, "source": "USD", "target": "EUR"}),
    "Monday": ("add_reminder", {"text": "call Ann", "day": "Monday"}),
    "Friday": ("add_reminder", {"text": "buy milk", "day": "Friday"}),
}


def _scripted(request: ModelRequest) -> ModelResponse | str:
    """A model that calls the right tool, then answers with its result."""
    last: Message = request.messages[-1]
    if last.role == "user" and not last.tool_results:
        name, arguments = next(v for k, v in _SCRIPT.items() if k in last.text)
        return reply(call(name, arguments))
    prompt = request.messages[0].text
    day = next((d for d in ("Monday", "Friday") if d in prompt), "")
    return f"Done: {last.tool_results[0].text} {day}".strip()


def scripted_model() -> Model:
    """The keyless stand-in."""
    return FunctionModel(_scripted, name="test:tool-caller")


def local_model() -> Model:
    """SmolLM2-135M in process (the GGUF the `local` extra ships), greedy, a call first."""
    from legato.models import ModelSettings
    from legato.models.llamacpp import LlamaCppModel

    settings = ModelSettings(temperature=0, max_tokens=160)
    return LlamaCppModel("smollm2", call_tool_first=True, settings=settings)


def run(
    model: Model,
    *,
    store_path: str | Path,
    eval_id: str | None = None,
    cases: Sequence[str] | None = None,
) -> EvalReport:
    """Evaluate `model` on the tool-calling dataset (or on the `cases` with these ids)."""
    dataset = Dataset.from_file(HERE / "tool_calling.yaml")
    if cases is not None:
        dataset = dataset.select(cases)
    agent = Agent(
        model,
        tools=[get_weather, convert_currency, add_reminder],
        instructions="Use a tool, then answer in one sentence.",
        max_steps=3,
    )
    return evaluate_sync(
        agent,
        dataset,
        eval_id=eval_id or f"tool-calling-{model.name.replace(':', '-')}",
        store=SQLiteStore(store_path),
        evaluators=[right_arguments],
        concurrency=1,
    )


def main(argv: list[str]) -> None:
    """Evaluate the scripted model, or SmolLM2 with `--local`, and print the table."""
    from rich.console import Console

    from legato.evals import report_table

    model = local_model() if "--local" in argv else scripted_model()
    report = run(model, store_path=".legato/evals.db")
    Console().print(report_table(report))


if __name__ == "__main__":
    main(sys.argv[1:])
