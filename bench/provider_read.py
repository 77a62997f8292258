"""What reading an answer costs, per provider: legato's model against its SDK's typed path.

Run: `python bench/provider_read.py [--rounds N] [--chunks N] [--only responses,anthropic]`.
For each wire API (OpenAI Responses, Anthropic Messages, Gemini), against the local wire
simulator over plain http, one process alternates legato's model (`model.stream(request)`,
every event read) with the same call made by hand through the official SDK (its typed
objects, every event read): a short answer with a tool call, unstreamed and streamed, and
a long streamed answer of `--chunks` text pieces (the CPU per chunk), and (Gemini) the same
long answer whole. For Gemini's whole answers, which legato reads from their JSON, a third
line times legato on its old path through the SDK's types (`GeminiModel._raw_answers` off),
alternating with the other two. Prints medians of wall and CPU time and their ratio;
asserts nothing. Run it on two source trees (PYTHONPATH) to compare before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from legato.messages import Message, StopReason, ToolDefinition
from legato.models import ModelRequest
from legato.models._provider import ProviderSettings
from legato.models.retry import RetryPolicy
from legato.simulator import SimCall, SimTurn, WireSimulator

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
SCHEMA: dict[str, Any] = dict(WEATHER.parameters)
CALL = SimTurn(
    text="Let me look.",
    calls=(SimCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),),
)
Sample = tuple[float, float]


async def _timed(fn: Callable[[], Awaitable[object]]) -> Sample:
    wall, cpu = time.perf_counter(), time.process_time()
    await fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _model(api: str, url: str, stream: bool) -> Any:
    settings = ProviderSettings(stream=stream, retry=RetryPolicy(max_attempts=1))
    if api == "responses":
        from legato.models.openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(
            "gpt-4o", base_url=f"{url}/v1", api_key="sk-b", settings=settings
        )
    if api == "anthropic":
        from legato.models.anthropic import AnthropicModel

        return AnthropicModel("claude-sonnet-4-6", base_url=url, api_key="sk-b", settings=settings)
    from legato.models.gemini import GeminiModel

    return GeminiModel("gemini-2.5-flash", base_url=url, api_key="AIza-b", settings=settings)


def _sdk(api: str, url: str) -> tuple[Any, Callable[[bool, str], Awaitable[object]]]:
    """The SDK's async client and one call through its typed path (every event read)."""
    prompt = [{"role": "user", "content": "Weather in Paris?"}]
    if api == "responses":
        import openai

        client: Any = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-b", max_retries=0)
        tools: Any = [{"type": "function", "name": "get_weather", "parameters": SCHEMA}]

        async def responses(stream: bool, extra: str) -> object:
            body: Any = {"metadata": {"chunks": extra}} if extra else {}
            if not stream:
                r = await client.responses.create(
                    model="gpt-4o", input=prompt, tools=tools, store=False, extra_body=body
                )
                return [item.type for item in r.output]
            events = await client.responses.create(
                model="gpt-4o", input=prompt, tools=tools, store=False, stream=True, extra_body=body
            )
            return [event.type async for event in events]

        return client, responses
    if api == "anthropic":
        import anthropic

        client = anthropic.AsyncAnthropic(base_url=url, api_key="sk-b", max_retries=0)
        tools = [{"name": "get_weather", "description": "w", "input_schema": SCHEMA}]

        async def messages(stream: bool, extra: str) -> object:
            body: Any = {"metadata": {"user_id": f"chunks:{extra}"}} if extra else {}
            if not stream:
                m = await client.messages.create(
                    model="claude-sonnet-4-6",
                    max_tokens=256,
                    messages=prompt,
                    tools=tools,
                    extra_body=body,
                )
                return [block.type for block in m.content]
            events = await client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=256,
                messages=prompt,
                tools=tools,
                stream=True,
                extra_body=body,
            )
            return [event.type async for event in events]

        return client, messages
    genai: Any = importlib.import_module("google.genai")
    client = genai.Client(api_key="AIza-b", http_options={"base_url": url})
    config: Any = {
        "tools": [
            {"function_declarations": [{"name": "get_weather", "parameters_json_schema": SCHEMA}]}
        ]
    }

    async def generate(stream: bool, extra: str) -> object:
        contents: Any = [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]
        if extra:
            config["http_options"] = {"extra_body": {"labels": {"chunks": extra}}}
        else:
            config.pop("http_options", None)
        if not stream:
            r: Any = await client.aio.models.generate_content(
                model="gemini-2.5-flash", contents=contents, config=config
            )
            return r.candidates
        chunks: Any = await client.aio.models.generate_content_stream(
            model="gemini-2.5-flash", contents=contents, config=config
        )
        return [c.candidates async for c in chunks]

    return client, generate


def _responder(chunks: int) -> Callable[[Any], SimTurn]:
    pieces = tuple(f"w{i} " for i in range(chunks))
    long = SimTurn(text="".join(pieces), text_chunks=pieces)

    def respond(request: Any) -> SimTurn:
        return long if "chunks" in str(request.body) else CALL

    return respond


async def bench(api: str, rounds: int, chunks: int) -> None:
    with WireSimulator(_responder(chunks)) as sim:
        client, sdk_call = _sdk(api, sim.url)
        cases = [
            ("tool call, whole", False, "", 1),
            ("tool call, streamed", True, "", 1),
            (f"{chunks} chunks, streamed", True, str(chunks), chunks),
        ]
        if api == "gemini":
            cases.append((f"{chunks} pieces, whole", False, str(chunks), 1))
        for label, stream, extra, per in cases:
            model = _model(api, sim.url, stream)
            old: Any = None
            if api == "gemini" and not stream:
                old = _model(api, sim.url, stream)
                old._raw_answers = False  # legato's old path: the SDK's types, then read
            request = ModelRequest(
                messages=(Message.user("Weather in Paris?"),),
                tools=(WEATHER,),
                settings=_settings(api, extra),
            )

            async def ours(model: Any = model, request: ModelRequest = request) -> None:
                async for _ in model.stream(request):
                    pass

            async def theirs(stream: bool = stream, extra: str = extra) -> None:
                await sdk_call(stream, extra)

            async def typed(old: Any = old, request: ModelRequest = request) -> None:
                async for _ in old.stream(request):
                    pass

            runs = [ours, theirs] + ([typed] if old is not None else [])
            samples: list[list[Sample]] = [[] for _ in runs]
            for _ in range(5):
                for run in runs:
                    await run()
            for i in range(rounds):
                order = list(range(len(runs)))
                order = order[i % len(order) :] + order[: i % len(order)]
                for k in order:
                    samples[k].append(await _timed(runs[k]))
            await model.aclose()
            _report(api, label, samples[0], samples[1], per)
            if old is not None:
                await old.aclose()
                _report(api, f"{label} (old)", samples[2], samples[1], per)
        closing = client.close() if api != "gemini" else client.aio.aclose()
        await closing


def gemini_read_only(rounds: int) -> None:
    """Gemini's whole answer read alone (no HTTP): legato's reading of the JSON against the
    SDK's parsing into its types (`model_validate` of the same JSON) plus legato's reading
    of those, the old path: an answer with text, three calls and search grounding."""
    from google.genai import types

    from legato.models._gemini_read import ReadState, read_chunk, read_details, read_state_usage
    from legato.models.assembly import ResponseAssembler

    parts: list[Any] = [{"text": "Let me look.", "thoughtSignature": "c2ln"}]
    parts += [
        {"functionCall": {"id": f"c{i}", "name": "get_weather", "args": {"city": "Paris"}}}
        for i in range(3)
    ]
    grounding = {
        "webSearchQueries": ["weather paris"],
        "groundingChunks": [
            {"web": {"uri": f"https://x.example/{i}", "title": "x"}} for i in range(5)
        ],
        "groundingSupports": [
            {
                "segment": {"startIndex": 0, "endIndex": 5, "text": "Let m"},
                "groundingChunkIndices": [0],
            }
        ],
    }
    answer = {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": "STOP",
                "index": 0,
                "groundingMetadata": grounding,
            }
        ],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 12, "totalTokenCount": 21},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r",
    }
    body = json.dumps(answer)

    def read(chunk: object) -> None:
        state = ReadState()
        assembler = ResponseAssembler(provider="gemini")
        read_chunk(chunk, assembler, state)
        read_details(state)
        assembler.build(
            usage=read_state_usage(state), stop_reason=StopReason.TOOL_CALLS, model_name="m"
        )

    def raw() -> None:
        read(json.loads(body))

    def typed() -> None:
        read(types.GenerateContentResponse.model_validate(json.loads(body)))

    for fn in (raw, typed):
        for _ in range(50):
            fn()
    samples: dict[str, list[float]] = {"raw": [], "typed": []}
    for i in range(rounds * 25):
        for name, fn in (
            (("raw", raw), ("typed", typed)) if i % 2 else (("typed", typed), ("raw", raw))
        ):
            cpu = time.process_time()
            fn()
            samples[name].append(time.process_time() - cpu)
    r, t = statistics.median(samples["raw"]) * 1e6, statistics.median(samples["typed"]) * 1e6
    print(
        f"gemini     read alone, whole answer  CPU legato raw {r:8.1f} us, typed {t:8.1f} us  {r / t:5.2f}x"
    )


def _settings(api: str, extra: str) -> Any:
    from legato.models import ModelSettings

    if not extra:
        return ModelSettings()
    if api == "anthropic":
        return ModelSettings(extra_body={"metadata": {"user_id": f"chunks:{extra}"}})
    if api == "gemini":
        return ModelSettings(extra_body={"labels": {"chunks": extra}})
    return ModelSettings(extra_body={"metadata": {"chunks": extra}})


def _report(api: str, label: str, ours: list[Sample], raw: list[Sample], per: int) -> None:
    unit, scale = ("us/chunk", 1e6 / per) if per > 1 else ("ms", 1e3)
    ow, rw = statistics.median(s[0] for s in ours), statistics.median(s[0] for s in raw)
    oc, rc = statistics.median(s[1] for s in ours), statistics.median(s[1] for s in raw)
    print(
        f"{api:<10} {label:<22} wall legato {ow * scale:8.2f} SDK {rw * scale:8.2f} {unit} "
        f"{ow / rw:5.2f}x | CPU legato {oc * scale:8.2f} SDK {rc * scale:8.2f} {unit} {oc / rc:5.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--only", default="responses,anthropic,gemini")
    args = parser.parse_args()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load {load}")
    for api in args.only.split(","):
        asyncio.run(bench(api, args.rounds, args.chunks))
        if api == "gemini":
            gemini_read_only(args.rounds)


if __name__ == "__main__":
    main()
