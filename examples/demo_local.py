"""Demo section: a real model, in-process, doing one real tool call. No key, no network.

SmolLM2-135M (shipped on PyPI as a package) runs through llama.cpp (extra `local`). A
135M model does not choose tools well on its own, so it is asked to call one first, then
answer. `--model provider:model` (or `LEGATO_MODEL`) runs the same agent on another model.

Run alone: `python examples/demo_local.py`. When the local model is not installed or fails,
this says so and returns: the demo does not depend on it.
"""

from __future__ import annotations

import os
import sys

from demo_tools import get_weather, stream

from legato import Agent
from legato.events import RunFinished
from legato.exceptions import MissingDependency
from legato.models import Model, ModelSettings


def local_model() -> Model:
    """SmolLM2-135M in-process, told to call a tool first (raises when not installed)."""
    from legato.models.llamacpp import LlamaCppModel

    # A small model may go on to write a tool response of its own: stop it there.
    settings = ModelSettings(temperature=0, max_tokens=200, stop_sequences=["</tool_response>"])
    return LlamaCppModel("smollm2", call_tool_first=True, settings=settings)


def main(argv: list[str] | None = None) -> RunFinished | None:
    args = sys.argv[1:] if argv is None else argv
    chosen = (
        args[args.index("--model") + 1] if "--model" in args else os.environ.get("LEGATO_MODEL")
    )
    try:
        model: Model | str = chosen or local_model()
        agent = Agent(
            model,
            tools=[get_weather],
            instructions="Use the get_weather tool, then answer in one sentence.",
            name="weather",
            max_steps=3,
        )
        finished, results = stream(agent, "What is the weather in Paris?")
    except Exception as error:  # the demo finishes green whatever this model does
        print(f"  skipped: the model could not run here ({type(error).__name__}: {error})")
        if not isinstance(error, MissingDependency):
            print("  another model: python examples/demo_local.py --model provider:model")
        return None
    if not results:
        print("  (this model answered without calling the tool)")
    return finished


if __name__ == "__main__":
    main()
