"""smolagents: `ToolCallingAgent.run`, plain and streamed (sync only: it has no async API).

smolagents ends a run by calling its `final_answer` tool, so the mock answers its second request
with that call: still two model requests and one call of `get_weather`.
"""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

import os
from pathlib import Path
from typing import Any

from rich.console import Console
from smolagents import LogLevel, OpenAIModel, ToolCallingAgent, tool
from smolagents.monitoring import AgentLogger

IMPORTED = time.perf_counter()
_DEVNULL = Path(os.devnull).open("w")  # kept open for the process


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return _common.weather(city)


class Smolagents(_common.Adapter):
    """One `OpenAIModel` per process; the streamed mode streams the model's tokens and steps."""

    name = "smolagents"

    def model(self, url: str, streamed: bool = False) -> Any:
        return (OpenAIModel(model_id="gpt-4o", api_base=url, api_key="sk-bench"), streamed)

    def agent(self, model: Any) -> Any:
        model, streamed = model
        return ToolCallingAgent(
            tools=[get_weather],
            model=model,
            # Its streamed mode always renders a live view; sent to /dev/null here, not a tty.
            logger=AgentLogger(LogLevel.OFF, console=Console(file=_DEVNULL, highlight=False)),
            stream_outputs=streamed,
            max_steps=4,
        )

    def run_sync(self, agent: Any, text: str) -> Any:
        return agent.run(text, return_full_result=True)  # the run's result: the session kept

    def stream_sync(self, agent: Any, text: str) -> Any:
        last: Any = None
        for step in agent.run(text, stream=True):
            last = step
        return getattr(last, "output", last)

    def answer(self, result: Any) -> str:
        return str(getattr(result, "output", result))


if __name__ == "__main__":
    _common.main(Smolagents(), IMPORTED)
