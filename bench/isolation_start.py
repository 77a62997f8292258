"""How fast an isolated call starts: from `Tool.invoke` to the tool's first line.

A tool with `isolation="process"` runs in a child forked from the zygote (a long-lived
worker parent that has imported legato and the tool's module). Measured here:

- warm: the zygote is running; the time from `Tool.invoke` (what the run does right after
  the gate admitted the call) to the tool's first line, read on the system's monotonic clock
  in both processes, and the whole call's round trip;
- cold: the first call of an interpreter, which starts the zygote first;
- before: what each new worker cost until 2026-12-06, a fresh interpreter importing legato;
- memory: the zygote's resident set, and what one forked call (and the idle spare child the
  zygote keeps forked ahead) adds of its own (private dirty pages), the rest being shared
  with the zygote.

Figures only, no assert. Run: python bench/isolation_start.py [calls]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from legato import RunContext, tool
from legato.tools._isolation import close_workers
from legato.tools._zygote import _ZYGOTE, zygote_info  # pyright: ignore[reportPrivateUsage]


def _private_kib(pid: str = "self") -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Private_Dirty:"):
            return int(line.split()[1])
    return 0


@tool(isolation="process")
def first_line(memory: bool = False) -> dict[str, Any]:
    """The monotonic time of the tool's first line (and its private memory when asked)."""
    at = time.monotonic()
    return {"at": at, "private_kib": _private_kib() if memory else 0}


async def _call(memory: bool = False) -> tuple[float, float, int]:
    """(invoke → first line, round trip) in ms, and the call's private KiB."""
    ctx: RunContext[None] = RunContext(deps=None, run_id="bench")
    before = time.monotonic()
    seen = await first_line.invoke({"memory": memory}, ctx)
    after = time.monotonic()
    return (seen["at"] - before) * 1000, (after - before) * 1000, seen["private_kib"]


def _quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"median {statistics.median(ordered):7.2f} ms   p90 {p90:7.2f} ms   max {ordered[-1]:7.2f} ms"


def _fresh_interpreters(n: int) -> list[float]:
    """Milliseconds to start an interpreter that imports legato (a worker before the zygote)."""
    times: list[float] = []
    for _ in range(n):
        began = time.monotonic()
        subprocess.run([sys.executable, "-c", "import legato.tools"], check=True)
        times.append((time.monotonic() - began) * 1000)
    return times


async def main(calls: int) -> None:
    cold: list[float] = []
    for _ in range(5):
        close_workers()
        cold.append((await _call())[0])
    starts: list[float] = []
    trips: list[float] = []
    for _ in range(calls):
        start, trip, _ = await _call()
        starts.append(start)
        trips.append(trip)
    _, _, private = await _call(memory=True)
    info = zygote_info()
    await asyncio.sleep(0.5)  # let the next spare be forked
    spare = _ZYGOTE._spare  # pyright: ignore[reportPrivateUsage]
    spare_kib = _private_kib(str(spare.pid)) if spare is not None else 0
    close_workers()
    fresh = await asyncio.to_thread(_fresh_interpreters, 5)

    load = os.getloadavg()[0]
    print(f"isolated call start ({os.cpu_count()} CPUs, load average {load:.1f}, {calls} calls)")
    print(f"  warm: invoke -> first line   {_quantiles(starts)}")
    print(f"  warm: whole call             {_quantiles(trips)}")
    print(f"  cold: zygote started first   {_quantiles(cold)}")
    print(f"  before: a fresh interpreter importing legato.tools  {_quantiles(fresh)}")
    if info is not None:
        print(f"  zygote resident memory: {info[1] / 1024:.1f} MiB")
    print(f"  one call's own memory (private dirty pages): {private / 1024:.1f} MiB")
    print(f"  the idle spare's own memory (private dirty pages): {spare_kib / 1024:.1f} MiB")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
