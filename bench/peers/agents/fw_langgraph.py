"""LangGraph through LangChain v1's `create_agent` on `ChatOpenAI`: invoke, ainvoke, stream, astream."""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

from typing import Any

from langchain.agents import create_agent
from langchain_openai import ChatOpenAI

IMPORTED = time.perf_counter()


def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return _common.weather(city)


def _last(state: Any) -> str:
    return str(state["messages"][-1].content)


class LangGraph(_common.Adapter):
    """A compiled agent graph; the streamed modes stream message tokens and the graph's values."""

    name = "langgraph"

    def model(self, url: str, streamed: bool = False) -> Any:
        return ChatOpenAI(model="gpt-4o", base_url=url, api_key="sk-bench", streaming=streamed)

    def agent(self, model: Any) -> Any:
        return create_agent(model, tools=[get_weather])

    def run_sync(self, agent: Any, text: str) -> Any:
        return agent.invoke({"messages": [{"role": "user", "content": text}]})

    async def run_async(self, agent: Any, text: str) -> Any:
        return await agent.ainvoke({"messages": [{"role": "user", "content": text}]})

    def stream_sync(self, agent: Any, text: str) -> Any:
        last: Any = None
        for mode, chunk in agent.stream(
            {"messages": [{"role": "user", "content": text}]}, stream_mode=["messages", "values"]
        ):
            if mode == "values":
                last = chunk
        return last

    async def stream_async(self, agent: Any, text: str) -> Any:
        last: Any = None
        async for mode, chunk in agent.astream(
            {"messages": [{"role": "user", "content": text}]}, stream_mode=["messages", "values"]
        ):
            if mode == "values":
                last = chunk
        return last

    def answer(self, result: Any) -> str:
        return _last(result)


if __name__ == "__main__":
    _common.main(LangGraph(), IMPORTED)
