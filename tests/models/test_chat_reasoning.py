"""Reasoning sent back on Chat Completions, in the field and the turns each server wants.

Shapes from the servers' documentation: DeepSeek returns `reasoning_content` beside the
answer and, in thinking mode with tools, needs it back on the assistant messages of the
current turn's tool loop; z.ai (GLM) returns `reasoning_content` and keeps it across turns
("preserved thinking"); Cerebras returns `reasoning`; Mistral's reasoning models return
content chunks (`thinking`, then `text`) and take them back in that shape.
"""

from __future__ import annotations

from typing import Any

import pytest

from legato.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from legato.models._base import ModelRequest, ResponseCompleted
from legato.models._provider import ProviderSettings
from legato.models.openai_chat import OPENAI, chat_body
from legato.models.openai_compatible import PROFILES, compatible_model
from legato.models.retry import RetryPolicy
from legato.simulator import SimCall, SimTurn, WireSimulator

CALL = ToolCallPart.from_arguments(id="call_1", name="get_weather", arguments={"city": "Paris"})
RESULT = ToolResultPart.text_result(call_id="call_1", name="get_weather", text="18 C")


def _history(provider: str) -> tuple[Message, ...]:
    """An earlier turn, then the current one in the middle of its tool loop."""
    earlier = Message(
        role="assistant",
        parts=(ThinkingPart(text="Say hello.", provider=provider), TextPart(text="Hello!")),
    )
    thinking = ThinkingPart(text="I need the weather tool.", provider=provider)
    return (
        Message.user("Hi"),
        earlier,
        Message.user("Weather in Paris?"),
        Message(role="assistant", parts=(thinking, CALL)),
        Message(role="tool", parts=(RESULT,)),
    )


def _assistants(server: str) -> list[dict[str, Any]]:
    request = ModelRequest(messages=_history(server))
    body = chat_body(request, model="m", server=PROFILES[server], stream=False)
    return [m for m in body["messages"] if m["role"] == "assistant"]


def test_deepseek_gets_reasoning_content_back_in_the_current_tool_loop_only() -> None:
    earlier, current = _assistants("deepseek")
    assert current["reasoning_content"] == "I need the weather tool."
    assert current["tool_calls"][0]["id"] == "call_1"
    assert "reasoning_content" not in earlier  # an earlier turn's reasoning stays out


def test_zai_keeps_reasoning_on_every_turn() -> None:
    earlier, current = _assistants("zai")
    assert earlier["reasoning_content"] == "Say hello."
    assert current["reasoning_content"] == "I need the weather tool."


def test_cerebras_gets_its_reasoning_field_back() -> None:
    _, current = _assistants("cerebras")
    assert current["reasoning"] == "I need the weather tool."
    assert "reasoning_content" not in current


def test_mistral_gets_a_thinking_chunk_before_the_text() -> None:
    earlier, current = _assistants("mistral")
    assert current["content"] == [
        {"type": "thinking", "thinking": [{"type": "text", "text": "I need the weather tool."}]}
    ]
    assert earlier["content"] == "Hello!"  # not the current tool loop


def test_twin_servers_without_the_capability_get_no_reasoning() -> None:
    request = ModelRequest(messages=_history("openai-chat"))
    body = chat_body(request, model="gpt-4o", server=OPENAI, stream=False)
    for entry in body["messages"]:
        assert set(entry) <= {"role", "content", "tool_calls", "tool_call_id"}
        assert "need the weather" not in str(entry.get("content"))


def test_another_providers_reasoning_is_never_sent() -> None:
    request = ModelRequest(messages=_history("anthropic"))
    body = chat_body(request, model="m", server=PROFILES["deepseek"], stream=False)
    assert all("reasoning_content" not in m for m in body["messages"])


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_deepseek_tool_loop_round_trip(sim: WireSimulator, stream: bool) -> None:
    sim.enqueue(
        SimTurn(thinking="Use the tool.", calls=(SimCall(name="get_weather", arguments={}),))
    )
    sim.enqueue(SimTurn(text="18 C in Paris."))
    settings = ProviderSettings(stream=stream, retry=RetryPolicy(max_attempts=1))
    model = compatible_model(
        "deepseek", "deepseek-chat", base_url=f"{sim.url}/v1", api_key="k", settings=settings
    )
    first = Message.user("Weather in Paris?")
    try:
        events = [e async for e in model.stream(ModelRequest(messages=(first,)))]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        answer = final.response.message
        [call] = answer.tool_calls
        result = ToolResultPart.text_result(call_id=call.id, name=call.name, text="18 C")
        again = ModelRequest(messages=(first, answer, Message(role="tool", parts=(result,))))
        [e async for e in model.stream(again)]
    finally:
        await model.aclose()
    sent = [m for m in sim.requests[1].body["messages"] if m["role"] == "assistant"]
    assert sent[0]["reasoning_content"] == "Use the tool."


async def test_a_thinking_budget_on_a_server_without_reasoning_is_refused_before_sending(
    sim: WireSimulator,
) -> None:
    from legato.exceptions import UnsupportedFeature
    from legato.models import ModelSettings

    request = ModelRequest(
        messages=(Message.user("Hi"),), settings=ModelSettings(thinking_budget=512)
    )
    model = compatible_model("groq", "llama-3.3-70b", base_url=f"{sim.url}/v1", api_key="k")
    try:
        with pytest.raises(UnsupportedFeature) as caught:
            [e async for e in model.stream(request)]
    finally:
        await model.aclose()
    assert (caught.value.provider, caught.value.option) == ("groq", "thinking_budget")
    assert "groq" in str(caught.value) and "thinking_budget" in str(caught.value)
    assert sim.requests == []  # nothing went out


async def test_twin_a_thinking_budget_on_a_reasoning_server_goes_out(sim: WireSimulator) -> None:
    from legato.models import ModelSettings

    sim.enqueue(SimTurn(text="Hi."))
    request = ModelRequest(
        messages=(Message.user("Hi"),), settings=ModelSettings(thinking_budget=512)
    )
    model = compatible_model("deepseek", "deepseek-chat", base_url=f"{sim.url}/v1", api_key="k")
    try:
        [e async for e in model.stream(request)]
    finally:
        await model.aclose()
    assert len(sim.requests) == 1
