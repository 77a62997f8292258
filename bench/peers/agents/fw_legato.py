"""legato, installed from this checkout: `run_sync`, `run`, `stream_sync`, `stream`."""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

from typing import Any

from legato import Agent, tool
from legato.models._provider import ProviderSettings
from legato.models.openai_chat import OpenAIChatModel
from legato.models.retry import RetryPolicy

IMPORTED = time.perf_counter()


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return _common.weather(city)


class Legato(_common.Adapter):
    """One `OpenAIChatModel` (plain requests, or SSE for the streamed modes) per process."""

    name = "legato"

    def model(self, url: str, streamed: bool = False) -> Any:
        settings = ProviderSettings(stream=streamed, retry=RetryPolicy(max_attempts=1))
        return OpenAIChatModel("gpt-4o", base_url=url, api_key="sk-bench", settings=settings)

    def agent(self, model: Any) -> Any:
        return Agent(model, tools=[get_weather])

    def run_sync(self, agent: Any, text: str) -> Any:
        return agent.run_sync(text)

    async def run_async(self, agent: Any, text: str) -> Any:
        return await agent.run(text)

    def stream_sync(self, agent: Any, text: str) -> Any:
        out: Any = None
        for event in agent.stream_sync(text):
            if event.kind == "run_finished":
                out = event.output
        return out

    async def stream_async(self, agent: Any, text: str) -> Any:
        out: Any = None
        async for event in agent.stream(text):
            if event.kind == "run_finished":
                out = event.output
        return out

    def answer(self, result: Any) -> str:
        return str(getattr(result, "output", result))

    async def aclose(self, model: Any) -> None:
        await model.aclose()


if __name__ == "__main__":
    _common.main(Legato(), IMPORTED)
