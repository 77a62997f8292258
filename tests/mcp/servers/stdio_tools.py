"""Module for `legato mcp serve`: plain legato tools and an agent (used by tests and docs)."""

from __future__ import annotations

from legato import Agent, tool
from legato.testing import FunctionModel
from legato.tools import Toolset


@tool(side_effects="none")
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool(side_effects="irreversible")
def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: What to shout.
    """
    return text.upper()


toolset = Toolset([add, shout], name="demo")

helper = Agent(
    FunctionModel(lambda request: f"helper saw: {request.messages[-1].text}"),
    name="helper",
)
