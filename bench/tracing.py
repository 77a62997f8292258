"""What OpenTelemetry tracing costs per step: a scripted agent with tracing off and on.

Run: `python bench/tracing.py`. The model answers instantly and each step calls one tool, so
the difference is the tracing itself: a `GenAITracing` hook feeding an SDK tracer provider
whose spans go to an in-memory exporter (the cheapest real pipeline). Also reports whether a
run without tracing loaded any OpenTelemetry module. Prints figures; asserts nothing.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from legato import Agent, tool
from legato.messages import Usage
from legato.models import ModelRequest
from legato.testing import FunctionModel, call, reply

STEPS = 50
REPEATS = 15


@tool
async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: What to look up.
    """
    return key.upper()


def _model() -> FunctionModel:
    usage = Usage(input_tokens=100, output_tokens=10, requests=1)

    def respond(request: ModelRequest) -> object:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < STEPS:
            return reply(call("lookup", {"key": f"k{done}"}), usage=usage)
        return reply("done", usage=usage)

    return FunctionModel(respond, chunk_size=1 << 20)  # type: ignore[arg-type] # returns ModelResponse


def _once(hooks: list[object]) -> tuple[float, float]:
    """Wall and CPU microseconds per step of one run."""
    agent = Agent(_model(), tools=[lookup], hooks=hooks, max_steps=STEPS + 2)  # type: ignore[arg-type]
    began, cpu = time.perf_counter(), time.process_time()
    agent.run_sync("go")
    wall, used = time.perf_counter() - began, time.process_time() - cpu
    return wall / (STEPS + 1) * 1e6, used / (STEPS + 1) * 1e6


def per_step(variants: dict[str, list[object]]) -> dict[str, tuple[float, float]]:
    """Wall and CPU microseconds per step (one model call, one tool call) of each variant:
    medians of REPEATS runs, the variants interleaved so the machine's noise hits them alike."""
    walls: dict[str, list[float]] = {name: [] for name in variants}
    cpus: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(REPEATS):
        for name, hooks in variants.items():
            wall, cpu = _once(hooks)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {
        name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in variants
    }


def main() -> None:
    probe = (
        "import sys; from legato import Agent; from legato.testing import ScriptedModel;"
        "Agent(ScriptedModel(['hi'])).run_sync('x');"
        "print(sum(m.startswith('opentelemetry') for m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    print(f"opentelemetry modules loaded by a run without tracing: {loaded}")

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from legato.tracing import GenAITracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _once([])  # warm up
    figures = per_step(
        {
            "off": [],
            "on": [GenAITracing(tracer_provider=provider)],
            "content": [GenAITracing(tracer_provider=provider, capture_content=True)],
        }
    )
    spans = len(exporter.get_finished_spans()) // (2 * REPEATS)
    print(f"steps per run: {STEPS + 1} model calls, {STEPS} tool calls; {spans} spans per run")
    off_wall, off_cpu = figures["off"]
    labels = {"off": "tracing off", "on": "tracing on", "content": "tracing on, with content"}
    for name, label in labels.items():
        wall, cpu = figures[name]
        print(
            f"{label:<26} wall {wall:7.1f} us/step (+{wall - off_wall:6.1f})   "
            f"CPU {cpu:7.1f} us/step (+{cpu - off_cpu:6.1f}, x{cpu / off_cpu:.2f})"
        )


if __name__ == "__main__":
    main()
