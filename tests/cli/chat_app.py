"""A scripted chat for the terminal tests: `python chat_app.py chat --model chatdemo:x ...`.

The model answers from the last message: `send NAME` streams a sentence, then calls `send`;
`slow` calls a tool that sleeps a minute; `lines N` answers with N numbered lines;
`stream N` streams N words slowly;
`spawn` has a sub-agent send a message; anything else is echoed. Each effect of `send`
appends a line to the file named by `LEGATO_TEST_EFFECTS`, counted outside legato.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from legato import Agent, tool
from legato.messages import Message
from legato.models import ModelRequest, ModelStreamEvent, register_provider
from legato.testing import FunctionModel, call, reply


@tool(side_effects="irreversible")
def send(to: str, text: str = "hello") -> str:
    """Send a message.

    Args:
        to: The recipient.
        text: The message.
    """
    with Path(os.environ["LEGATO_TEST_EFFECTS"]).open("a", encoding="utf-8") as f:
        f.write(f"{to}\n")
    return f"sent to {to}"


@tool
async def slow() -> str:
    """Take a minute."""
    started = Path(os.environ["LEGATO_TEST_EFFECTS"] + ".slow")
    await asyncio.to_thread(started.write_text, "started\n", encoding="utf-8")  # the test waits
    await asyncio.sleep(60)
    return "slow done"


@tool
async def stubborn() -> str:
    """Run until released, even once cancelled (a turn that takes its time to stop)."""
    started = Path(os.environ["LEGATO_TEST_EFFECTS"] + ".slow")
    release = Path(os.environ["LEGATO_TEST_EFFECTS"] + ".release")
    await asyncio.to_thread(started.write_text, "started\n", encoding="utf-8")
    try:
        await asyncio.sleep(60)
    finally:
        for _ in range(600):  # the test releases it; 30 s at most
            if await asyncio.to_thread(release.exists):
                break
            await asyncio.sleep(0.05)
    return "stubborn done"


def _last(request: ModelRequest) -> Message:
    return request.messages[-1]


def _answer(request: ModelRequest) -> object:
    last = _last(request)
    if last.role != "user" or any(p.kind == "tool_result" for p in last.parts):
        results = [getattr(p, "text", "") for p in last.parts if p.kind == "tool_result"]
        return f"Done: {'; '.join(results)}."
    text = last.text.strip()
    if text.startswith("send "):
        return reply("Sending your message right now.", call("send", {"to": text[5:]}))
    if text == "slow":
        return reply(call("slow", {}))
    if text == "stubborn":
        return reply(call("stubborn", {}))
    if text.startswith("lines "):
        count = int(text[6:])
        return "\n".join(f"line {n:03d}" for n in range(1, count + 1))
    if text.startswith("stream "):
        return " ".join(f"word {n:04d}" for n in range(1, int(text[7:]) + 1))
    if text == "spawn":
        return reply(call("helper", {"task": "send carol"}))
    return f"echo: {text}"


class _Model(FunctionModel):
    """Streams `stream N` answers slowly (a chunk every 20 ms), so Ctrl-C lands mid-answer."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        slow = _last(request).text.strip().startswith("stream ")
        async for event in super().stream(request):
            if slow:
                await asyncio.sleep(0.02)
            yield event


def model(name: str) -> FunctionModel:
    return _Model(_answer, name=f"chatdemo:{name}", chunk_size=4)  # pyright: ignore[reportArgumentType]


helper = Agent(FunctionModel(_answer, name="chatdemo:helper"), name="helper", tools=[send]).as_tool(  # pyright: ignore[reportArgumentType]
    name="helper", description="A helper agent that sends messages."
)

register_provider("chatdemo", model)

if __name__ == "__main__":
    from legato.cli import main

    if os.environ.get("LEGATO_TEST_CTRL_C_LEAVES"):  # the twin: the old Ctrl-C at the prompt
        from legato.cli._chat import ChatSession

        ChatSession.interrupted_at_prompt = lambda self, typed: True

    sys.argv[0] = "legato"
    main()
