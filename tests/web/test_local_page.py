"""The page on a real local model with typed state and a sub-agent (SmolLM2-135M, llama.cpp).

A 135M model does not plan a tree of agents, so which tool it calls at each step is fixed
here (the counter, then the researcher, then a free answer); everything else is the model's:
the arguments, the sub-agent's answer, the final text. The picture of docs/web.md's state
and sub-agent panels is taken here (`make screenshots`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

import pytest
from web_support import TOKEN, Guarded, running, shot

from legato import Agent, RunContext, tool
from legato.contracts import State
from legato.messages import Message
from legato.models import ModelProfile, ModelRequest, ModelSettings, ModelStreamEvent
from legato.store import SQLiteStore
from legato.web import create_app

DEADLINE_MS = 300_000  # a real model on two shared cores


def _local(max_tokens: int) -> Any:
    from legato.models.llamacpp import LlamaCppModel

    settings = ModelSettings(
        temperature=0, max_tokens=max_tokens, stop_sequences=("</tool_response>",)
    )
    return LlamaCppModel("smollm2", settings=settings)


def _steps_done(messages: tuple[Message, ...]) -> int:
    """Assistant messages since the person's last prompt (a user message with no tool result)."""
    done = 0
    for message in messages:
        if message.role == "user" and not any(p.kind == "tool_result" for p in message.parts):
            done = 0
        elif message.role == "assistant":
            done += 1
    return done


class Scheduled:
    """The local model, told which tool to call at each step of a turn, then free to answer."""

    def __init__(self, inner: Any, schedule: list[str]) -> None:
        self.inner = inner
        self.schedule = schedule

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def profile(self) -> ModelProfile:
        return self.inner.profile

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        step = _steps_done(request.messages)
        if step < len(self.schedule):
            request = replace(request, tool_choice=self.schedule[step])
        async for event in self.inner.stream(request):
            yield event


def _agent() -> Agent[Any]:
    def added(old: Any, new: Any, args: Mapping[str, Any], result: Any) -> bool:
        return bool(new["count"] == old["count"] + args["by"])

    @tool(writes=["count"], ensures=added)
    def increment(ctx: RunContext, by: int) -> str:
        """Add to the counter.

        Args:
            by: How much.
        """
        state = ctx.state
        assert state is not None
        state["count"] = state["count"] + by
        return f"count is {state['count']}"

    researcher = Agent(
        _local(60), name="researcher", instructions="Answer the task in one sentence."
    )
    return Agent(
        Scheduled(_local(120), ["increment", "researcher"]),
        name="counter",
        instructions="Count with increment; ask the researcher what to look up.",
        tools=[increment, researcher.as_tool(name="researcher", description="Finds things.")],
        state=State.typed(count=(int, 0)),
        max_steps=4,
    )


@pytest.mark.timeout(900)
def test_state_and_a_sub_agent_in_the_page_with_the_local_model(browser: Any) -> None:
    def factory(port: int) -> Any:
        return create_app(_agent(), store=SQLiteStore(":memory:"), token=TOKEN, port=port)

    guard = Guarded()
    with running(factory) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 760})
        guard.attach(context)
        page = context.new_page()
        page.set_default_timeout(DEADLINE_MS)
        page.goto(f"{server.url}/?token={TOKEN}")
        page.wait_for_selector("#model:has-text('llamacpp:smollm2')")
        page.fill("#prompt", "Add 2 to the counter, then find out what a counter is.")
        page.press("#prompt", "Enter")
        page.wait_for_function("() => document.querySelector('#status').textContent === 'done'")
        history = page.locator("#state-history li").first.text_content() or ""
        assert history.startswith("v1 increment: count: 0 → "), history
        node = page.locator("#subagents li.done")
        assert (node.locator(".label").text_content() or "").startswith("researcher: ")
        assert page.locator(".tool-card").count() == 2
        page.click("#journal-load")
        page.locator("#journal li.tl-child").wait_for()
        assert page.locator("#journal li.tl-model").count() >= 3  # the last step is free
        page.screenshot(path=shot("web-state-subagents.png", docs=True))
        context.close()
    assert guard.blocked == [], f"requests left loopback: {guard.blocked}"
