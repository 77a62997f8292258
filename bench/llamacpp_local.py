"""Figures for the in-process local model (llamacpp:smollm2): load time, speed, tool-call latency.

Run: .venv/bin/python bench/llamacpp_local.py [--threads N]
Prints one line per measurement; nothing is asserted (machines are noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time

from legato.messages import Message
from legato.models import ModelRequest, ModelSettings, TextDelta, ToolCallDelta
from legato.models.llamacpp import LlamaCppModel
from legato.tools import tool


@tool
def get_weather(city: str, unit: str = "C") -> str:
    """Current weather for a city.

    Args:
        city: City name.
        unit: C or F.
    """
    return city


async def timed(model: LlamaCppModel, request: ModelRequest) -> tuple[float, float, int, int]:
    """(time to first delta, total time, prompt tokens, output tokens) of one streamed request."""
    started = time.perf_counter()
    first = 0.0
    usage = None
    async for event in model.stream(request):
        if isinstance(event, TextDelta | ToolCallDelta) and not first:
            first = time.perf_counter() - started
        if event.kind == "response_completed":
            usage = event.response.usage
    total = time.perf_counter() - started
    assert usage is not None
    return first, total, usage.input_tokens, usage.output_tokens


async def main(threads: int | None, runs: int) -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    model = LlamaCppModel(
        "smollm2", n_threads=threads, settings=ModelSettings(temperature=0.0, max_tokens=128)
    )
    started = time.perf_counter()
    await model.load()
    print(f"load (first in process): {time.perf_counter() - started:.2f} s")

    text = ModelRequest(messages=(Message.user("Write a long story about a dragon."),))
    rates, firsts = [], []
    for _ in range(runs):
        first, total, _, out = await timed(model, text)
        rates.append(out / total)
        firsts.append(first)
    print(
        f"text, 128 tokens: {statistics.median(rates):.0f} tok/s median "
        f"(min {min(rates):.0f}, max {max(rates):.0f}); "
        f"first token {statistics.median(firsts) * 1000:.0f} ms"
    )

    call = ModelRequest(
        messages=(Message.user("What is the weather in Paris?"),),
        tools=(get_weather.definition,),
        tool_choice="required",
    )
    totals = []
    for _ in range(runs):
        _, total, prompt, out = await timed(model, call)
        totals.append(total)
    print(
        f"forced tool call: {statistics.median(totals) * 1000:.0f} ms median "
        f"({prompt} prompt tokens, {out} generated)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.threads, args.runs))
