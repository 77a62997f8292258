"""OpenAI-compatible servers through the official `openai` SDK against the simulator speaking
each server's documented variant: Mistral's typed content chunks, Groq's `x_groq.usage`,
OpenRouter's keep-alive comments and numeric in-stream error codes."""

from __future__ import annotations

from typing import Any

import pytest

from legato.exceptions import (
    ContextLengthExceeded,
    InvalidRequest,
    ModelError,
    RateLimited,
    ResponseParseError,
    StreamInterrupted,
)
from legato.messages import Message, TextPart, ThinkingPart
from legato.models import TextDelta, ThinkingDelta, openai_chat
from legato.models import _chat_read as chat_read
from legato.models._base import ModelRequest, ResponseCompleted
from legato.models._provider import ProviderSettings
from legato.models.openai_chat import OpenAIChatModel
from legato.models.openai_compatible import compatible_model
from legato.models.retry import RetryPolicy
from legato.simulator import ErrorKind, Fault, SimTurn, SimUsage, WireSimulator

MODELS = {
    "openai": ("openai-chat", "gpt-4o"),
    "groq": ("groq", "llama-3.3-70b-versatile"),
    "mistral": ("mistral", "magistral-medium-latest"),
    "openrouter": ("openrouter", "openai/gpt-4o"),
}


def _model(sim: WireSimulator, flavor: str, *, stream: bool = True) -> OpenAIChatModel:
    server, name = MODELS[flavor]
    settings = ProviderSettings(stream=stream, retry=RetryPolicy(max_attempts=1))
    prefix = "" if flavor == "openai" else f"/{flavor}"
    if flavor == "openai":
        return OpenAIChatModel(name, base_url=f"{sim.url}/v1", api_key="sk-test", settings=settings)
    return compatible_model(
        server, name, base_url=f"{sim.url}{prefix}/v1", api_key="test-key", settings=settings
    )


async def _run(model: OpenAIChatModel) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    response = None
    try:
        async for event in model.stream(ModelRequest(messages=(Message.user("Hi"),))):
            events.append(event)
            if isinstance(event, ResponseCompleted):
                response = event.response
    finally:
        await model.aclose()
    return response, events


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_mistral_typed_content_chunks_become_thinking_and_text(
    sim: WireSimulator, stream: bool
) -> None:
    sim.enqueue(SimTurn(thinking="Greeting: answer kindly.", text="Hello there!"))
    response, events = await _run(_model(sim, "mistral", stream=stream))
    thinking, text = response.message.parts
    assert isinstance(thinking, ThinkingPart) and thinking.text == "Greeting: answer kindly."
    assert text == TextPart(text="Hello there!")
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert all(isinstance(e.text, str) for e in deltas)
    if stream:
        assert "".join(e.text for e in deltas) == "Hello there!"
        assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == thinking.text


async def test_unknown_chunk_types_are_skipped_and_bad_content_is_a_parse_error(
    sim: WireSimulator,
) -> None:
    head = '"id":"c","object":"chat.completion.chunk","created":1,"model":"m"'
    odd = (
        f'data: {{{head},"choices":[{{"index":0,"delta":{{"content":'
        '[{"type":"reference","reference_ids":[1]},{"type":"text","text":"ok "}]},'
        '"finish_reason":null}]}\n\n'
    ).encode()
    sim.enqueue(SimTurn(text="fine", fault=Fault(raw_event=odd, raw_after=1)))
    response, _ = await _run(_model(sim, "mistral"))
    assert response.message.text == "ok fine"
    bad = (
        f'data: {{{head},"choices":[{{"index":0,"delta":{{"content":5}},"finish_reason":null}}]}}\n\n'
    ).encode()
    sim.enqueue(SimTurn(text="fine", fault=Fault(raw_event=bad, raw_after=1)))
    with pytest.raises(ResponseParseError) as info:
        await _run(_model(sim, "mistral"))
    assert "content" in str(info.value.body)


async def test_groq_streamed_usage_is_read_from_x_groq(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="Hi!", usage=SimUsage(input_tokens=40, output_tokens=9)))
    response, _ = await _run(_model(sim, "groq"))
    assert (response.usage.input_tokens, response.usage.output_tokens) == (40, 9)
    assert response.cost is not None and response.cost > 0


async def test_twin_without_x_groq_a_stream_reports_no_tokens(
    sim: WireSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groq's usage chunk with the x_groq field removed: what legato saw before (0 tokens)."""
    sim.enqueue(SimTurn(text="Hi!", usage=SimUsage(input_tokens=40, output_tokens=9)))
    model = _model(sim, "groq")
    original = chat_read.read_chunk

    def without_x_groq(chunk: Any, *args: Any) -> Any:
        chunk.pop("x_groq", None)
        return original(chunk, *args)

    monkeypatch.setattr(openai_chat, "read_chunk", without_x_groq)  # twin: the protection off
    response, _ = await _run(model)
    assert response.usage.input_tokens == 0


async def test_openrouter_keepalive_comments_and_usage_cost_are_ignored(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="Routed.", usage=SimUsage(input_tokens=7, output_tokens=3)))
    response, _ = await _run(_model(sim, "openrouter"))
    assert response.message.text == "Routed."
    assert (response.usage.input_tokens, response.usage.output_tokens) == (7, 3)


ERRORS: list[tuple[ErrorKind, type[ModelError], bool]] = [
    ("invalid", InvalidRequest, False),
    ("context_length", ContextLengthExceeded, False),
    ("not_found", InvalidRequest, False),
    ("rate_limit", RateLimited, True),
    ("server", StreamInterrupted, True),
]


@pytest.mark.parametrize("flavor", ["openai", "groq", "openrouter"])
@pytest.mark.parametrize(("kind", "expected", "retryable"), ERRORS, ids=[e[0] for e in ERRORS])
async def test_in_stream_errors_are_classified_by_their_code(
    sim: WireSimulator,
    flavor: str,
    kind: ErrorKind,
    expected: type[ModelError],
    retryable: bool,
) -> None:
    sim.enqueue(SimTurn(text="partial text", fault=Fault(error_event_after=2, event_error=kind)))
    with pytest.raises(ModelError) as info:
        await _run(_model(sim, flavor))
    assert type(info.value) is expected
    assert info.value.retryable is retryable


def test_an_exhausted_quota_is_a_rate_limit_that_is_not_retried() -> None:
    from legato.models._provider import error_from_status

    quota = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    limited = {
        "error": {
            "message": "Rate limit reached",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    exhausted = error_from_status(429, provider="openai", body=quota)
    assert isinstance(exhausted, RateLimited) and exhausted.retryable is False
    assert error_from_status(429, provider="openai", body=limited).retryable is True  # the twin
