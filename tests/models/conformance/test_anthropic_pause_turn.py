"""Anthropic's `pause_turn`: a long turn of its own tools is continued, within one model call.

When the tools Anthropic runs itself (web search, code execution) take a long turn, the API
stops with `pause_turn`; the client is to send the turn so far back, as the last assistant
message, and the model goes on. The adapter does that inside the same `stream()` call, so
the loop sees one response: the paused blocks and the continuation in order, the usage of
both requests. The twin (no continuation) returns the paused half as if it were the answer.
"""

from __future__ import annotations

from typing import Any

import pytest
from scenarios import NO_RETRY, call, close, request_for

from legato import Agent
from legato.events import ModelResponded
from legato.messages import StopReason, TextPart
from legato.models import ProviderSettings
from legato.models.anthropic import AnthropicModel
from legato.simulator import SimServerTool, SimTurn, SimUsage, WireSimulator

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
PAUSED = SimTurn(
    server_tools=(SimServerTool(kind="web_search"),),
    text="Let me look further.",
    raw_finish="pause_turn",
    usage=SimUsage(input_tokens=100, output_tokens=10),
)
DONE = SimTurn(
    text="Legato is a Python framework.", usage=SimUsage(input_tokens=150, output_tokens=20)
)


def claude(sim: WireSimulator, *, stream: bool, continuations: int = 8) -> AnthropicModel:
    settings = ProviderSettings(stream=stream, retry=NO_RETRY)
    return AnthropicModel(
        "claude-sonnet-4-6",
        base_url=sim.url,
        api_key="sk-ant-test-key",
        settings=settings,
        pause_continuations=continuations,
    )


@STREAM
async def test_a_paused_turn_is_continued_in_the_same_call(
    sim: WireSimulator, stream: bool
) -> None:
    sim.enqueue(PAUSED, DONE)
    model = claude(sim, stream=stream)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    response = out.response
    assert response.message.parts == (
        TextPart(text="Let me look further."),
        TextPart(text="Legato is a Python framework."),
    )
    assert response.stop_reason is StopReason.END_TURN
    assert (response.usage.requests, response.usage.input_tokens) == (2, 250)
    assert response.usage.output_tokens == 30
    # the second request carried the paused turn back whole, server blocks in place
    assert len(sim.requests) == 2
    last: dict[str, Any] = sim.requests[1].body["messages"][-1]
    assert last["role"] == "assistant"
    types = [b["type"] for b in last["content"]]
    assert types == ["server_tool_use", "web_search_tool_result", "text"]
    # the kept server blocks stay in the answer's metadata, for the next turn
    kept = (response.message.provider_details or {}).get("anthropic_server_blocks")
    assert isinstance(kept, list) and len(kept) == 2


@STREAM
async def test_continuations_are_bounded(sim: WireSimulator, stream: bool) -> None:
    sim.enqueue(PAUSED, PAUSED, PAUSED, DONE)
    model = claude(sim, stream=stream, continuations=1)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    assert len(sim.requests) == 2  # the first response and one continuation
    assert out.response.stop_reason is StopReason.OTHER
    assert out.response.usage.requests == 2


@STREAM
async def test_twin_without_continuation_the_paused_half_is_the_answer(
    sim: WireSimulator, stream: bool
) -> None:
    sim.enqueue(PAUSED, DONE)
    model = claude(sim, stream=stream, continuations=0)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    assert len(sim.requests) == 1
    assert out.response.message.text == "Let me look further."
    assert out.response.stop_reason is StopReason.OTHER


async def test_an_agent_run_answers_with_the_continued_turn(sim: WireSimulator) -> None:
    sim.enqueue(PAUSED, DONE)
    model = claude(sim, stream=True)
    try:
        result = await Agent(model).run("What is legato?")
    finally:
        await close(model)
    assert result.output.endswith("Legato is a Python framework.")
    assert result.usage.requests == 2
    responded = [e for e in result.journal.events if isinstance(e, ModelResponded)]
    assert len(responded) == 1  # one model step of the loop
