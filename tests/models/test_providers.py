"""Provider details the conformance suite does not cover: keys, registry, profiles, quirks."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from legato import Agent
from legato.exceptions import (
    InvalidRequest,
    MissingCredentials,
    ModelOverloaded,
    StreamInterrupted,
)
from legato.messages import DocumentPart, Message, ThinkingPart, ToolDefinition
from legato.models import ModelRequest, ModelSettings, TextDelta, complete, infer_model
from legato.models._provider import ProviderSettings, redact, retry_after_seconds
from legato.models.anthropic import AnthropicModel
from legato.models.fallback import FallbackModel
from legato.models.gemini import GeminiModel
from legato.models.ollama import OllamaModel
from legato.models.openai_chat import OpenAIChatModel
from legato.models.openai_compatible import PROFILES, compatible_model
from legato.models.openai_responses import OpenAIResponsesModel
from legato.models.retry import RetryingModel, RetryPolicy
from legato.simulator import SimCall, SimTurn, WireSimulator
from legato.testing import FunctionModel, ScriptedModel

NO_RETRY = ProviderSettings(retry=RetryPolicy(max_attempts=1))
TOOL = ToolDefinition(
    name="get_weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.mark.parametrize(
    ("model", "variable"),
    [
        ("openai:gpt-4o", "OPENAI_API_KEY"),
        ("openai-chat:gpt-4o", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-6", "ANTHROPIC_API_KEY"),
        ("gemini:gemini-2.5-flash", "GEMINI_API_KEY"),
        ("groq:llama-3.3-70b-versatile", "GROQ_API_KEY"),
        ("mistral:mistral-small-latest", "MISTRAL_API_KEY"),
    ],
)
def test_a_missing_key_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, model: str, variable: str
) -> None:
    for name in (variable, "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(MissingCredentials) as info:
        infer_model(model)
    assert info.value.env_var == variable
    assert variable in str(info.value)


def test_model_strings_resolve_to_their_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, "test-key")
    assert isinstance(infer_model("openai:gpt-4o"), OpenAIResponsesModel)
    assert isinstance(infer_model("openai-chat:gpt-4o"), OpenAIChatModel)
    assert isinstance(infer_model("anthropic:claude-sonnet-4-6"), AnthropicModel)
    assert isinstance(infer_model("gemini:gemini-2.5-flash"), GeminiModel)
    assert isinstance(infer_model("ollama:qwen3"), OllamaModel)
    for server in PROFILES:
        if PROFILES[server].env_var:
            monkeypatch.setenv(PROFILES[server].env_var or "", "test-key")
        model = infer_model(f"{server}:some-model")
        assert isinstance(model, OpenAIChatModel) and model.server is PROFILES[server]
        assert model.name == f"{server}:some-model"


def test_importing_legato_and_provider_modules_imports_no_sdk() -> None:
    code = (
        "import sys, legato, legato.models.openai_chat, legato.models.openai_responses, "
        "legato.models.anthropic, legato.models.gemini, legato.models.ollama, "
        "legato.models.openai_compatible, legato.models.fallback, legato.simulator\n"
        "bad = [m for m in ('openai', 'anthropic', 'google.genai', 'genai_prices') if m in sys.modules]\n"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- Anthropic ------------------------------------------------------------------------------------


async def test_anthropic_thinking_signature_goes_back_to_anthropic_only(
    sim: WireSimulator,
) -> None:
    sim.enqueue(
        SimTurn(thinking="The user wants weather.", thinking_signature="sig-abc", text="Sunny."),
        SimTurn(text="Still sunny."),
        SimTurn(text="Sunny from OpenAI."),
    )
    claude = AnthropicModel("claude-sonnet-4-6", base_url=sim.url, api_key="k", settings=NO_RETRY)
    gpt = OpenAIChatModel("gpt-4o", base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY)
    try:
        first = await complete(claude, ModelRequest(messages=(Message.user("Weather?"),)))
        (thinking, _) = first.message.parts
        assert thinking == ThinkingPart(
            text="The user wants weather.", signature="sig-abc", provider="anthropic"
        )
        history = (Message.user("Weather?"), first.message, Message.user("And now?"))
        await complete(claude, ModelRequest(messages=history))
        await complete(gpt, ModelRequest(messages=history))
    finally:
        await claude.aclose()
        await gpt.aclose()
    sent_back = sim.requests[1].body["messages"][1]["content"][0]
    assert sent_back == {
        "type": "thinking",
        "thinking": "The user wants weather.",
        "signature": "sig-abc",
    }
    assert "sig-abc" not in json.dumps(sim.requests[2].body)


def test_anthropic_cache_control_tool_choice_and_documents() -> None:
    model = AnthropicModel(
        "claude-sonnet-4-6", api_key="k", cache_instructions=True, cache_tools=True
    )
    pdf = DocumentPart(data=b"%PDF-1.4 tiny", media_type="application/pdf", title="Spec")
    request = ModelRequest(
        messages=(Message.user([pdf]),),
        instructions="Be brief.",
        tools=(TOOL,),
        tool_choice="get_weather",
        settings=ModelSettings(parallel_tool_calls=False, thinking_budget=1024),
    )
    body = model.body(request)
    assert body["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tool_choice"] == {
        "type": "tool",
        "name": "get_weather",
        "disable_parallel_tool_use": True,
    }
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    doc = body["messages"][0]["content"][0]
    assert doc["type"] == "document" and doc["title"] == "Spec"
    assert doc["source"]["type"] == "base64" and doc["source"]["media_type"] == "application/pdf"
    for choice, wire in [("required", {"type": "any"}), ("none", {"type": "none"})]:
        plain = ModelRequest(messages=(Message.user("x"),), tools=(TOOL,), tool_choice=choice)
        assert model.body(plain)["tool_choice"] == wire


# -- OpenAI-compatible quirks ---------------------------------------------------------------------


async def test_llamacpp_profile_avoids_the_silent_auto_stream_failure(
    sim: WireSimulator,
) -> None:
    sim.enqueue(
        SimTurn(calls=(SimCall(name="get_weather", arguments={"city": "Oslo"}),)),
        SimTurn(calls=(SimCall(name="get_weather", arguments={"city": "Oslo"}),), repeat_name=True),
    )
    model = compatible_model(
        "llamacpp-server", "smollm2", base_url=f"{sim.url}/v1", settings=NO_RETRY
    )
    try:
        auto = await complete(model, ModelRequest(messages=(Message.user("x"),), tools=(TOOL,)))
        forced = await complete(
            model,
            ModelRequest(messages=(Message.user("x"),), tools=(TOOL,), tool_choice="get_weather"),
        )
    finally:
        await model.aclose()
    assert [r.stream for r in sim.requests] == [False, True]
    assert "parallel_tool_calls" not in sim.requests[1].body
    for response in (auto, forced):
        (call,) = response.message.tool_calls
        assert call.name == "get_weather"  # not "get_weatherget_weather..."
        assert call.arguments == {"city": "Oslo"}


async def test_without_the_profile_the_auto_stream_failure_is_an_error(
    sim: WireSimulator,
) -> None:
    from legato.simulator import Fault

    sim.enqueue(SimTurn(calls=(SimCall(name="get_weather"),), fault=Fault(empty=True)))
    model = compatible_model("vllm", "m", base_url=f"{sim.url}/v1", settings=NO_RETRY)
    try:
        with pytest.raises(StreamInterrupted, match="no events"):
            await complete(model, ModelRequest(messages=(Message.user("x"),), tools=(TOOL,)))
    finally:
        await model.aclose()


@pytest.mark.parametrize("choice", ["get_weather", "none", "required"])
async def test_tool_choice_reaches_each_wire(sim: WireSimulator, choice: str) -> None:
    sim.enqueue(*[SimTurn(text="ok") for _ in range(4)])
    request = ModelRequest(messages=(Message.user("x"),), tools=(TOOL,), tool_choice=choice)
    models = [
        OpenAIChatModel("gpt-4o", base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY),
        OpenAIResponsesModel("gpt-4o", base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY),
        GeminiModel("gemini-2.5-flash", base_url=sim.url, api_key="k", settings=NO_RETRY),
        AnthropicModel("claude-sonnet-4-6", base_url=sim.url, api_key="k", settings=NO_RETRY),
    ]
    for model in models:
        await complete(model, request)
        await model.aclose()
    chat, responses, gemini, anthropic = (r.body for r in sim.requests)
    expected: dict[str, tuple[object, object, object, object]] = {
        "get_weather": (
            {"type": "function", "function": {"name": "get_weather"}},
            {"type": "function", "name": "get_weather"},
            {"mode": "ANY", "allowedFunctionNames": ["get_weather"]},
            {"type": "tool", "name": "get_weather"},
        ),
        "none": ("none", "none", {"mode": "NONE"}, {"type": "none"}),
        "required": ("required", "required", {"mode": "ANY"}, {"type": "any"}),
    }
    got = (
        chat["tool_choice"],
        responses["tool_choice"],
        gemini["toolConfig"]["functionCallingConfig"],
        anthropic["tool_choice"],
    )
    assert got == expected[choice]
    # the tools stay declared even when none may be called (the history may hold calls)
    assert all("get_weather" in json.dumps(r.body) for r in sim.requests)


def test_sync_runs_share_one_client_and_its_connection(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="one"), SimTurn(text="two"))
    model = OpenAIChatModel("gpt-4o", base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY)
    agent = Agent(model)
    assert agent.run_sync("a").output == "one"
    assert agent.run_sync("b").output == "two"
    # both runs went through the sync facade's one background loop: one client, one connection
    assert len(model._clients._clients) == 1
    assert sim.connections == 1


# -- retries, fallback, redaction -------------------------------------------------------------------


def test_full_jitter_keeps_clients_out_of_lockstep() -> None:
    policy = RetryPolicy(initial_delay=1.0, rng=random.Random(7))
    error = ModelOverloaded("busy")
    delays = [policy.delay(error, 3) for _ in range(100)]
    assert all(0 <= d <= 4.0 for d in delays)
    assert len({round(d, 3) for d in delays}) > 90
    assert 1.0 < sum(delays) / len(delays) < 3.0


async def test_retrying_model_wraps_any_model() -> None:
    failures = iter([ModelOverloaded("busy"), None])

    def answer(request: ModelRequest) -> str:
        error = next(failures)
        if error is not None:
            raise error
        return "recovered"

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    model = RetryingModel(FunctionModel(answer), RetryPolicy(sleep=sleep))
    response = await complete(model, ModelRequest(messages=(Message.user("x"),)))
    assert response.message.text == "recovered" and len(waits) == 1


async def test_fallback_does_not_hide_a_bad_request() -> None:
    def bad(request: ModelRequest) -> str:
        raise InvalidRequest("no such parameter")

    backup = ScriptedModel(["never"])
    model = FallbackModel([FunctionModel(bad), backup])
    with pytest.raises(InvalidRequest):
        await complete(model, ModelRequest(messages=(Message.user("x"),)))
    assert backup.remaining == 1
    assert [type(a.error) for a in model.attempts] == [InvalidRequest]


async def test_fallback_never_restarts_a_stream_that_already_spoke() -> None:
    class Breaks:
        name = "test:breaks"
        profile = ScriptedModel([]).profile

        async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta]:
            yield TextDelta(text="half an ans")
            raise StreamInterrupted("cut")

    backup = ScriptedModel(["never"])
    with pytest.raises(StreamInterrupted):
        await complete(
            FallbackModel([Breaks(), backup]), ModelRequest(messages=(Message.user("x"),))
        )
    assert backup.remaining == 1


def test_redaction_and_retry_after_parsing() -> None:
    payload = {
        "error": {"message": "bad key sk-abcdef0123456789 used", "api_key": "plain"},
        "headers": {"Authorization": "Bearer xyz"},
        "list": ["AIzaSyA-0123456789abcdef"],
    }
    assert redact(payload) == {
        "error": {"message": "bad key [redacted] used", "api_key": "[redacted]"},
        "headers": {"Authorization": "[redacted]"},
        "list": ["[redacted]"],
    }
    assert retry_after_seconds({"Retry-After": "3"}) == 3
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0
    assert retry_after_seconds({}) is None


def test_the_every_provider_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import runpy
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "same_agent_every_provider.py"
    runpy.run_path(str(example), run_name="__main__")
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 6
    assert all("'Paris is sunny; Oslo has snow.'" in line for line in lines)
    assert all("tools=['sunny, 24 °C', 'snow, -3 °C']" in line for line in lines)


@pytest.mark.parametrize("stream", [True, False])
async def test_one_connection_serves_a_whole_run(sim: WireSimulator, stream: bool) -> None:
    from legato import tool

    @tool
    def get_weather(city: str) -> str:
        """Weather."""
        return "sunny"

    sim.enqueue(
        SimTurn(calls=(SimCall(name="get_weather", arguments={"city": "Oslo"}),)),
        SimTurn(text="Sunny."),
        SimTurn(calls=(SimCall(name="get_weather", arguments={"city": "Oslo"}),)),
        SimTurn(text="Still sunny."),
    )
    settings = ProviderSettings(stream=stream, retry=RetryPolicy(max_attempts=1))
    model = OpenAIChatModel("gpt-4o", base_url=f"{sim.url}/v1", api_key="k", settings=settings)
    agent = Agent(model, tools=[get_weather])
    try:
        await agent.run("Weather?")
        await agent.run("And now?")
    finally:
        await model.aclose()
    assert len(sim.requests) == 4
    assert sim.connections == 1  # streamed responses are read to the end and released


async def test_gemini_function_call_signatures_go_back_to_gemini_only(
    sim: WireSimulator,
) -> None:
    signed = SimTurn(
        calls=(SimCall(id="fc1", name="get_weather", arguments={"city": "Oslo"}),),
        thinking_signature="c2lnbmVkLWNhbGw=",
    )
    sim.enqueue(signed, SimTurn(text="Snow."), SimTurn(text="Snow, says OpenAI."))
    gemini = GeminiModel("gemini-3-pro", base_url=sim.url, api_key="k", settings=NO_RETRY)
    gpt = OpenAIChatModel("gpt-4o", base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY)
    from legato.messages import ToolResultPart

    try:
        first = await complete(gemini, ModelRequest(messages=(Message.user("x"),), tools=(TOOL,)))
        assert first.message.provider_details == {"gemini_signatures": {"fc1": "c2lnbmVkLWNhbGw="}}
        result = Message(
            role="tool",
            parts=(ToolResultPart.text_result(call_id="fc1", name="get_weather", text="snow"),),
        )
        history = (Message.user("x"), first.message, result)
        await complete(gemini, ModelRequest(messages=history, tools=(TOOL,)))
        await complete(gpt, ModelRequest(messages=history, tools=(TOOL,)))
    finally:
        await gemini.aclose()
        await gpt.aclose()
    call_part = sim.requests[1].body["contents"][1]["parts"][0]
    assert call_part["thoughtSignature"] == "c2lnbmVkLWNhbGw="
    assert call_part["functionCall"]["name"] == "get_weather"
    assert "c2lnbmVkLWNhbGw=" not in json.dumps(sim.requests[2].body)


async def test_a_payload_of_the_wrong_shape_is_a_parse_error_with_the_payload(
    sim: WireSimulator,
) -> None:
    from legato.exceptions import ResponseParseError
    from legato.simulator import Fault

    odd = (
        b'data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m",'
        b'"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":5}]}}],'
        b'"api_key":"sk-leaked-0123456789"}\n\n'
    )
    sim.enqueue(SimTurn(text="hello", fault=Fault(raw_event=odd, raw_after=1)))
    model = OpenAIChatModel("gpt-4o", base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY)
    try:
        with pytest.raises(ResponseParseError, match="unexpected response shape") as info:
            await complete(model, ModelRequest(messages=(Message.user("x"),)))
    finally:
        await model.aclose()
    body = json.dumps(info.value.body)
    assert '"function": 5' in body  # the raw chunk is attached
    assert "sk-leaked" not in body  # and redacted


def test_llamacpp_profile_asks_for_json_the_way_the_server_understands() -> None:
    from legato.models import OutputSpec
    from legato.models.openai_chat import chat_body

    schema: dict[str, object] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    request = ModelRequest(
        messages=(Message.user("x"),),
        output=OutputSpec(name="final_result", schema=schema),  # type: ignore[arg-type] # plain dict schema
    )
    llama = chat_body(request, model="m", server=PROFILES["llamacpp-server"], stream=True)
    assert llama["response_format"] == {"type": "json_object", "schema": schema}
    openai_format = chat_body(request, model="m", server=PROFILES["groq"], stream=True)
    assert openai_format["response_format"]["type"] == "json_schema"


async def test_openai_reasoning_goes_back_with_its_item_id(sim: WireSimulator) -> None:
    sim.enqueue(
        SimTurn(thinking="Think first.", thinking_signature="enc-123", text="Done."),
        SimTurn(text="Again."),
    )
    model = OpenAIResponsesModel(
        "o4-mini", base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY
    )
    try:
        first = await complete(model, ModelRequest(messages=(Message.user("x"),)))
        history = (Message.user("x"), first.message, Message.user("y"))
        await complete(model, ModelRequest(messages=history))
    finally:
        await model.aclose()
    reasoning = sim.requests[1].body["input"][1]
    assert reasoning == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Think first."}],
        "encrypted_content": "enc-123",
    }


def test_stream_sync_with_a_provider_model(sim: WireSimulator) -> None:
    import gc

    from legato.events import RunFinished

    sim.enqueue(SimTurn(text="one"), SimTurn(text="two"))
    agent = Agent(OpenAIChatModel("gpt-4o", base_url=f"{sim.url}/v1", api_key="k"))
    for expected in ("one", "two"):
        events = list(agent.stream_sync("hi"))
        finished = events[-1]
        assert isinstance(finished, RunFinished) and finished.output == expected
        deltas = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert deltas == expected
    gc.collect()  # clients of the finished private loops are dropped without warnings


def test_anthropic_structured_output_with_thinking_uses_output_config() -> None:
    from legato.messages import JsonValue
    from legato.models import OutputSpec

    model = AnthropicModel("claude-sonnet-4-6", api_key="k")
    schema: dict[str, JsonValue] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    spec = OutputSpec(name="final_result", schema=schema)
    plain = model.body(ModelRequest(messages=(Message.user("x"),), output=spec))
    assert plain["tool_choice"] == {"type": "tool", "name": "final_result"}
    assert "output_config" not in plain
    thinking = model.body(
        ModelRequest(
            messages=(Message.user("x"),),
            output=spec,
            settings=ModelSettings(thinking_budget=2048),
        )
    )
    assert thinking["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert "tool_choice" not in thinking and "tools" not in thinking


@pytest.mark.parametrize("server", ["openai-chat", "vllm", "llamacpp-server", "groq"])
async def test_interleaved_parallel_calls_on_chat_servers(sim: WireSimulator, server: str) -> None:
    calls = (
        SimCall(id="c1", name="get_weather", arguments={"city": "Paris", "unit": "C"}),
        SimCall(id="c2", name="get_weather", arguments={"city": "Tōkyō"}),
        SimCall(id="c3", name="get_time", arguments={"city": "Lima"}),
    )
    sim.enqueue(
        SimTurn(text="Three lookups. ", calls=calls, interleave_calls=True, repeat_name=True)
    )
    if server == "openai-chat":
        model = OpenAIChatModel("gpt-4o", base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY)
    else:
        model = compatible_model(
            server, "m", base_url=f"{sim.url}/v1", api_key="k", settings=NO_RETRY
        )
    request = ModelRequest(messages=(Message.user("x"),), tools=(TOOL,), tool_choice="required")
    try:
        response = await complete(model, request)
    finally:
        await model.aclose()
    got = [(c.id, c.name, c.arguments) for c in response.message.tool_calls]
    assert got == [(c.id, c.name, c.arguments) for c in calls]
    assert response.message.text == "Three lookups. "
