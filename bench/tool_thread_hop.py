"""What a plain `def` tool's thread costs per call: legato's `call_in_thread` and asyncio's.

A `def` tool runs on a reused daemon thread (`legato.tools._isolation.call_in_thread`), so a
blocking tool never stops the event loop. Each call wakes that thread and is woken back: this
measures the CPU (every thread's) and wall time of awaiting a function that returns at once,
through `call_in_thread` and through `asyncio.to_thread`, alternating, after a warm-up.

    python bench/tool_thread_hop.py [calls] [rounds]
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

from legato.tools._isolation import call_in_thread


def _same(value: int) -> int:
    return value


async def _measure(call: Callable[[], Awaitable[int]], calls: int) -> tuple[float, float]:
    for _ in range(calls // 10):
        await call()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.process_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6


async def main(calls: int, rounds: int) -> None:
    """Print CPU and wall µs per call for each way, one line per round."""
    ways: dict[str, Callable[[], Awaitable[int]]] = {
        "call_in_thread": lambda: call_in_thread(_same, {"value": 1}),
        "asyncio.to_thread": lambda: asyncio.to_thread(_same, 1),
    }
    for round_ in range(1, rounds + 1):
        for name, call in ways.items():
            cpu, wall = await _measure(call, calls)
            print(f"round {round_}  {name:18s} CPU {cpu:6.1f} µs  wall {wall:6.1f} µs per call")


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:]]
    asyncio.run(main(*(arguments + [5000, 3][len(arguments) :])))
