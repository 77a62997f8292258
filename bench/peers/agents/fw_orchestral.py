"""Orchestral: `Agent.run` on its `GPT` client (sync only: it has no async run, and its
streamed call leaves the tool loop to the caller).

An Orchestral agent keeps its conversation in its context: each run here starts from a
cleared one (as a fresh session would), and concurrent runs get an agent each. Published for
Python >= 3.12 only; the bench builds its venv with such an interpreter when it finds one.
"""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

from typing import Any

import openai
from orchestral import Agent, define_tool
from orchestral.llm import GPT

IMPORTED = time.perf_counter()


@define_tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return _common.weather(city)


class Orchestral(_common.Adapter):
    """One `GPT` client per process, its OpenAI client pointed at the mock."""

    name = "orchestral"
    one_conversation = True

    def model(self, url: str, streamed: bool = False) -> Any:
        llm = GPT(model="gpt-4o", api_key="sk-bench")
        llm.client = openai.Client(api_key="sk-bench", base_url=url, timeout=30.0)
        return llm

    def agent(self, model: Any) -> Any:
        return Agent(llm=model, tools=[get_weather], include_date=False)

    def run_sync(self, agent: Any, text: str) -> Any:
        agent.context.clear()
        return agent.run(text)  # the final message; the agent's context is the session kept

    def answer(self, result: Any) -> str:
        return str(getattr(result, "text", result))


if __name__ == "__main__":
    _common.main(Orchestral(), IMPORTED)
