"""Every documented finish reason, unknown fields and event types, and payloads of the wrong
shape, for every provider, through its official SDK against the simulator.

The simulator also always sends the documented fields legato does not read (OpenAI's
`system_fingerprint`, `service_tier`, `refusal`, audio and prediction token counts; Anthropic's
`ping` events, `cache_creation` and `service_tier`; Gemini's `promptTokensDetails` and
`createTime`; Ollama's durations; Responses' `response.in_progress`), so every other test of
the suite runs with them too.
"""

from __future__ import annotations

import pytest
from conformance_cases import CASES, Case
from scenarios import call, close, make, request_for

from legato.exceptions import ContentFiltered, ModelError, ResponseParseError, StreamInterrupted
from legato.messages import StopReason
from legato.simulator import ErrorKind, Fault, SimTurn, WireSimulator

Outcome = StopReason | type[ModelError]

FINISH: dict[str, list[tuple[str, Outcome]]] = {
    "openai_chat": [
        ("stop", StopReason.END_TURN),
        ("length", StopReason.MAX_TOKENS),
        ("model_length", StopReason.MAX_TOKENS),  # Mistral
        ("tool_calls", StopReason.TOOL_CALLS),
        ("function_call", StopReason.TOOL_CALLS),  # the deprecated form
        ("content_filter", ContentFiltered),
        ("error", StreamInterrupted),  # OpenRouter, Mistral: generation failed upstream
        ("some_future_reason", StopReason.OTHER),
    ],
    "openai_responses": [
        ("max_output_tokens", StopReason.MAX_TOKENS),
        ("content_filter", ContentFiltered),
        ("some_future_reason", StopReason.OTHER),
    ],
    "anthropic": [
        ("end_turn", StopReason.END_TURN),
        ("max_tokens", StopReason.MAX_TOKENS),
        ("stop_sequence", StopReason.STOP_SEQUENCE),
        ("tool_use", StopReason.TOOL_CALLS),
        # `pause_turn` is continued by the adapter: test_anthropic_pause_turn.py
        ("refusal", ContentFiltered),
        ("model_context_window_exceeded", StopReason.MAX_TOKENS),
        ("some_future_reason", StopReason.OTHER),
    ],
    "gemini": [
        ("STOP", StopReason.END_TURN),
        ("MAX_TOKENS", StopReason.MAX_TOKENS),
        ("SAFETY", ContentFiltered),
        ("RECITATION", ContentFiltered),
        ("BLOCKLIST", ContentFiltered),
        ("PROHIBITED_CONTENT", ContentFiltered),
        ("SPII", ContentFiltered),
        ("IMAGE_SAFETY", ContentFiltered),
        ("LANGUAGE", StopReason.OTHER),
        ("OTHER", StopReason.OTHER),
        ("MALFORMED_FUNCTION_CALL", StopReason.OTHER),
        ("UNEXPECTED_TOOL_CALL", StopReason.OTHER),
        ("FINISH_REASON_UNSPECIFIED", StopReason.OTHER),
        ("SOME_FUTURE_REASON", StopReason.OTHER),
    ],
    "ollama": [
        ("stop", StopReason.END_TURN),
        ("length", StopReason.MAX_TOKENS),
        ("load", StopReason.OTHER),
        ("some_future_reason", StopReason.OTHER),
    ],
}

FINISH_CASES = [
    pytest.param(case, raw, outcome, id=f"{case.id}-{raw}")
    for case in CASES
    for raw, outcome in FINISH[case.api]
]


@pytest.mark.parametrize(("case", "raw", "outcome"), FINISH_CASES)
# google-genai warns (UserWarning) about an enum value it does not know and keeps it.
@pytest.mark.filterwarnings("ignore:.* is not a valid FinishReason:UserWarning")
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_every_documented_finish_reason(
    case: Case, sim: WireSimulator, raw: str, outcome: Outcome, stream: bool
) -> None:
    sim.enqueue(SimTurn(text="Some answer.", raw_finish=raw))
    model = make(case, sim, stream=stream)
    try:
        if isinstance(outcome, StopReason):
            out = await call(model, request_for())
            assert out.response.stop_reason is outcome
            assert out.response.message.text == "Some answer."
        else:
            with pytest.raises(outcome):
                await call(model, request_for())
    finally:
        await close(model)


_HEAD = '"id":"c","object":"chat.completion.chunk","created":1,"model":"m"'
UNKNOWN: dict[str, bytes] = {
    "openai_chat": (
        b": keep-alive comment\n\n"
        + f'data: {{{_HEAD},"choices":[],"x_future":{{"a":1}}}}\n\n'.encode()
    ),
    "openai_responses": (
        b'event: response.future_thing\ndata: {"type":"response.future_thing",'
        b'"sequence_number":2,"item":{"a":1}}\n\n'
    ),
    "anthropic": b'event: future_event\ndata: {"type":"future_event","payload":{"a":1}}\n\n',
    "gemini": b'data: {"candidates":[],"futureField":{"a":1},"modelVersion":"m"}\n\n',
    "ollama": (
        b'{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant",'
        b'"content":"","future_field":1},"done":false,"x":{"a":1}}\n'
    ),
}


@pytest.mark.parametrize("case", CASES, ids=str)
async def test_unknown_events_and_fields_are_ignored(case: Case, sim: WireSimulator) -> None:
    sim.enqueue(
        SimTurn(text="Intact answer.", fault=Fault(raw_event=UNKNOWN[case.api], raw_after=2))
    )
    model = make(case, sim)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    assert out.response.message.text == "Intact answer."


WRONG: dict[str, bytes] = {
    "openai_chat": f'data: {{{_HEAD},"choices":[{{"index":0,"delta":{{"content":5}}}}]}}\n\n'.encode(),
    "openai_responses": (
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
        b'"sequence_number":3,"item_id":"x","output_index":0,"content_index":0,"delta":5}\n\n'
    ),
    "anthropic": (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":5}}\n\n'
    ),
    "gemini": b'data: {"candidates":[{"content":{"parts":"not a list"}}]}\n\n',
    "ollama": b'{"model":"m","message":"not an object","done":false}\n',
}


@pytest.mark.parametrize("case", CASES, ids=str)
async def test_a_payload_of_the_wrong_shape_is_a_typed_error_with_the_payload(
    case: Case, sim: WireSimulator
) -> None:
    sim.enqueue(SimTurn(text="Never seen.", fault=Fault(raw_event=WRONG[case.api], raw_after=2)))
    model = make(case, sim)
    try:
        with pytest.raises(ModelError) as info:
            await call(model, request_for())
    finally:
        await close(model)
    assert isinstance(info.value, ResponseParseError), repr(info.value)
    assert info.value.body is not None


IN_STREAM: list[tuple[ErrorKind, str, bool]] = [
    ("invalid", "InvalidRequest", False),
    ("rate_limit", "RateLimited", True),
    ("overloaded", "ModelOverloaded", True),
    ("server", "StreamInterrupted", True),
]


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize(
    ("kind", "expected", "retryable"), IN_STREAM, ids=[k for k, _, _ in IN_STREAM]
)
async def test_an_error_inside_a_stream_is_classified_by_its_code(
    case: Case, sim: WireSimulator, kind: ErrorKind, expected: str, retryable: bool
) -> None:
    sim.enqueue(SimTurn(text="partial answer", fault=Fault(error_event_after=2, event_error=kind)))
    model = make(case, sim)
    try:
        with pytest.raises(ModelError) as info:
            await call(model, request_for())
    finally:
        await close(model)
    name = type(info.value).__name__
    if case.api == "ollama":  # its in-stream error is a bare message, with no code to go by
        assert (name, info.value.retryable) == ("StreamInterrupted", True)
    elif kind == "server":  # a server error mid-stream: either retryable 5xx form
        assert name in ("StreamInterrupted", "ProviderServerError") and info.value.retryable
    else:
        assert (name, info.value.retryable) == (expected, retryable)
