"""The driver every framework script shares: tasks, timing, tags, and the JSON report.

A framework script imports this module first (its clock starts here), then its framework, then
calls `main(adapter, imported_at)`. The orchestrator passes one task as JSON in `argv[1]`; the
script prints one line `RESULT {...}`. Standard library only: it runs in every framework's venv.

Tasks: `cold` (import, construct, first run, RSS), `warm` (ms per run for each mode), `memory`
(per idle agent and per held session), `load` (N concurrent async runs: throughput, p50, p99).
Every run's prompt carries `[run:<prefix><n>]`; the report says how many runs were made, how
many times the tool ran and how many answers were wrong, which the orchestrator checks against
the mock server's counts.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import asyncio  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tracemalloc  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mockserver import ANSWER, TOOL_MARK  # noqa: E402

MODES = ("sync", "async", "stream_sync", "stream_async")
METHOD = {
    "sync": "run_sync",
    "async": "run_async",
    "stream_sync": "stream_sync",
    "stream_async": "stream_async",
}
"""Each mode's method on `Adapter`."""


class Counter:
    """Runs made, tool calls and wrong answers in this process."""

    runs = 0
    tool_calls = 0
    wrong = 0
    prefix = "x/"


def weather(city: str) -> str:
    """The tool's body, the same in every framework (counted)."""
    Counter.tool_calls += 1
    return f"It is sunny in {city}, 24 degrees ({TOOL_MARK})."


WIRE_TOOLS: list[Any] = [
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
"""The tool as Chat Completions takes it, for the scripts that write the wire by hand."""


def follow_up(text: str, content: str | None, call_id: str, args: str) -> list[Any]:
    """The second request's messages: the prompt, the model's call, the tool's output."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": args},
    }
    output = weather(json.loads(args)["city"])
    return [
        {"role": "user", "content": text},
        {"role": "assistant", "content": content or None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def prompt() -> str:
    """A fresh prompt: the question and this run's tag."""
    Counter.runs += 1
    return f"What is the weather in Paris? [run:{Counter.prefix}{Counter.runs}]"


def check(answer: object) -> object:
    """Count an answer that is not the scripted one."""
    if ANSWER not in str(answer):
        Counter.wrong += 1
    return answer


class Adapter:
    """One framework's agent. Subclasses define `model`, `agent` and the modes they have."""

    name = "?"
    one_conversation = False
    """An agent object holds one conversation at a time: concurrent runs get an agent each."""

    def model(self, url: str, streamed: bool = False) -> Any:
        """The model/client object, shared by every agent of a process.

        `streamed`: the agents on it serve the streamed modes (a framework that picks plain or
        streamed requests per model, not per call, builds a streaming one).
        """
        return url

    def agent(self, model: Any) -> Any:
        """An agent with the `get_weather` tool on `model`."""
        raise NotImplementedError

    def run_sync(self, agent: Any, text: str) -> Any:
        """One blocking run; returns the answer (or a result holding it)."""
        raise NotImplementedError

    async def run_async(self, agent: Any, text: str) -> Any:
        """One awaited run."""
        raise NotImplementedError

    def stream_sync(self, agent: Any, text: str) -> Any:
        """One streamed run, iterated from blocking code."""
        raise NotImplementedError

    async def stream_async(self, agent: Any, text: str) -> Any:
        """One streamed run, iterated asynchronously."""
        raise NotImplementedError

    def answer(self, result: Any) -> str:
        """The answer's text from what a run returned."""
        return str(result)

    async def aclose(self, model: Any) -> None:
        """Release the model's client at the end of an event loop (when it needs it)."""

    def has(self, mode: str) -> bool:
        """Whether this framework has `mode` (it overrides the method)."""
        method = METHOD[mode]
        return getattr(type(self), method) is not getattr(Adapter, method)


def rss_mb() -> float:
    """Resident set size of this process, MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 4)


def _one_sync(adapter: Adapter, agent: Any, mode: str) -> float:
    fn: Callable[[Any, str], Any] = getattr(adapter, METHOD[mode])
    text = prompt()
    t = time.perf_counter()
    result = fn(agent, text)
    took = time.perf_counter() - t
    check(adapter.answer(result))
    return took


async def _one_async(adapter: Adapter, agent: Any, mode: str) -> float:
    fn: Callable[[Any, str], Awaitable[Any]] = getattr(adapter, METHOD[mode])
    text = prompt()
    t = time.perf_counter()
    result = await fn(agent, text)
    took = time.perf_counter() - t
    check(adapter.answer(result))
    return took


def cold(adapter: Adapter, url: str, imported_at: float) -> dict[str, Any]:
    """Import (already done), construct, first run, RSS: a fresh process's first seconds."""
    t = time.perf_counter()
    if adapter.has("sync"):
        agent = adapter.agent(adapter.model(url))
        built = time.perf_counter()
        _one_sync(adapter, agent, "sync")
    else:

        async def first() -> float:
            model = adapter.model(url)
            a = adapter.agent(model)
            done = time.perf_counter()
            await _one_async(adapter, a, "async")
            await adapter.aclose(model)
            return done

        built = asyncio.run(first())
    ran = time.perf_counter()
    return {
        "import_ms": _ms(imported_at - T0),
        "construct_ms": _ms(built - t),
        "first_run_ms": _ms(ran - built),
        "cold_ms": _ms(ran - T0),
        "rss_mb": round(rss_mb(), 2),
    }


def warm(adapter: Adapter, url: str, modes: list[str], runs: int, warmup: int) -> dict[str, Any]:
    """Median and best ms per run for each mode the framework has, wall and CPU.

    CPU is this process's (every thread's) CPU time per run: steadier than wall time on a
    shared machine. The blocking modes run first; then every awaited mode in one event loop
    (some frameworks cache clients bound to the first loop they ran on).
    """
    samples: dict[str, list[tuple[float, float]]] = {}
    mine = [m for m in modes if adapter.has(m)]
    for mode in [m for m in mine if not m.endswith("async")]:
        agent = adapter.agent(adapter.model(url, mode.startswith("stream")))
        for _ in range(warmup):
            _one_sync(adapter, agent, mode)
        got: list[tuple[float, float]] = []
        for _ in range(runs):
            cpu = time.process_time()
            wall = _one_sync(adapter, agent, mode)
            got.append((wall, time.process_time() - cpu))
        samples[mode] = got

    async def awaited() -> None:
        for mode in [m for m in mine if m.endswith("async")]:
            model = adapter.model(url, mode.startswith("stream"))
            agent = adapter.agent(model)
            for _ in range(warmup):
                await _one_async(adapter, agent, mode)
            got: list[tuple[float, float]] = []
            for _ in range(runs):
                cpu = time.process_time()
                wall = await _one_async(adapter, agent, mode)
                got.append((wall, time.process_time() - cpu))
            samples[mode] = got
            await adapter.aclose(model)

    asyncio.run(awaited())
    return {
        mode: {
            "median_ms": _ms(statistics.median(w for w, _ in s)),
            "best_ms": _ms(min(w for w, _ in s)),
            "cpu_ms": _ms(statistics.median(c for _, c in s)),
        }
        for mode, s in samples.items()
    }


def memory(adapter: Adapter, url: str, count: int) -> dict[str, Any]:
    """KiB per idle agent (on one shared model) and per held session (a run's result kept).

    Measured with `tracemalloc` (Python allocations still live after a collection), which is
    steadier than RSS deltas; tracing starts after three warm-up runs, so imports and caches
    filled by a first run are not counted. Sessions run through the blocking API when the
    framework has one, else awaited one by one.
    """

    def live() -> int:
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    def idle_kib(model: Any) -> float:
        before = live()
        idle = [adapter.agent(model) for _ in range(count)]
        grown = live() - before
        del idle
        return grown / 1024 / count

    if adapter.has("sync"):
        model = adapter.model(url)
        agent = adapter.agent(model)
        for _ in range(3):
            _one_sync(adapter, agent, "sync")
        tracemalloc.start()
        per_agent = idle_kib(model)
        before = live()
        held = [adapter.run_sync(agent, prompt()) for _ in range(count)]
        per_session = (live() - before) / 1024 / count
        tracemalloc.stop()
        for result in held:
            check(adapter.answer(result))
    else:

        async def measure() -> tuple[float, float]:
            model = adapter.model(url)
            agent = adapter.agent(model)
            for _ in range(3):
                await _one_async(adapter, agent, "async")
            tracemalloc.start()
            per_agent = idle_kib(model)
            before = live()
            held = [await adapter.run_async(agent, prompt()) for _ in range(count)]
            per_session = (live() - before) / 1024 / count
            tracemalloc.stop()
            for result in held:
                check(adapter.answer(result))
            await adapter.aclose(model)
            return per_agent, per_session

        per_agent, per_session = asyncio.run(measure())
    return {"idle_agent_kib": round(per_agent, 2), "held_session_kib": round(per_session, 2)}


class _GcClock:
    """A `gc.callbacks` entry: CPU time spent in the cyclic collector, and full collections."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
            return
        self.seconds += time.process_time() - self._started
        if info["generation"] == 2:
            self.full += 1


def load(adapter: Adapter, url: str, n: int) -> dict[str, Any]:
    """N concurrent async runs in one loop: throughput, latency percentiles, CPU and GC per run.

    CPU is this process's over the N runs; GC is the part of it spent in the cyclic
    collector (timed by a `gc.callbacks` entry), with the number of full collections.
    """
    if not adapter.has("async"):
        return {"skipped": "no async API"}

    async def measure() -> dict[str, Any]:
        model = adapter.model(url)
        shared = adapter.agent(model)

        def agents(k: int) -> list[Any]:
            if adapter.one_conversation:
                return [adapter.agent(model) for _ in range(k)]
            return [shared] * k

        await asyncio.gather(*(_one_async(adapter, a, "async") for a in agents(10)))
        ready = agents(n)
        collected = _GcClock()
        gc.callbacks.append(collected)
        cpu = time.process_time()
        t = time.perf_counter()
        took = await asyncio.gather(*(_one_async(adapter, a, "async") for a in ready))
        wall = time.perf_counter() - t
        cpu = time.process_time() - cpu
        gc.callbacks.remove(collected)
        await adapter.aclose(model)
        ordered = sorted(took)
        return {
            "runs_per_s": round(n / wall, 2),
            "wall_ms": _ms(wall),
            "cpu_ms_per_run": _ms(cpu / n),
            "gc_ms_per_run": _ms(collected.seconds / n),
            "full_collections": collected.full,
            "p50_ms": _ms(ordered[len(ordered) // 2]),
            "p99_ms": _ms(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]),
        }

    return asyncio.run(measure())


def main(adapter: Adapter, imported_at: float) -> None:
    """Run the task in argv[1] and print `RESULT <json>`."""
    task: dict[str, Any] = json.loads(sys.argv[1])
    Counter.prefix = task["prefix"]
    url: str = task["url"]
    kind = task["task"]
    if kind == "cold":
        out = cold(adapter, url, imported_at)
    elif kind == "warm":
        out = warm(adapter, url, task.get("modes", list(MODES)), task["runs"], task["warmup"])
    elif kind == "memory":
        out = memory(adapter, url, task["count"])
    elif kind == "load":
        if task.get("gc_threshold"):  # the same process setting for every framework
            gc.set_threshold(*task["gc_threshold"])
        out = load(adapter, url, task["n"])
    else:
        raise SystemExit(f"unknown task {kind!r}")
    out["runs"] = Counter.runs
    out["tool_calls"] = Counter.tool_calls
    out["wrong_answers"] = Counter.wrong
    print("\nRESULT " + json.dumps(out), flush=True)  # on a line of its own
