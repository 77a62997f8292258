"""Chat Completions servers as they speak: what each profile sends and how it reads answers.

Wire shapes come from the servers' own request models (llama-cpp-python's
`ChatCompletionRequestAssistantMessage` has `content: NotRequired[str]`, so null is refused)
and their documented answers; the real llama.cpp server is in `test_llamacpp_server.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from legato.exceptions import ProviderServerError, StreamInterrupted
from legato.messages import Message, StopReason, TextPart, ToolCallPart, ToolResultPart
from legato.models._base import ModelRequest, ResponseCompleted
from legato.models._provider import ProviderSettings, error_from_status, one_line
from legato.models.openai_chat import OPENAI, ServerProfile, chat_body
from legato.models.openai_compatible import PROFILES, compatible_model
from legato.models.retry import RetryPolicy
from legato.simulator import Fault, SimCall, SimTurn, SimUsage, WireSimulator

CALL = ToolCallPart.from_arguments(id="call_1", name="get_weather", arguments={"city": "Paris"})
TOOL_LOOP = ModelRequest(
    messages=(
        Message.user("Use get_weather for Paris"),
        Message(role="assistant", parts=(CALL,)),
        Message(
            role="tool",
            parts=(ToolResultPart.text_result(call_id="call_1", name="get_weather", text="18 C"),),
        ),
    )
)


def _assistant(body: dict[str, Any]) -> dict[str, Any]:
    [entry] = [m for m in body["messages"] if m["role"] == "assistant"]
    return entry


def test_llamacpp_server_gets_an_empty_string_beside_tool_calls() -> None:
    body = chat_body(TOOL_LOOP, model="smollm2", server=PROFILES["llamacpp-server"], stream=False)
    entry = _assistant(body)
    assert entry["content"] == ""
    assert entry["tool_calls"][0]["function"]["name"] == "get_weather"


def test_twin_openai_keeps_the_documented_null() -> None:
    entry = _assistant(chat_body(TOOL_LOOP, model="gpt-4o", server=OPENAI, stream=False))
    assert entry["content"] is None


# llama-cpp-python's server, HTTP 500 for `content: null` (its error body, shortened).
VALIDATION_500 = {
    "error": {
        "message": "7 validation errors for CreateChatCompletionRequest\n"
        + "\n".join(f"messages.1.variant{i}\n  Input should be a valid string" for i in range(7)),
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}


def test_a_multi_line_provider_error_is_one_line_and_the_body_keeps_the_rest() -> None:
    error = error_from_status(500, provider="llamacpp-server", body=VALIDATION_500)
    assert isinstance(error, ProviderServerError)
    text = str(error)
    assert "\n" not in text
    assert text.startswith("llamacpp-server: 7 validation errors for CreateChatCompletionRequest")
    assert "14 more lines" in text
    assert error.body == VALIDATION_500  # every line is still there


def test_one_line_leaves_a_single_line_alone_and_cuts_a_very_long_one() -> None:
    assert one_line("model not found") == "model not found"
    long = one_line("x" * 1000)
    assert len(long) == 300 and long.endswith("…")


def _model(sim: WireSimulator, server: str | ServerProfile, *, stream: bool = True) -> Any:
    settings = ProviderSettings(stream=stream, retry=RetryPolicy(max_attempts=1))
    return compatible_model(server, "m", base_url=f"{sim.url}/v1", settings=settings)


# llama-cpp-python's server ignores `stream_options` and never sends a usage chunk; the
# simulator sends one only when asked, so not asking stands in for that server.
LLAMACPP_PYTHON = dataclasses.replace(PROFILES["llamacpp-server"], stream_usage=False)


async def _complete(model: Any, request: ModelRequest) -> Any:
    try:
        events = [e async for e in model.stream(request)]
    finally:
        await model.aclose()
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    return final.response


async def test_a_server_without_usage_in_streams_counts_its_token_chunks(
    sim: WireSimulator,
) -> None:
    # llama-cpp-python's server sends one chunk per generated token and no usage.
    sim.enqueue(
        SimTurn(text="Red, green, blue.", text_chunks=("Red", ",", " green", ",", " blue", "."))
    )
    response = await _complete(_model(sim, LLAMACPP_PYTHON), TOOL_LOOP)
    assert response.usage.output_tokens == 6
    assert response.message.parts == (TextPart(text="Red, green, blue."),)


async def test_twin_a_server_that_reports_usage_is_believed(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="Red.", usage=SimUsage(input_tokens=30, output_tokens=2)))
    response = await _complete(_model(sim, "llamacpp-server"), TOOL_LOOP)
    assert sim.requests[0].body["stream_options"] == {"include_usage": True}
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 2)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_the_tool_loop_goes_out_with_string_content(sim: WireSimulator, stream: bool) -> None:
    sim.enqueue(SimTurn(text="It is 18 C in Paris."))
    response = await _complete(_model(sim, "llamacpp-server", stream=stream), TOOL_LOOP)
    assert response.message.text == "It is 18 C in Paris."
    sent = sim.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert all(isinstance(m["content"], str) for m in sent)


async def test_a_stream_ending_with_done_but_no_finish_reason_is_complete(
    sim: WireSimulator,
) -> None:
    sim.enqueue(SimTurn(text="All done.", send_finish_reason=False))
    sim.enqueue(
        SimTurn(
            calls=(SimCall(name="get_weather", arguments={"city": "Rome"}),),
            send_finish_reason=False,
        )
    )
    model = _model(sim, "vllm")
    text = await _complete(model, TOOL_LOOP)
    calls = await _complete(_model(sim, "vllm"), TOOL_LOOP)
    assert text.message.text == "All done."
    assert text.stop_reason is StopReason.END_TURN
    assert calls.stop_reason is StopReason.TOOL_CALLS
    assert calls.message.tool_calls[0].arguments == {"city": "Rome"}


async def test_twin_a_stream_cut_off_before_done_is_interrupted(sim: WireSimulator) -> None:
    sim.enqueue(
        SimTurn(
            text="All done, and then some.",
            send_finish_reason=False,
            fault=Fault(disconnect_after=3),
        )
    )
    with pytest.raises(StreamInterrupted):
        await _complete(_model(sim, "vllm"), TOOL_LOOP)
