"""Cold `import legato` time: median and spread over fresh interpreter processes.

Run: `python bench/import_time.py [runs] [SRC ...]`. Prints figures; asserts nothing.

With source trees (`SRC`: a `src/` directory each, e.g. before and after a change), it
times instead the first line a user writes, `from legato import Agent, tool` plus
`Agent("test:echo")`, against its floor (`from pydantic import BaseModel, TypeAdapter;
import asyncio`), the trees and the floor alternating in every round, bytecode written
beforehand: CPU medians and the ratio to the floor.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

SNIPPET = (
    "import time; t = time.perf_counter(); c = time.process_time(); {statement}; "
    "print(time.perf_counter() - t, time.process_time() - c)"
)


FIRST_LINE = 'from legato import Agent, tool; Agent("test:echo")'
FLOOR = "from pydantic import BaseModel, TypeAdapter; import asyncio"


def once(statement: str, src: str | None = None) -> tuple[float, float]:
    """Wall and CPU milliseconds of one statement in a fresh interpreter (`src` first on the path)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    out = subprocess.run(
        [sys.executable, "-c", SNIPPET.format(statement=statement)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    w, c = out.stdout.split()
    return float(w) * 1000, float(c) * 1000


def first_line(trees: list[str], runs: int) -> None:
    """The first line of each tree against the floor, alternating, medians of CPU."""
    for src in trees:  # bytecode written before anything is timed
        subprocess.run([sys.executable, "-m", "compileall", "-q", src], check=True)
        once(FIRST_LINE, src)
    cpu: dict[str, list[float]] = {"floor": [], **{src: [] for src in trees}}
    ratios: dict[str, list[float]] = {src: [] for src in trees}
    for _ in range(runs):
        floor = once(FLOOR)[1]
        cpu["floor"].append(floor)
        for src in trees:
            mine = once(FIRST_LINE, src)[1]
            cpu[src].append(mine)
            ratios[src].append(mine / floor)
    print(f"python {sys.version.split()[0]}, {runs} rounds, CPU medians")
    print(f"  {'the floor':<40} {statistics.median(cpu['floor']):6.1f} ms")
    for src in trees:
        median = statistics.median(cpu[src])
        ratio = median / statistics.median(cpu["floor"])
        paired = statistics.median(ratios[src])
        print(f"  {src:<40} {median:6.1f} ms  {ratio:.2f}x the floor (paired {paired:.2f}x)")


def measure(statement: str, runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds of the import, one fresh interpreter per run.

    CPU time is what to compare on a shared machine: other processes inflate wall time.
    """
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", SNIPPET.format(statement=statement)],
            check=True,
            capture_output=True,
            text=True,
        )
        w, c = out.stdout.split()
        wall.append(float(w) * 1000)
        cpu.append(float(c) * 1000)
    return wall, cpu


def heaviest_imports(limit: int = 8) -> list[tuple[int, str]]:
    """Top-level modules by cumulative import time, from `python -X importtime`.

    `import legato` itself loads no submodule (its names load on first access), so this
    profiles `from legato import Agent, tool`: what defining an agent costs.
    """
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "from legato import Agent, tool"],
        check=True,
        capture_output=True,
        text=True,
    )
    rows: list[tuple[int, str]] = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cumulative, name = line.removeprefix("import time:").split("|")
        if not name.startswith("  "):  # nested imports are indented further
            rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:limit]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    if len(sys.argv) > 2:
        first_line(sys.argv[2:], runs)
        return
    measure("import legato", 3)  # warm the file cache
    legato = measure("import legato", runs)
    agent = measure("from legato import Agent, tool", runs)
    pydantic = measure("from pydantic import BaseModel, TypeAdapter; import asyncio", runs)
    print(f"python {sys.version.split()[0]}, {runs} runs each")
    rows = (
        ("legato", legato),
        ("Agent, tool (from legato)", agent),
        ("pydantic + asyncio alone", pydantic),
    )
    for name, (wall, cpu) in rows:
        q = statistics.quantiles(wall, n=10)
        print(
            f"  import {name:<26} wall median {statistics.median(wall):6.1f} ms "
            f"(p10 {q[0]:6.1f}, p90 {q[-1]:6.1f});  CPU median {statistics.median(cpu):6.1f} ms"
        )
    print(
        "  heaviest top-level imports of `from legato import Agent, tool` (cumulative µs, one run):"
    )
    for micros, name in heaviest_imports():
        print(f"    {micros:>8}  {name}")


if __name__ == "__main__":
    main()
