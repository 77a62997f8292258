"""One scenario suite, run against every provider module through its official SDK.

The simulator speaks each provider's real wire format on 127.0.0.1; adding a provider means
adding a `Case` to `conformance_cases.CASES`.
"""

from __future__ import annotations

import json
from typing import Any

import genai_prices
import pytest
from conformance_cases import CASES, ERROR_CLASSES, Case, error_name
from pydantic import BaseModel
from scenarios import (
    TIME,
    WEATHER,
    call,
    check_awkward_arguments,
    check_image_sent,
    check_one_tool_call,
    check_parallel_calls,
    check_plain_text,
    check_streamed_text,
    check_text_before_tool_call,
    close,
    make,
    request_for,
)

from legato import Agent, tool
from legato.events import ModelResponded
from legato.exceptions import (
    ModelError,
    ResponseParseError,
    StreamInterrupted,
)
from legato.messages import ModelResponse, StopReason, TextPart, ThinkingPart
from legato.models import ThinkingDelta
from legato.models._provider import ProviderSettings
from legato.models.fallback import FallbackModel
from legato.models.retry import RetryPolicy
from legato.simulator import ErrorKind, Fault, SimCall, SimTurn, SimUsage, WireSimulator

pytestmark = pytest.mark.parametrize("case", CASES, ids=str)
STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])


@STREAM
async def test_plain_text(case: Case, sim: WireSimulator, stream: bool) -> None:
    await check_plain_text(case, sim, stream=stream)


async def test_streamed_text_arrives_in_deltas(case: Case, sim: WireSimulator) -> None:
    await check_streamed_text(case, sim)


@STREAM
async def test_one_tool_call(case: Case, sim: WireSimulator, stream: bool) -> None:
    await check_one_tool_call(case, sim, stream=stream)


@STREAM
async def test_parallel_tool_calls(case: Case, sim: WireSimulator, stream: bool) -> None:
    await check_parallel_calls(case, sim, stream=stream)


@pytest.mark.parametrize("byte_split", [1, 3, 7, 4096])
async def test_arguments_split_at_awkward_boundaries(
    case: Case, sim: WireSimulator, byte_split: int
) -> None:
    await check_awkward_arguments(case, sim, byte_split=byte_split)


@STREAM
async def test_text_before_a_tool_call(case: Case, sim: WireSimulator, stream: bool) -> None:
    await check_text_before_tool_call(case, sim, stream=stream)


async def test_images_reach_the_wire(case: Case, sim: WireSimulator) -> None:
    await check_image_sent(case, sim)


# -- a whole agent run ---------------------------------------------------------------------------

FORECASTS = {"Paris": "sunny, 24 °C", "Rome": "rain, 17 °C"}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return FORECASTS[city]


def _run_turns() -> list[SimTurn]:
    return [
        SimTurn(
            text="Checking Paris first.",
            calls=(SimCall(name="get_weather", arguments={"city": "Paris"}),),
            usage=SimUsage(input_tokens=100, output_tokens=10),
        ),
        SimTurn(
            calls=(SimCall(name="get_weather", arguments={"city": "Rome"}),),
            usage=SimUsage(input_tokens=150, output_tokens=12),
        ),
        SimTurn(
            text="Paris is sunny; Rome is rainy.", usage=SimUsage(input_tokens=200, output_tokens=9)
        ),
    ]


@STREAM
async def test_tool_results_round_trip_over_several_steps(
    case: Case, sim: WireSimulator, stream: bool
) -> None:
    sim.enqueue(*_run_turns())
    model = make(case, sim, stream=stream)
    try:
        result = await Agent(model, tools=[get_weather], instructions="Be brief.").run(
            "Weather in Paris, then Rome?"
        )
    finally:
        await close(model)
    assert result.output == "Paris is sunny; Rome is rainy."
    assert result.usage.requests == 3
    assert result.usage.input_tokens == 450 and result.usage.output_tokens == 31
    costs = [e.response.cost for e in result.journal.events if isinstance(e, ModelResponded)]
    assert len(costs) == 3
    if case.price_provider is not None:
        assert all(c and c > 0 for c in costs)
        assert result.cost == pytest.approx(sum(c or 0 for c in costs))
    calls = [c for m in result.messages for c in m.tool_calls]
    assert [c.arguments for c in calls] == [{"city": "Paris"}, {"city": "Rome"}]
    results = [r.text for m in result.messages for r in m.tool_results]
    assert results == ["sunny, 24 °C", "rain, 17 °C"]
    # The third request carried both calls and both results, in the provider's own format.
    last = json.dumps(sim.requests[2].body, ensure_ascii=False)
    for call_part in calls:
        assert call_part.id in last
    assert "sunny, 24 °C" in last and "rain, 17 °C" in last
    order = [last.index(x) for x in (calls[0].id, "sunny, 24 °C", calls[1].id, "rain, 17 °C")]
    assert order == sorted(order)
    sim.assert_complete()


class Forecast(BaseModel):
    city: str
    high_c: int
    dry: bool


@STREAM
async def test_structured_output(case: Case, sim: WireSimulator, stream: bool) -> None:
    answer = {"city": "Zürich", "high_c": 21, "dry": True}
    if case.output_as_tool:
        sim.enqueue(SimTurn(calls=(SimCall(name="final_result", arguments=answer),)))
    else:
        sim.enqueue(SimTurn(text=json.dumps(answer, ensure_ascii=False)))
    model = make(case, sim, stream=stream)
    try:
        agent = Agent(model, output_type=Forecast, output_mode="native")
        result = await agent.run("Forecast for Zürich?")
    finally:
        await close(model)
    assert result.output == Forecast(city="Zürich", high_c=21, dry=True)
    body = json.dumps(sim.requests[0].body)
    assert "high_c" in body  # the schema went out natively
    assert len(sim.requests) == 1


# -- usage and cost --------------------------------------------------------------------------


async def test_usage_and_cost(case: Case, sim: WireSimulator) -> None:
    usage = SimUsage(input_tokens=1000, output_tokens=200, cached_tokens=400, reasoning_tokens=50)
    sim.enqueue(SimTurn(text="ok", usage=usage))
    model = make(case, sim)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    got = out.response.usage
    assert (got.input_tokens, got.output_tokens, got.requests) == (1000, 200, 1)
    assert got.cache_read_tokens == (400 if case.cached_tokens else 0)
    assert got.reasoning_tokens == (50 if case.reasoning_tokens else 0)
    if case.price_provider is None:
        assert not out.response.cost
        return
    expected = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=1000,
            output_tokens=200,
            cache_read_tokens=got.cache_read_tokens,
        ),
        case.model,
        provider_id=case.price_provider,
    ).total_price
    assert out.response.cost == pytest.approx(float(expected))
    assert (out.response.cost or 0) > 0


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(ERROR_CLASSES), ids=str)
async def test_http_errors_map_to_the_exception_tree(
    case: Case, sim: WireSimulator, kind: ErrorKind
) -> None:
    if kind not in case.http_errors:
        pytest.skip(f"{case.id} has no HTTP error for {kind}")
    sim.enqueue(
        SimTurn(fault=Fault(error=kind, retry_after=7, message="key sk-live-abcdef123456 was seen"))
    )
    model = make(case, sim)
    try:
        with pytest.raises(ModelError) as info:
            await call(model, request_for())
    finally:
        await close(model)
    assert error_name(info.value) == ERROR_CLASSES[kind]
    assert info.value.provider
    assert "sk-live-abcdef123456" not in json.dumps(info.value.body, default=str)
    if kind == "rate_limit":
        assert getattr(info.value, "retry_after", None) == 7
    assert len(sim.requests) == 1  # retries are off here: nothing was sent twice


async def test_finish_content_filter_raises(case: Case, sim: WireSimulator) -> None:
    if not case.finish_filter:
        pytest.skip(f"{case.id} cannot report a filtered answer")
    sim.enqueue(SimTurn(text="partial", finish="content_filter"))
    model = make(case, sim)
    try:
        with pytest.raises(ModelError) as info:
            await call(model, request_for())
    finally:
        await close(model)
    assert error_name(info.value) == "ContentFiltered"


async def test_max_tokens_is_a_stop_reason(case: Case, sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="cut sh", finish="length"))
    model = make(case, sim)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    assert out.response.stop_reason is StopReason.MAX_TOKENS


@STREAM
async def test_mid_stream_disconnect_is_stream_interrupted(
    case: Case, sim: WireSimulator, stream: bool
) -> None:
    # streamed: three events, then the line drops; whole: thirty bytes of the body
    cut = 3 if stream else 30
    sim.enqueue(SimTurn(text="a long answer that breaks off", fault=Fault(disconnect_after=cut)))
    model = make(case, sim, stream=stream)
    try:
        with pytest.raises(StreamInterrupted):
            await call(model, request_for())
    finally:
        await close(model)


async def test_empty_200_is_an_error_not_an_empty_answer(case: Case, sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="never sent", fault=Fault(empty=True)))
    model = make(case, sim)
    try:
        with pytest.raises(StreamInterrupted, match="no events"):
            await call(model, request_for())
    finally:
        await close(model)


@STREAM
async def test_malformed_json_is_a_parse_error_with_the_payload(
    case: Case, sim: WireSimulator, stream: bool
) -> None:
    sim.enqueue(SimTurn(text="some text here", fault=Fault(malformed_after=2)))
    model = make(case, sim, stream=stream)
    try:
        with pytest.raises(ResponseParseError) as info:
            await call(model, request_for())
    finally:
        await close(model)
    assert info.value.body, "the raw payload is kept"


async def test_error_event_inside_the_stream(case: Case, sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="some text here", fault=Fault(error_event_after=2)))
    model = make(case, sim)
    try:
        with pytest.raises(ModelError) as info:
            await call(model, request_for())
    finally:
        await close(model)
    assert info.value.retryable


async def test_slow_chunks_still_arrive(case: Case, sim: WireSimulator) -> None:
    chunks = ("slow", " and", " steady", " wins")
    sim.enqueue(SimTurn(text="".join(chunks), text_chunks=chunks, fault=Fault(delay=0.04)))
    model = make(case, sim, timeout=2.0)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    assert out.response.message.text == "slow and steady wins"
    assert out.text_deltas == "slow and steady wins"


@STREAM
async def test_timeout(case: Case, sim: WireSimulator, stream: bool) -> None:
    sim.enqueue(SimTurn(text="too late", fault=Fault(delay=1.0)))
    model = make(case, sim, stream=stream, timeout=0.2)
    try:
        with pytest.raises(ModelError) as info:
            await call(model, request_for())
    finally:
        await close(model)
    assert error_name(info.value) == "ModelTimeout"


async def test_retries_honour_retry_after_and_skip_non_retryable(
    case: Case, sim: WireSimulator
) -> None:
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    policy = RetryPolicy(max_attempts=3, initial_delay=0.01, sleep=fake_sleep)
    sim.enqueue(
        SimTurn(fault=Fault(error="rate_limit", retry_after=2)),
        SimTurn(fault=Fault(error="overloaded")),
        SimTurn(text="third time lucky"),
        SimTurn(fault=Fault(error="auth")),
    )
    model = case.make(sim.url, ProviderSettings(retry=policy))
    try:
        out = await call(model, request_for())
        assert out.response.message.text == "third time lucky"
        assert len(waits) == 2 and waits[0] >= 2 and waits[1] <= 0.02
        with pytest.raises(ModelError) as info:
            await call(model, request_for())
    finally:
        await close(model)
    assert error_name(info.value) == "AuthenticationFailed"
    assert len(sim.requests) == 4 and len(waits) == 2


# -- failover ----------------------------------------------------------------------------------


def _other(case: Case) -> Case:
    return next(c for c in CASES if c.api != case.api and c.api in ("anthropic", "openai_chat"))


async def test_failover_mid_conversation_keeps_the_full_history(
    case: Case, sim: WireSimulator
) -> None:
    backup_case = _other(case)
    turns = _run_turns()
    sim.enqueue(turns[0], SimTurn(fault=Fault(error="overloaded")), turns[1], turns[2])
    primary = make(case, sim)
    backup = make(backup_case, sim)
    model = FallbackModel([primary, backup])
    try:
        result = await Agent(model, tools=[get_weather]).run("Weather in Paris, then Rome?")
    finally:
        await close(primary)
        await close(backup)
    assert result.output == "Paris is sunny; Rome is rainy."
    apis = [r.api for r in sim.requests]
    assert apis == [case.api, case.api, backup_case.api, case.api]
    first_call = result.messages[1].tool_calls[0]
    # The backup saw the whole conversation, including the call made on the primary.
    handed_over: Any = json.dumps(sim.requests[2].body, ensure_ascii=False)
    assert "Weather in Paris, then Rome?" in handed_over
    assert "Checking Paris first." in handed_over
    assert first_call.id in handed_over and "sunny, 24 °C" in handed_over
    assert [a.model for a in model.attempts] == []  # the last call was answered first time


@STREAM
async def test_thinking_is_kept_apart_from_the_answer(
    case: Case, sim: WireSimulator, stream: bool
) -> None:
    sim.enqueue(
        SimTurn(thinking="Weather means a tool.", thinking_signature="c2lnbmF0dXJl", text="Sunny.")
    )
    model = make(case, sim, stream=stream)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    thinking, answer = out.response.message.parts
    assert isinstance(thinking, ThinkingPart) and thinking.text == "Weather means a tool."
    assert thinking.provider  # signatures go back only to the provider that made them
    assert thinking.signature == ("c2lnbmF0dXJl" if case.thinking_signature else None)
    assert answer == TextPart(text="Sunny.")
    assert "".join(e.text for e in out.events if isinstance(e, ThinkingDelta)) == thinking.text
    assert out.text_deltas == "Sunny."


async def test_streamed_and_whole_answers_are_equal(case: Case, sim: WireSimulator) -> None:
    turn = SimTurn(
        thinking="Two cities.",
        text="Checking both. ",
        calls=(
            SimCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
            SimCall(id="call_b", name="get_time", arguments={"city": "Tokyo"}),
        ),
        usage=SimUsage(input_tokens=300, output_tokens=30, cached_tokens=100),
    )
    sim.enqueue(turn, turn)
    answers: list[ModelResponse] = []
    for stream in (True, False):
        model = make(case, sim, stream=stream)
        try:
            answers.append((await call(model, request_for(tools=[WEATHER, TIME]))).response)
        finally:
            await close(model)
    streamed, whole = answers
    assert streamed.message.parts == whole.message.parts
    # provider data (response item ids) differs per response; what is kept must not
    assert (streamed.message.provider_details or {}).keys() == (
        whole.message.provider_details or {}
    ).keys()
    assert streamed.usage == whole.usage and streamed.cost == whole.cost
    assert streamed.stop_reason is whole.stop_reason is StopReason.TOOL_CALLS


async def test_settings_headers_and_extra_body_reach_the_wire(
    case: Case, sim: WireSimulator
) -> None:
    from legato.models import ModelSettings

    sim.enqueue(SimTurn(text="ok"))
    model = case.make(
        sim.url,
        ProviderSettings(
            retry=RetryPolicy(max_attempts=1),
            headers={"x-client-header": "c1"},
            extra_body={"probe_client": "p1"},
        ),
    )
    settings = ModelSettings(
        temperature=0.25,
        max_tokens=321,
        stop_sequences=("STOP-HERE",),
        extra_headers={"x-request-header": "r1"},
        extra_body={"probe_request": "p2"},
    )
    try:
        await call(model, request_for(settings=settings))
    finally:
        await close(model)
    (recorded,) = sim.requests
    body = json.dumps(recorded.body)
    for expected in ("0.25", "321", '"probe_client": "p1"', '"probe_request": "p2"'):
        assert expected in body, (expected, body)
    assert ("STOP-HERE" in body) is case.stop_sequences
    assert recorded.headers.get("x-client-header") == "c1"
    assert recorded.headers.get("x-request-header") == "r1"


@STREAM
async def test_text_after_a_tool_call(case: Case, sim: WireSimulator, stream: bool) -> None:
    calls = (SimCall(id="call_x", name="get_weather", arguments={"city": "Oslo"}),)
    sim.enqueue(SimTurn(text="I asked for Oslo.", calls=calls, text_first=False))
    model = make(case, sim, stream=stream)
    try:
        out = await call(model, request_for(tools=[WEATHER]))
    finally:
        await close(model)
    kinds = [p.kind for p in out.response.message.parts]
    # A whole Chat Completions or Ollama message keeps text and calls in separate fields, so
    # their order is not on the wire; streams and the other APIs keep it.
    ordered = sim.requests[0].stream or case.api in ("anthropic", "gemini", "openai_responses")
    assert kinds == ["tool_call", "text"] if ordered else sorted(kinds) == ["text", "tool_call"]
    assert out.response.message.text == "I asked for Oslo."
    assert out.response.message.tool_calls[0].arguments == {"city": "Oslo"}
    assert out.response.stop_reason is StopReason.TOOL_CALLS
