"""Framework overhead with a scripted model: steps per second, a single-turn run, construction.

Run: `python bench/loop_overhead.py`. The model answers instantly, so every microsecond
measured is legato's own work (journal, state, validation, tool dispatch). Prints figures;
asserts nothing.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
import tracemalloc

from legato import Agent, tool
from legato.messages import Usage
from legato.models import ModelRequest
from legato.testing import FunctionModel, ScriptedModel, call, reply


@tool
def lookup(key: str, limit: int = 3) -> str:
    """Look a key up.

    Args:
        key: What to look up.
        limit: How many results.
    """
    return f"{key}:{limit}"


@tool
async def alookup(key: str, limit: int = 3) -> str:
    """Look a key up, asynchronously.

    Args:
        key: What to look up.
        limit: How many results.
    """
    return f"{key}:{limit}"


def tool_step_model(steps: int, name: str) -> FunctionModel:
    """Calls `lookup` once per step, then answers."""
    usage = Usage(input_tokens=100, output_tokens=10, requests=1)
    answers = [reply(call(name, {"key": f"k{i}", "limit": 2}), usage=usage) for i in range(steps)]

    def respond(request: ModelRequest) -> object:
        done = sum(1 for m in request.messages if m.role == "tool")
        return answers[done] if done < steps else reply("done", usage=usage)

    return FunctionModel(respond, chunk_size=1 << 20)  # type: ignore[arg-type] # returns ModelResponse


async def steps_per_second(steps: int, repeats: int, *, sync_tool: bool) -> list[float]:
    rates: list[float] = []
    chosen = lookup if sync_tool else alookup
    for _ in range(repeats):
        agent = Agent(tool_step_model(steps, chosen.name), tools=[chosen], max_steps=steps + 1)
        started = time.perf_counter()
        result = await agent.run("go")
        elapsed = time.perf_counter() - started
        assert result.output == "done"
        rates.append(steps / elapsed)
    return rates


async def single_turn(repeats: int) -> list[float]:
    agent = Agent(ScriptedModel(["hello"] * (repeats + 10), chunk_size=1 << 20))
    for _ in range(10):
        await agent.run("hi")
    times: list[float] = []
    for _ in range(repeats):
        started = time.perf_counter()
        await agent.run("hi")
        times.append((time.perf_counter() - started) * 1e6)
    return times


def construction(repeats: int) -> list[float]:
    model = ScriptedModel([])
    times: list[float] = []
    for _ in range(repeats):
        started = time.perf_counter()
        Agent(model, tools=[lookup], instructions="Be brief.")
        times.append((time.perf_counter() - started) * 1e6)
    return times


def idle_agent_memory(count: int) -> float:
    model = ScriptedModel([])
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    agents = [Agent(model, tools=[lookup], instructions="Be brief.") for _ in range(count)]
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    total = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    del agents
    return total / count / 1024


def main() -> None:
    print(f"python {sys.version.split()[0]}")
    for label, sync_tool in (("async tool", False), ("sync tool, run in a thread", True)):
        rates = asyncio.run(steps_per_second(steps=200, repeats=7, sync_tool=sync_tool))
        rate = statistics.median(rates)
        print(
            f"  steps per second, one {label} call per step (200-step runs): median {rate:,.0f} "
            f"(= {1e6 / rate:,.0f} µs per step)"
        )
    turns = asyncio.run(single_turn(2000))
    print(
        f"  single-turn run (text answer):   median {statistics.median(turns):,.0f} µs   "
        f"p90 {statistics.quantiles(turns, n=10)[-1]:,.0f} µs"
    )
    built = construction(5000)
    print(f"  agent construction, one tool:    median {statistics.median(built):,.1f} µs")
    print(f"  memory per idle agent:           {idle_agent_memory(1000):,.1f} KiB")


if __name__ == "__main__":
    main()
