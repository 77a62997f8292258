"""`legato serve --demo`: the web UI with no key and no network.

A scripted model asks to send an email (a side-effecting tool, so the page asks for
approval), then reports what happened. The outbox is a list in memory: nothing leaves the
machine.
"""

from __future__ import annotations

from typing import Any

from legato.messages import ModelResponse, ToolResultPart
from legato.models import ModelRequest
from legato.testing import FunctionModel, call, reply
from legato.tools import Tool, tool

__all__ = ["demo_agent"]

SWITCH = (
    "This is `legato serve --demo`. For a real model: "
    "legato serve --model provider:model --tools module:object"
)


def _answer(request: ModelRequest) -> ModelResponse | str:
    last = request.messages[-1] if request.messages else None
    results = [p for p in (last.parts if last else ()) if isinstance(p, ToolResultPart)]
    if results:
        outcome = results[-1].text or "no result"
        return f"The email tool answered: {outcome}\n\n{SWITCH}"
    asked = last.text if last else ""
    return reply(
        "I will email Ann your message; the send_email tool has side effects, so you decide.",
        call("send_email", {"to": "ann@example.com", "body": asked or "Hello from legato."}),
    )


def demo_agent() -> Any:
    """An agent on a scripted model with one side-effecting tool (an in-memory outbox)."""
    from legato.agent import Agent

    outbox: list[dict[str, str]] = []

    @tool(side_effects="irreversible")
    def send_email(to: str, body: str) -> str:
        """Send an email (to the demo's in-memory outbox).

        Args:
            to: The recipient.
            body: The text.
        """
        outbox.append({"to": to, "body": body})
        return f"sent to {to} ({len(outbox)} in the outbox)"

    tools: list[Tool] = [send_email]
    return Agent(
        FunctionModel(_answer, name="test:demo", chunk_size=4),
        tools=tools,
        name="demo",
        instructions="Send emails when asked.",
    )
