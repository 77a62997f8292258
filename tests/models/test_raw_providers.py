"""OpenAI Responses and Anthropic answers read once, from their wire JSON.

The SDK still sends the request (auth, base URL, headers, timeouts, status errors); the
answer comes back as the raw HTTP response and legato reads the JSON itself. These tests
check, against the wire simulator, that the SDK's typed objects are never built for an
answer (with the twin: the SDK's own typed call does build them, so the spy would see it),
and that a payload of the wrong shape is a `ResponseParseError` carrying it. The conformance
suite runs every scenario (errors, cut streams, malformed JSON, both transports) through
the same path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from legato.exceptions import ResponseParseError
from legato.messages import Message, ModelResponse, ToolDefinition
from legato.models import ModelRequest, ResponseCompleted
from legato.models._provider import ProviderModel, ProviderSettings
from legato.models.assembly import ResponseAssembler
from legato.models.retry import RetryPolicy
from legato.simulator import SimCall, SimTurn, WireSimulator

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
TURN = SimTurn(
    text="Looking.", calls=(SimCall(id="call_1", name="get_weather", arguments={"city": "Bern"}),)
)


def _spy(monkeypatch: pytest.MonkeyPatch, base: type[Any]) -> list[str]:
    """Record every typed object the SDK's client builds from an answer."""
    built: list[str] = []
    original: Callable[..., Any] = base._process_response_data

    def process(self: Any, *, data: object, cast_to: type[Any], response: Any) -> Any:
        built.append(getattr(cast_to, "__name__", str(cast_to)))
        return original(self, data=data, cast_to=cast_to, response=response)

    monkeypatch.setattr(base, "_process_response_data", process)
    return built


def _model(api: str, url: str, stream: bool) -> ProviderModel:
    settings = ProviderSettings(stream=stream, retry=RetryPolicy(max_attempts=1))
    if api == "anthropic":
        from legato.models.anthropic import AnthropicModel

        return AnthropicModel("claude-sonnet-4-6", base_url=url, api_key="sk-t", settings=settings)
    from legato.models.openai_responses import OpenAIResponsesModel

    return OpenAIResponsesModel("gpt-4o", base_url=f"{url}/v1", api_key="sk-t", settings=settings)


def _sdk_base(api: str) -> type[Any]:
    """The SDK's client base class, whose `_process_response_data` builds its types."""
    if api == "anthropic":
        import anthropic._base_client

        return anthropic._base_client.BaseClient
    import openai._base_client

    return openai._base_client.BaseClient


async def _answer(model: ProviderModel) -> ModelResponse:
    request = ModelRequest(messages=(Message.user("Weather in Bern?"),), tools=(WEATHER,))
    found: ModelResponse | None = None
    async for event in model.stream(request):
        if isinstance(event, ResponseCompleted):
            found = event.response
    assert found is not None
    return found


@pytest.mark.parametrize("api", ["responses", "anthropic"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_an_answer_is_read_without_the_sdks_types(
    sim: WireSimulator, monkeypatch: pytest.MonkeyPatch, stream: bool, api: str
) -> None:
    built = _spy(monkeypatch, _sdk_base(api))
    model = _model(api, sim.url, stream)
    sim.enqueue(TURN)
    try:
        response = await _answer(model)
    finally:
        await model.aclose()  # type: ignore[attr-defined] # every provider model has it
    assert response.message.text == "Looking."
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [
        ("get_weather", {"city": "Bern"})
    ]
    assert built == []


async def test_twin_the_sdks_typed_call_builds_its_types(
    sim: WireSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openai
    import openai._base_client

    built = _spy(monkeypatch, openai._base_client.BaseClient)
    sim.enqueue(TURN, TURN)
    async with openai.AsyncOpenAI(base_url=f"{sim.url}/v1", api_key="k", max_retries=0) as client:
        await client.responses.create(model="gpt-4o", input="Weather?")
        events = await client.responses.create(model="gpt-4o", input="Weather?", stream=True)
        async for _ in events:
            pass
    assert "Response" in built and len(built) > 2


async def test_twin_the_anthropic_sdks_typed_call_builds_its_types(
    sim: WireSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anthropic
    import anthropic._base_client

    built = _spy(monkeypatch, anthropic._base_client.BaseClient)
    sim.enqueue(TURN, TURN)
    prompt: Any = [{"role": "user", "content": "Weather?"}]
    async with anthropic.AsyncAnthropic(base_url=sim.url, api_key="k", max_retries=0) as client:
        await client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=prompt)
        events = await client.messages.create(
            model="claude-sonnet-4-6", max_tokens=64, messages=prompt, stream=True
        )
        async for _ in events:
            pass
    assert "Message" in built and len(built) > 2


@pytest.mark.parametrize(
    "payload",
    [{"output": "not a list"}, {"output": [{"type": "message", "content": [7]}]}, ["a list"]],
    ids=["output", "content", "top"],
)
def test_a_responses_payload_of_the_wrong_shape_is_a_parse_error(payload: object) -> None:
    from legato.models.openai_responses import OpenAIResponsesModel, _State

    model = OpenAIResponsesModel("gpt-4o", api_key="k", base_url="http://127.0.0.1:9")
    assembler, state = ResponseAssembler(provider="openai"), _State()
    with pytest.raises(ResponseParseError, match="unexpected response shape") as caught:
        model._translate(model._whole, payload, assembler, state)
    assert caught.value.body == payload


@pytest.mark.parametrize(
    "payload",
    [
        {"model": "m", "id": "x", "content": "not a list"},
        {"model": "m", "id": "x", "content": [{"type": "text"}]},
        {"content": []},
    ],
    ids=["content", "block", "top"],
)
def test_an_anthropic_payload_of_the_wrong_shape_is_a_parse_error(payload: object) -> None:
    from legato.models.anthropic import AnthropicModel, _State

    model = AnthropicModel("claude-sonnet-4-6", api_key="k", base_url="http://127.0.0.1:9")
    assembler, state = ResponseAssembler(provider="anthropic"), _State()
    with pytest.raises(ResponseParseError, match="unexpected response shape") as caught:
        model._translate(model._whole, payload, assembler, state, None)
    assert caught.value.body == payload


async def _anthropic_call(sim: WireSimulator, model_name: str, *, thinking: int | None) -> None:
    from legato.models import ModelSettings
    from legato.models.anthropic import AnthropicModel

    settings = ProviderSettings(retry=RetryPolicy(max_attempts=1))
    model = AnthropicModel(model_name, base_url=sim.url, api_key="sk-t", settings=settings)
    sim.enqueue(SimTurn(text="Hi."))
    request = ModelRequest(
        messages=(Message.user("Hi"),), settings=ModelSettings(thinking_budget=thinking)
    )
    try:
        async for _ in model.stream(request):
            pass
    finally:
        await model.aclose()


async def test_a_deprecated_anthropic_model_still_warns_as_the_sdk_did(
    sim: WireSimulator,
) -> None:
    # `messages.create` is no longer called; its warnings come from the SDK's own lists
    from anthropic._data import DEPRECATED_MODELS, MODELS_TO_WARN_WITH_THINKING_ENABLED

    deprecated = next(iter(DEPRECATED_MODELS))
    with pytest.warns(DeprecationWarning, match=f"'{deprecated}' is deprecated"):
        await _anthropic_call(sim, deprecated, thinking=None)
    with pytest.warns(UserWarning, match="thinking.type=enabled"):
        await _anthropic_call(sim, MODELS_TO_WARN_WITH_THINKING_ENABLED[0], thinking=1024)


async def test_twin_a_current_anthropic_model_gives_no_warning(sim: WireSimulator) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await _anthropic_call(sim, "claude-sonnet-4-6", thinking=1024)
