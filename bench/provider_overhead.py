"""legato's overhead over the official OpenAI SDK, both talking to the local wire simulator.

Run: `python bench/provider_overhead.py [rounds]`. One "run" is what an agent does for
"weather in Paris?": a model call that asks for a tool, the tool call, and a second model
call that answers. legato runs it as `Agent.run_sync` (from the main thread, and from a
worker thread) and as `await Agent.run`; the baseline makes the same two calls by hand with
the official `openai` SDK (sync `OpenAI` or `AsyncOpenAI`), runs the tool, and parses the
answer. Both are timed in the same process, alternating, against the same simulator,
streaming and not. Also: the time legato adds per streamed chunk. Prints figures; asserts
nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import openai

from legato import Agent, tool
from legato.models._provider import ProviderSettings
from legato.models.openai_chat import OpenAIChatModel
from legato.models.retry import RetryPolicy
from legato.simulator import RecordedRequest, SimCall, SimTurn, WireSimulator

PROMPT = "What is the weather in Paris?"
CALL = SimTurn(
    text="",
    calls=(SimCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),),
)
ANSWER = SimTurn(text="It is sunny in Paris, 24 degrees.")
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def respond(request: RecordedRequest) -> SimTurn:
    """Tool call first; the answer once a tool result is in the conversation."""
    messages: list[dict[str, Any]] = request.body.get("messages", [])
    if messages and messages[-1].get("role") == "tool":
        return ANSWER
    if "chunks" in request.body.get("metadata", {}):
        return _chunky(int(request.body["metadata"]["chunks"]))
    return CALL


def _chunky(n: int) -> SimTurn:
    pieces = tuple(f"w{i} " for i in range(n))
    return SimTurn(text="".join(pieces), text_chunks=pieces)


@tool
async def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    # An async tool: legato runs plain functions in a worker thread, which the hand-written
    # baseline does not do (see docs/benchmarks.md for that cost).
    return _weather_py(city)


def _weather_py(city: str) -> str:
    return f"sunny in {city}"


# -- the raw SDK, by hand ---------------------------------------------------------------------


def _messages(first: Any, args: str, call_id: str) -> list[Any]:
    city = json.loads(args)["city"]
    return [
        {"role": "user", "content": PROMPT},
        {
            "role": "assistant",
            "content": first or None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": args},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": _weather_py(city)},
    ]


def raw_sync(client: openai.OpenAI, *, stream: bool) -> str:
    start: list[Any] = [{"role": "user", "content": PROMPT}]
    if not stream:
        r = client.chat.completions.create(model="gpt-4o", messages=start, tools=TOOLS)
        tc = r.choices[0].message.tool_calls[0]  # type: ignore[index] # scripted: always a call
        msgs = _messages(r.choices[0].message.content, tc.function.arguments, tc.id)  # type: ignore[union-attr]
        r2 = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS)
        return r2.choices[0].message.content or ""
    text, args, call_id = "", "", ""
    for chunk in client.chat.completions.create(
        model="gpt-4o",
        messages=start,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    ):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or ():
                call_id = tc.id or call_id
                args += (tc.function.arguments or "") if tc.function else ""
    msgs = _messages(text, args, call_id)
    answer = ""
    for chunk in client.chat.completions.create(
        model="gpt-4o",
        messages=msgs,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    ):
        for choice in chunk.choices:
            answer += choice.delta.content or ""
    return answer


async def raw_async(client: openai.AsyncOpenAI, *, stream: bool) -> str:
    start: list[Any] = [{"role": "user", "content": PROMPT}]
    if not stream:
        r = await client.chat.completions.create(model="gpt-4o", messages=start, tools=TOOLS)
        tc = r.choices[0].message.tool_calls[0]  # type: ignore[index]
        msgs = _messages(r.choices[0].message.content, tc.function.arguments, tc.id)  # type: ignore[union-attr]
        r2 = await client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS)
        return r2.choices[0].message.content or ""
    text, args, call_id = "", "", ""
    async for chunk in await client.chat.completions.create(
        model="gpt-4o",
        messages=start,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    ):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or ():
                call_id = tc.id or call_id
                args += (tc.function.arguments or "") if tc.function else ""
    msgs = _messages(text, args, call_id)
    answer = ""
    async for chunk in await client.chat.completions.create(
        model="gpt-4o",
        messages=msgs,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    ):
        for choice in chunk.choices:
            answer += choice.delta.content or ""
    return answer


# -- timing -----------------------------------------------------------------------------------


Sample = tuple[float, float]
"""(wall seconds, CPU seconds of this process) for one run."""


def _time_sync(fn: Callable[[], object]) -> Sample:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


async def _time_async(fn: Callable[[], Awaitable[object]]) -> Sample:
    w, c = time.perf_counter(), time.process_time()
    await fn()
    return time.perf_counter() - w, time.process_time() - c


def _report(label: str, ours: list[Sample], raw: list[Sample], target: float) -> None:
    ow = statistics.median(s[0] for s in ours)
    rw = statistics.median(s[0] for s in raw)
    oc = statistics.median(s[1] for s in ours)
    rc = statistics.median(s[1] for s in raw)
    print(
        f"{label:<36} wall: legato {ow * 1e3:6.2f} ms  SDK {rw * 1e3:6.2f} ms  {ow / rw:5.3f}x | "
        f"client CPU: legato {oc * 1e3:6.2f} ms  SDK {rc * 1e3:6.2f} ms  {oc / rc:5.3f}x "
        f"(target <= {target:.2f}x)"
    )


def bench_sync(
    url: str, rounds: int, *, stream: bool, in_worker: bool = False, events: bool = False
) -> None:
    """`run_sync` against the sync SDK; `in_worker`: both called from a worker thread.

    `events`: legato's side is `stream_sync`, every event read (the wire streamed).

    On the main thread `run_sync` drives its own long-lived loop; from any other thread it
    hands the run to the background loop thread and waits.
    """
    if in_worker:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(bench_sync, url, rounds, stream=stream, events=events).result()
        return
    settings = ProviderSettings(stream=stream, retry=RetryPolicy(max_attempts=1))
    agent = Agent(
        OpenAIChatModel("gpt-4o", base_url=f"{url}/v1", api_key="sk-bench", settings=settings),
        tools=[get_weather],
    )

    def legato_once() -> object:
        return list(agent.stream_sync(PROMPT)) if events else agent.run_sync(PROMPT)

    with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-bench", max_retries=0) as client:
        for _ in range(20):  # warm both paths
            raw_sync(client, stream=stream)
            legato_once()
        ours: list[Sample] = []
        raw: list[Sample] = []
        for i in range(rounds):
            pair = [
                lambda: ours.append(_time_sync(legato_once)),
                lambda: raw.append(_time_sync(lambda: raw_sync(client, stream=stream))),
            ]
            for step in pair if i % 2 else reversed(pair):
                step()
    where = "worker thread" if threading.current_thread() is not threading.main_thread() else ""
    how = f" ({where})" if where else ""
    kind = "stream_sync" if events else "streaming" if stream else "non-streaming"
    _report(f"sync{how}, {kind}", ours, raw, 1.10)


async def bench_async(url: str, rounds: int, *, stream: bool) -> None:
    settings = ProviderSettings(stream=stream, retry=RetryPolicy(max_attempts=1))
    model = OpenAIChatModel("gpt-4o", base_url=f"{url}/v1", api_key="sk-bench", settings=settings)
    agent = Agent(model, tools=[get_weather])
    async with openai.AsyncOpenAI(
        base_url=f"{url}/v1", api_key="sk-bench", max_retries=0
    ) as client:
        for _ in range(20):
            await raw_async(client, stream=stream)
            await agent.run(PROMPT)
        ours: list[Sample] = []
        raw: list[Sample] = []
        for i in range(rounds):
            order = [True, False] if i % 2 else [False, True]
            for legato_first in order:
                if legato_first:
                    ours.append(await _time_async(lambda: agent.run(PROMPT)))
                else:
                    raw.append(await _time_async(lambda: raw_async(client, stream=stream)))
    await model.aclose()
    _report(f"async, {'streaming' if stream else 'non-streaming'}", ours, raw, 1.05)


async def bench_chunks(url: str, rounds: int, chunks: int = 2000) -> None:
    """Added time per streamed chunk: one long streamed answer, legato vs the raw SDK."""
    from legato.messages import Message
    from legato.models import ModelRequest, ModelSettings

    settings = ProviderSettings(retry=RetryPolicy(max_attempts=1))
    model = OpenAIChatModel("gpt-4o", base_url=f"{url}/v1", api_key="sk-bench", settings=settings)
    request = ModelRequest(
        messages=(Message.user("Tell me a long story."),),
        settings=ModelSettings(extra_body={"metadata": {"chunks": str(chunks)}}),
    )
    ours: list[Sample] = []
    raw: list[Sample] = []

    async def legato_once() -> None:
        async for _ in model.stream(request):
            pass

    async def raw_once(client: openai.AsyncOpenAI) -> None:
        stream = await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "Tell me a long story."}],
            stream=True,
            stream_options={"include_usage": True},
            metadata={"chunks": str(chunks)},
        )
        text = ""
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""

    async with openai.AsyncOpenAI(
        base_url=f"{url}/v1", api_key="sk-bench", max_retries=0
    ) as client:
        for _ in range(3):
            await legato_once()
            await raw_once(client)
        for i in range(rounds):
            for legato_first in [True, False] if i % 2 else [False, True]:
                if legato_first:
                    ours.append(await _time_async(legato_once))
                else:
                    raw.append(await _time_async(lambda: raw_once(client)))
    await model.aclose()
    for label, index in (("wall", 0), ("client CPU", 1)):
        o = statistics.median(s[index] for s in ours) / chunks
        r = statistics.median(s[index] for s in raw) / chunks
        print(
            f"per streamed chunk, {label:<10} ({chunks} chunks): legato {o * 1e6:6.1f} us, "
            f"SDK {r * 1e6:6.1f} us, added {(o - r) * 1e6:6.1f} us (target < 300 us)"
        )


def serve() -> None:
    """Run the simulator in this process until stdin closes (the benchmark's server side)."""
    with WireSimulator(responder=respond) as sim:
        print(sim.url, flush=True)
        sys.stdin.read()


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(
        f"python {platform.python_version()} on {platform.machine()}, openai {openai.__version__}"
    )
    print(f"{rounds} alternating rounds per figure; medians; simulator in its own process")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    # The simulator runs in a child process: in this one it would compete for the GIL
    # with the client under test and add milliseconds of noise to both sides.
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        gc.collect()
        for stream in (False, True):
            bench_sync(url, rounds, stream=stream)
        bench_sync(url, rounds, stream=True, events=True)
        for stream in (False, True):
            bench_sync(url, rounds, stream=stream, in_worker=True)
        bench_sync(url, rounds, stream=True, events=True, in_worker=True)
        for stream in (False, True):
            asyncio.run(bench_async(url, rounds, stream=stream))
        asyncio.run(bench_chunks(url, max(5, rounds // 20)))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main()
