"""The conformance scenarios, as plain checks a test (or a deliberately broken provider) runs.

Each check drives one provider module, through its official SDK, against the wire simulator,
and raises AssertionError when the provider gets it wrong.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass

from conformance_cases import Case

from legato.messages import ImagePart, Message, ModelResponse, StopReason, TextPart, ToolDefinition
from legato.models import (
    Model,
    ModelRequest,
    ModelStreamEvent,
    ResponseCompleted,
    TextDelta,
    ToolCallDelta,
)
from legato.models._provider import ProviderSettings
from legato.models.retry import RetryPolicy
from legato.simulator import Fault, SimCall, SimTurn, WireSimulator

NO_RETRY = RetryPolicy(max_attempts=1)
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}},
        "required": ["city"],
    },
)
TIME = ToolDefinition(
    name="get_time",
    description="Local time in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@dataclass(kw_only=True)
class Outcome:
    """What a call produced."""

    response: ModelResponse
    events: list[ModelStreamEvent]

    @property
    def text_deltas(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    def streamed_arguments(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for e in self.events:
            if isinstance(e, ToolCallDelta):
                out[e.index] = out.get(e.index, "") + e.arguments_delta
        return out


def request_for(
    *messages: Message, tools: Sequence[ToolDefinition] = (), **kw: object
) -> ModelRequest:
    return ModelRequest(
        messages=messages or (Message.user("What is the weather in Zürich?"),),
        instructions="Be brief.",
        tools=tuple(tools),
        **kw,  # type: ignore[arg-type] # test helper passes ModelRequest fields through
    )


def make(case: Case, sim: WireSimulator, *, stream: bool = True, **kw: object) -> Model:
    settings = ProviderSettings(stream=stream, retry=NO_RETRY)
    if kw:
        settings = ProviderSettings(stream=stream, **{"retry": NO_RETRY, **kw})  # type: ignore[arg-type] # fields by name
    return case.make(sim.url, settings)


async def call(model: Model, request: ModelRequest) -> Outcome:
    events: list[ModelStreamEvent] = []
    response = None
    async for event in model.stream(request):
        events.append(event)
        if isinstance(event, ResponseCompleted):
            response = event.response
    assert response is not None, "the stream ended without ResponseCompleted"
    return Outcome(response=response, events=events)


async def close(model: Model) -> None:
    aclose = getattr(model, "aclose", None)
    if aclose is not None:
        await aclose()


# -- checks -------------------------------------------------------------------------------------


async def check_plain_text(case: Case, sim: WireSimulator, *, stream: bool) -> None:
    text = "Grüße aus Zürich — it is sunny, 21 °C."
    sim.enqueue(SimTurn(text=text))
    model = make(case, sim, stream=stream)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    assert out.response.message.text == text
    assert out.response.message.role == "assistant"
    assert out.response.stop_reason is StopReason.END_TURN
    assert out.text_deltas == text
    (recorded,) = sim.requests
    assert recorded.api == case.api
    assert recorded.stream is stream or case.api == "ollama" and not stream and not recorded.stream
    assert "Be brief." in json.dumps(recorded.body, ensure_ascii=False)


async def check_streamed_text(case: Case, sim: WireSimulator) -> None:
    chunks = ("Hel", "lo", " ", "wö", "rld", "!")
    sim.enqueue(SimTurn(text="".join(chunks), text_chunks=chunks))
    model = make(case, sim, stream=True)
    try:
        out = await call(model, request_for())
    finally:
        await close(model)
    deltas = [e.text for e in out.events if isinstance(e, TextDelta)]
    assert deltas == list(chunks), deltas
    assert isinstance(out.events[-1], ResponseCompleted)
    assert out.response.message.text == "Hello wörld!"


async def check_tool_calls(
    case: Case, sim: WireSimulator, calls: tuple[SimCall, ...], *, stream: bool, text: str = ""
) -> Outcome:
    sim.enqueue(SimTurn(text=text, calls=calls))
    model = make(case, sim, stream=stream)
    try:
        out = await call(model, request_for(tools=[WEATHER, TIME]))
    finally:
        await close(model)
    got = out.response.message.tool_calls
    assert [c.name for c in got] == [c.name for c in calls]
    assert [c.arguments for c in got] == [json.loads(c.text) for c in calls]
    assert all(c.id for c in got) and len({c.id for c in got}) == len(got)
    for sim_call, part in zip(calls, got, strict=True):
        if sim_call.id is not None:
            assert part.id == sim_call.id
    assert out.response.stop_reason is StopReason.TOOL_CALLS
    streamed = out.streamed_arguments()
    for index, part in enumerate(got):
        assert json.loads(streamed[index]) == part.arguments, (streamed, part)
    return out


async def check_one_tool_call(case: Case, sim: WireSimulator, *, stream: bool) -> None:
    calls = (SimCall(id="call_w1", name="get_weather", arguments={"city": "Zürich", "unit": "C"}),)
    await check_tool_calls(case, sim, calls, stream=stream)


async def check_parallel_calls(case: Case, sim: WireSimulator, *, stream: bool) -> None:
    calls = (
        SimCall(name="get_weather", arguments={"city": "Paris"}),
        SimCall(name="get_time", arguments={"city": "Tokyo"}),
        SimCall(name="get_weather", arguments={"city": "Rome", "unit": "F"}),
    )
    await check_tool_calls(case, sim, calls, stream=stream)


AWKWARD = (
    SimCall(
        name="get_weather",
        # cut inside a key, right after a backslash, inside a \u escape, and between the
        # bytes of one character; an empty fragment in the middle and at the end
        chunks=(
            '{"ci',
            'ty": "Z\\',
            "u00",
            "fc",
            'rich \\"old',
            "",
            ' town\\" 東',
            '京", "unit": "C"}',
            "",
        ),
    ),
)


async def check_awkward_arguments(case: Case, sim: WireSimulator, *, byte_split: int) -> None:
    sim.enqueue(SimTurn(calls=AWKWARD, fault=Fault(byte_split=byte_split)))
    model = make(case, sim, stream=True)
    try:
        out = await call(model, request_for(tools=[WEATHER]))
    finally:
        await close(model)
    (part,) = out.response.message.tool_calls
    assert part.arguments == {"city": 'Zürich "old town" 東京', "unit": "C"}, part.raw_arguments
    assert json.loads(out.streamed_arguments()[0]) == part.arguments
    if case.streams_arguments:
        assert part.raw_arguments == AWKWARD[0].text


async def check_text_before_tool_call(case: Case, sim: WireSimulator, *, stream: bool) -> None:
    calls = (SimCall(name="get_weather", arguments={"city": "Oslo"}),)
    out = await check_tool_calls(case, sim, calls, stream=stream, text="Let me look that up. ")
    kinds = [p.kind for p in out.response.message.parts]
    assert kinds == ["text", "tool_call"], kinds
    assert out.response.message.text == "Let me look that up. "
    assert out.text_deltas == "Let me look that up. "


async def check_image_sent(case: Case, sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="A single pixel."))
    model = make(case, sim)
    image = ImagePart(data=PIXEL, media_type="image/png")
    prompt = Message.user([TextPart(text="What is in this picture?"), image])
    try:
        out = await call(model, request_for(prompt))
    finally:
        await close(model)
    assert out.response.message.text == "A single pixel."
    body = json.dumps(sim.requests[0].body)
    assert base64.b64encode(PIXEL).decode() in body
    assert "What is in this picture?" in body
