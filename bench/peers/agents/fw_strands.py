"""Strands Agents: `agent(prompt)`, `invoke_async`, `stream_async` on its OpenAI model.

A Strands agent keeps its conversation: each run here starts from an empty one (as a fresh
session would), and concurrent runs get an agent each. Its OpenAI model always streams.
"""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

from typing import Any

from strands import Agent, tool
from strands.models.openai import OpenAIModel

IMPORTED = time.perf_counter()


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return _common.weather(city)


class Strands(_common.Adapter):
    """One `OpenAIModel` per process, quiet callback handler."""

    name = "strands"
    one_conversation = True

    def model(self, url: str, streamed: bool = False) -> Any:
        return OpenAIModel(client_args={"base_url": url, "api_key": "sk-bench"}, model_id="gpt-4o")

    def agent(self, model: Any) -> Any:
        return Agent(model=model, tools=[get_weather], callback_handler=None)

    def run_sync(self, agent: Any, text: str) -> Any:
        agent.messages = []
        return agent(text)  # the run's result: the session kept

    async def run_async(self, agent: Any, text: str) -> Any:
        agent.messages = []
        return await agent.invoke_async(text)

    async def stream_async(self, agent: Any, text: str) -> Any:
        agent.messages = []
        last: Any = None
        async for event in agent.stream_async(text):
            if "result" in event:
                last = event["result"]
        return last

    def answer(self, result: Any) -> str:
        return str(result)


if __name__ == "__main__":
    _common.main(Strands(), IMPORTED)
