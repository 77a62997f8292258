"""legato with the tool written as `async def`: the same run without a worker-thread hop.

legato runs a plain `def` tool in a worker thread (it may block); an `async def` tool runs on
the loop. Every other script uses a plain `def` tool; this variant shows what the hop costs.
"""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

from typing import Any

from fw_legato import Legato
from legato import Agent, tool

IMPORTED = time.perf_counter()


@tool
async def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return _common.weather(city)


class LegatoAsyncTool(Legato):
    """legato's adapter with the `async def` tool."""

    name = "legato_atool"

    def agent(self, model: Any) -> Any:
        return Agent(model, tools=[get_weather])


if __name__ == "__main__":
    _common.main(LegatoAsyncTool(), IMPORTED)
