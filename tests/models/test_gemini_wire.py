"""Gemini through the official SDK against the simulator: thought signatures on text parts,
JSON Schema fields (`parametersJsonSchema` / `responseJsonSchema`), free-form dicts, and
conversations Gemini cannot take. Shapes follow Gemini's published API reference."""

from __future__ import annotations

import base64
from typing import Any, cast

import pytest

from legato.exceptions import InvalidRequest, RateLimited, ToolDefinitionError
from legato.messages import JsonValue, Message, TextPart, ToolDefinition
from legato.models._base import ModelRequest, OutputSpec, ResponseCompleted
from legato.models._provider import ProviderSettings
from legato.models.dialects import to_gemini
from legato.models.gemini import PROFILE, GeminiModel
from legato.models.retry import RetryPolicy
from legato.simulator import Fault, SimCall, SimTurn, WireSimulator

SIG = base64.b64encode(b"text-signature-1").decode()
TREE: dict[str, JsonValue] = {
    "type": "object",
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
        }
    },
    "properties": {"tree": {"$ref": "#/$defs/node"}},
    "required": ["tree"],
}
LABELS: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"labels": {"type": "object", "additionalProperties": {"type": "integer"}}},
    "required": ["labels"],
}


def _model(sim: WireSimulator, *, stream: bool = True, **kw: Any) -> GeminiModel:
    settings = ProviderSettings(stream=stream, retry=RetryPolicy(max_attempts=1))
    return GeminiModel(
        "gemini-2.5-flash", base_url=sim.url, api_key="AIza-test", settings=settings, **kw
    )


async def _complete(model: GeminiModel, request: ModelRequest) -> Any:
    response = None
    async for event in model.stream(request):
        if isinstance(event, ResponseCompleted):
            response = event.response
    assert response is not None
    return response


def _parts(body: dict[str, Any], turn: int) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], body["contents"][turn]["parts"])


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_a_signature_on_text_is_kept_and_sent_back(sim: WireSimulator, stream: bool) -> None:
    sim.enqueue(SimTurn(text="Sunny in Paris.", text_signature=SIG))
    sim.enqueue(SimTurn(text="You're welcome."))
    model = _model(sim, stream=stream)
    try:
        first = await _complete(model, ModelRequest(messages=(Message.user("Weather?"),)))
        assert first.message.text == "Sunny in Paris."
        history = (Message.user("Weather?"), first.message, Message.user("Thanks"))
        await _complete(model, ModelRequest(messages=history))
    finally:
        await model.aclose()
    sent = _parts(sim.requests[1].body, 1)
    signed = [p for p in sent if p.get("thoughtSignature")]
    assert [p["thoughtSignature"] for p in signed] == [SIG]
    if stream:  # streamed: the signature came on an empty final text part, and goes back so
        assert sent == [{"text": "Sunny in Paris."}, {"text": "", "thoughtSignature": SIG}]
    else:
        assert sent == [{"text": "Sunny in Paris.", "thoughtSignature": SIG}]


async def test_twin_without_a_text_signature_nothing_is_invented(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="Sunny in Paris."))
    sim.enqueue(SimTurn(text="Bye."))
    model = _model(sim)
    try:
        first = await _complete(model, ModelRequest(messages=(Message.user("Weather?"),)))
        history = (Message.user("Weather?"), first.message, Message.user("Thanks"))
        await _complete(model, ModelRequest(messages=history))
    finally:
        await model.aclose()
    assert _parts(sim.requests[1].body, 1) == [{"text": "Sunny in Paris."}]


async def test_a_signed_empty_part_after_a_call_goes_back_after_it(sim: WireSimulator) -> None:
    call = SimCall(id="c1", name="get_weather", arguments={"city": "Paris"})
    sim.enqueue(SimTurn(calls=(call,), text_signature=SIG))
    sim.enqueue(SimTurn(text="Done."))
    model = _model(sim)
    try:
        tools = (ToolDefinition(name="get_weather", parameters=LABELS),)
        first = await _complete(
            model, ModelRequest(messages=(Message.user("Weather?"),), tools=tools)
        )
        history = (Message.user("Weather?"), first.message, Message.user("ok"))
        await _complete(model, ModelRequest(messages=history))
    finally:
        await model.aclose()
    sent = _parts(sim.requests[1].body, 1)
    assert "functionCall" in sent[0]
    assert sent[-1] == {"text": "", "thoughtSignature": SIG}


async def test_json_schema_fields_carry_refs_and_free_form_dicts(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text='{"tree": {"name": "a"}}'))
    model = _model(sim, stream=False)
    tools = (
        ToolDefinition(name="plant", parameters=TREE),
        ToolDefinition(name="tag", parameters=LABELS),
    )
    output = OutputSpec(name="answer", schema=TREE)
    try:
        await _complete(
            model, ModelRequest(messages=(Message.user("x"),), tools=tools, output=output)
        )
    finally:
        await model.aclose()
    body = sim.requests[0].body
    declarations = body["tools"][0]["functionDeclarations"]
    # google-genai sends this field in proto JSON's snake_case form, which the API accepts
    # like the camelCase one; either is the same field.
    sent = [d.get("parametersJsonSchema", d.get("parameters_json_schema")) for d in declarations]
    assert sent == [TREE, LABELS]
    assert all("parameters" not in d for d in declarations)
    config = body["generationConfig"]
    assert config["responseJsonSchema"] == TREE
    assert "responseSchema" not in config


def test_without_json_schema_the_old_form_refuses_what_it_cannot_say() -> None:
    """Profiles that take only `parameters`: recursion and dicts are typed errors, not OBJECT."""
    with pytest.raises(ToolDefinitionError, match="refers to itself"):
        to_gemini(TREE)
    with pytest.raises(ToolDefinitionError, match="labels: a free-form object"):
        to_gemini(LABELS)
    opts: dict[str, JsonValue] = {"type": "object", "additionalProperties": False}
    closed: dict[str, JsonValue] = {"type": "object", "properties": {"opts": opts}}
    assert to_gemini(closed) == {"type": "object", "properties": {"opts": {"type": "object"}}}


async def test_the_old_form_is_kept_where_the_profile_says_so(sim: WireSimulator) -> None:
    from dataclasses import replace

    sim.enqueue(SimTurn(text="ok"))
    model = _model(sim, stream=False, profile=replace(PROFILE, native_json_schema=False))
    plain: dict[str, JsonValue] = {"type": "object", "properties": {"city": {"type": "string"}}}
    try:
        await _complete(
            model,
            ModelRequest(
                messages=(Message.user("x"),), tools=(ToolDefinition(name="w", parameters=plain),)
            ),
        )
    finally:
        await model.aclose()
    (declaration,) = sim.requests[0].body["tools"][0]["functionDeclarations"]
    assert "parametersJsonSchema" not in declaration
    assert declaration["parameters"]["properties"]["city"]["type"] == "STRING"


async def test_a_tool_without_parameters_has_no_parameters_field_in_the_old_form(
    sim: WireSimulator,
) -> None:
    # Gemini's OpenAPI-subset `parameters` is optional ("omitted if the function has no
    # parameters"); an OBJECT without properties is refused with HTTP 400.
    from dataclasses import replace

    sim.enqueue(SimTurn(text="ok"))
    model = _model(sim, stream=False, profile=replace(PROFILE, native_json_schema=False))
    empty: dict[str, JsonValue] = {"type": "object", "properties": {}}
    plain: dict[str, JsonValue] = {"type": "object", "properties": {"city": {"type": "string"}}}
    tools = (
        ToolDefinition(name="now", description="The time.", parameters=empty),
        ToolDefinition(name="w", parameters=plain),
    )
    try:
        await _complete(model, ModelRequest(messages=(Message.user("x"),), tools=tools))
    finally:
        await model.aclose()
    now, weather = sim.requests[0].body["tools"][0]["functionDeclarations"]
    assert now == {"name": "now", "description": "The time."}
    assert weather["parameters"]["properties"]["city"]["type"] == "STRING"  # twin: kept


@pytest.mark.parametrize(
    "messages",
    [(), (Message.assistant("Hello."), Message.user("Hi"))],
    ids=["no-messages", "leading-model-turn"],
)
async def test_conversations_gemini_cannot_take_are_typed_errors(
    sim: WireSimulator, messages: tuple[Message, ...]
) -> None:
    model = _model(sim)
    try:
        with pytest.raises(InvalidRequest, match="user"):
            await _complete(model, ModelRequest(messages=messages, instructions="Be brief."))
    finally:
        await model.aclose()
    assert sim.requests == []  # refused before sending


async def test_an_empty_prompt_goes_out_and_is_answered(sim: WireSimulator) -> None:
    # Recorded Gemini traffic: `contents: [{"role": "user", "parts": [{"text": ""}]}]` beside a
    # system instruction gets an answer.
    sim.enqueue(SimTurn(text="Hello! How can I help?"))
    model = _model(sim)
    try:
        out = await _complete(
            model, ModelRequest(messages=(Message.user(""),), instructions="Be brief.")
        )
    finally:
        await model.aclose()
    assert sim.requests[0].body["contents"] == [{"role": "user", "parts": [{"text": ""}]}]
    assert out.message.text == "Hello! How can I help?"


async def test_an_empty_model_turn_keeps_its_place(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="Again: hello."))
    model = _model(sim)
    messages = (Message.user("Hi"), Message(role="assistant", parts=()), Message.user("Hi?"))
    try:
        await _complete(model, ModelRequest(messages=messages))
    finally:
        await model.aclose()
    assert sim.requests[0].body["contents"] == [
        {"role": "user", "parts": [{"text": "Hi"}]},
        {"role": "model", "parts": [{"text": ""}]},
        {"role": "user", "parts": [{"text": "Hi?"}]},
    ]


async def test_twin_a_non_empty_prompt_goes_out(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="Hi."))
    model = _model(sim)
    try:
        out = await _complete(
            model, ModelRequest(messages=(Message.user("Hi"),), instructions="Be brief.")
        )
    finally:
        await model.aclose()
    assert out.message.parts == (TextPart(text="Hi."),)


@pytest.mark.parametrize("delay", [7.0, None])
async def test_a_rate_limit_says_when_to_retry_in_the_body(
    sim: WireSimulator, delay: float | None
) -> None:
    """Google puts the wait in `error.details[].retryDelay` ("7s"), not in a header."""
    sim.enqueue(SimTurn(fault=Fault(error="rate_limit", retry_after=delay)))
    model = _model(sim)
    try:
        with pytest.raises(RateLimited) as info:
            await _complete(model, ModelRequest(messages=(Message.user("Hi"),)))
    finally:
        await model.aclose()
    assert info.value.retry_after == delay  # None: the body had no RetryInfo (the twin)
