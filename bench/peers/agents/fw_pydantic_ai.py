"""pydantic-ai: `run_sync`, `run`, `run_stream_sync`, `run_stream` on `OpenAIChatModel`."""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

IMPORTED = time.perf_counter()


def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return _common.weather(city)


class PydanticAI(_common.Adapter):
    """One chat-completions model per process; the streamed modes read the run to its output."""

    name = "pydantic_ai"

    def model(self, url: str, streamed: bool = False) -> Any:
        return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=url, api_key="sk-bench"))

    def agent(self, model: Any) -> Any:
        return Agent(model, tools=[get_weather])

    def run_sync(self, agent: Any, text: str) -> Any:
        return agent.run_sync(text)  # the run's result: the session a caller keeps

    async def run_async(self, agent: Any, text: str) -> Any:
        return await agent.run(text)

    def stream_sync(self, agent: Any, text: str) -> Any:
        result = agent.run_stream_sync(text)
        for _ in result.stream_text(delta=True, debounce_by=None):
            pass
        return result.get_output()

    async def stream_async(self, agent: Any, text: str) -> Any:
        async with agent.run_stream(text) as result:
            async for _ in result.stream_text(delta=True, debounce_by=None):
                pass
            return await result.get_output()

    def answer(self, result: Any) -> str:
        return str(getattr(result, "output", result))


if __name__ == "__main__":
    _common.main(PydanticAI(), IMPORTED)
