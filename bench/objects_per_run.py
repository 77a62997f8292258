"""Objects the collector tracks per run while the run waits on its model.

At thousands of concurrent runs, everything a run keeps across an `await` outlives the young
generations, and each full collection walks it (see docs/benchmarks.md, 2,000 concurrent
runs). This starts N runs of an agent with one `async def` tool on a model that waits on an
event, lets them reach that wait, and counts `gc.get_objects()` against the count before,
with the most common types. The SDK's objects for a request in flight are not included.

    python bench/objects_per_run.py [runs]
"""

from __future__ import annotations

import asyncio
import collections
import gc
import sys
from collections.abc import AsyncIterator
from typing import Any

from legato import Agent, tool
from legato.messages import Message, ModelResponse, StopReason, TextPart
from legato.models import ModelProfile, ResponseCompleted


@tool
async def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return f"sunny in {city}"


class Waiting:
    """A model that answers once `gate` is set."""

    name = "bench:waiting"
    profile = ModelProfile()

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def stream(self, request: Any) -> AsyncIterator[ResponseCompleted]:
        """Wait for the gate, then answer with text."""
        await self.gate.wait()
        message = Message(role="assistant", parts=(TextPart(text="sunny"),))
        yield ResponseCompleted(
            response=ModelResponse(message=message, stop_reason=StopReason.END_TURN)
        )


def _types() -> collections.Counter[str]:
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


async def main(runs: int) -> None:
    """Print tracked objects per waiting run, and the types that grew most."""
    model = Waiting()
    agent = Agent(model, tools=[get_weather])
    model.gate.set()
    await agent.run("warm up")
    model.gate.clear()
    gc.collect()
    before = _types()
    handles = [agent.start("weather in Paris?") for _ in range(runs)]
    for _ in range(20):  # every run reaches the model's wait
        await asyncio.sleep(0)
    gc.collect()
    grown = _types() - before
    print(f"{sum(grown.values()) / runs:.1f} tracked objects per run waiting on its model")
    for name, count in grown.most_common(12):
        print(f"  {count / runs:6.2f} {name}")
    model.gate.set()
    for handle in handles:
        await handle.result()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
