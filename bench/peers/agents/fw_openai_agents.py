"""The OpenAI Agents SDK: `Runner.run_sync`, `Runner.run`, `Runner.run_streamed` (chat completions)."""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

from typing import Any

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

IMPORTED = time.perf_counter()
set_tracing_disabled(True)  # no trace export (it would try to reach the vendor)


@function_tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return _common.weather(city)


class OpenAIAgents(_common.Adapter):
    """One `AsyncOpenAI` client and chat-completions model per process."""

    name = "openai_agents"

    def model(self, url: str, streamed: bool = False) -> Any:
        client = AsyncOpenAI(base_url=url, api_key="sk-bench")
        return OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)

    def agent(self, model: Any) -> Any:
        return Agent(name="weather", model=model, tools=[get_weather])

    def run_sync(self, agent: Any, text: str) -> Any:
        return Runner.run_sync(agent, text)  # the run's result: the session a caller keeps

    async def run_async(self, agent: Any, text: str) -> Any:
        return await Runner.run(agent, text)

    async def stream_async(self, agent: Any, text: str) -> Any:
        result = Runner.run_streamed(agent, text)
        async for _ in result.stream_events():
            pass
        return result.final_output

    def answer(self, result: Any) -> str:
        return str(getattr(result, "final_output", result))


if __name__ == "__main__":
    _common.main(OpenAIAgents(), IMPORTED)
