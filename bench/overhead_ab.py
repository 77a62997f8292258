"""Per-run overhead of two legato source trees, paired: CPU time of the same runs, A B A B ...

Run: `python bench/overhead_ab.py BEFORE_SRC AFTER_SRC [--pairs N]`, e.g. with an older
commit checked out by `git worktree add /tmp/before <commit>`:
`python bench/overhead_ab.py /tmp/before/src src`.

Each round starts one fresh interpreter per tree (`PYTHONPATH` set to it; which goes first
alternates), and each
measures the same workload with no store, in CPU time of the process (less disturbed by
other work on a shared machine than wall time): steps of a 200-step run with one async tool
call per step, a single-turn text run, a single-turn `run_sync`, and a
streamed `stream_sync` run (a tool call, then an answer in 12 chunks), and a `run_sync`
run calling one plain `def` tool. The scripted model
answers at once, so what is measured is legato's own work. Prints each figure's median for
both trees and the median of the per-round ratios (after / before). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

FIGURES = {
    "step": "CPU per step, one async tool call per step (200-step runs)",
    "turn": "CPU per single-turn run, await agent.run",
    "sync": "CPU per single-turn run, agent.run_sync",
    "stream": "CPU per streamed run (tool call + 12-chunk answer), stream_sync",
    "def_tool": "CPU per run_sync run with one plain `def` tool call (two model calls)",
}


def child() -> None:
    """The workload, in a fresh interpreter on one tree; prints one JSON line."""
    from legato import Agent, tool
    from legato.testing import FunctionModel, ScriptedModel, call, reply

    @tool
    async def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: What to look up.
        """
        return key

    steps = 200
    answers = [reply(call("lookup", {"key": f"k{i}"})) for i in range(steps)]

    def respond(request: object) -> object:
        done = sum(1 for m in request.messages if m.role == "tool")  # type: ignore[attr-defined]
        return answers[done] if done < steps else reply("done")

    def step_agent() -> Agent:
        model = FunctionModel(respond, chunk_size=1 << 20)  # type: ignore[arg-type]
        return Agent(model, tools=[lookup], max_steps=steps + 1)

    async def steps_cpu() -> float:
        per: list[float] = []
        for i in range(6):
            agent = step_agent()
            cpu = time.process_time()
            await agent.run("go")
            if i:  # the first warms up
                per.append((time.process_time() - cpu) / steps)
        return statistics.median(per)

    async def turns_cpu(n: int) -> float:
        agent = Agent(ScriptedModel(["hi"] * (n + 50)))
        for _ in range(50):
            await agent.run("hello")
        cpu = time.process_time()
        for _ in range(n):
            await agent.run("hello")
        return (time.process_time() - cpu) / n

    def sync_cpu(n: int) -> float:
        agent = Agent(ScriptedModel(["hi"] * (n + 20)))
        for _ in range(20):
            agent.run_sync("hello")
        cpu = time.process_time()
        for _ in range(n):
            agent.run_sync("hello")
        return (time.process_time() - cpu) / n

    figures = {"step": asyncio.run(steps_cpu()), "turn": asyncio.run(turns_cpu(1000))}
    figures["sync"] = sync_cpu(300)
    figures["stream"] = stream_cpu(200)
    figures["def_tool"] = def_tool_cpu(300)
    print(json.dumps(figures))


def def_tool_cpu(n: int) -> float:
    """CPU per `run_sync` run calling one plain `def` tool (run on a tool thread)."""
    from legato import Agent, tool
    from legato.testing import ScriptedModel, call, reply

    @tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: What to look up.
        """
        return key

    script = [reply(call("lookup", {"key": "k"})), "done"] * (n + 20)
    agent = Agent(ScriptedModel(script), tools=[lookup])
    for _ in range(20):
        agent.run_sync("hello")
    cpu = time.process_time()
    for _ in range(n):
        agent.run_sync("hello")
    return (time.process_time() - cpu) / n


def stream_cpu(n: int) -> float:
    """CPU per streamed run: a tool call, then an answer in 12 chunks (26 events)."""
    from legato import Agent, tool
    from legato.testing import ScriptedModel, call, reply

    @tool
    async def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: What to look up.
        """
        return key

    script = [reply(call("lookup", {"key": "k"})), "streamed answer " * 6] * (n + 20)
    agent = Agent(ScriptedModel(script), tools=[lookup])  # 8-character chunks
    events: list[object] = []
    for _ in range(20):
        events = list(agent.stream_sync("hello"))
    cpu = time.process_time()
    for _ in range(n):
        events = list(agent.stream_sync("hello"))
    per = (time.process_time() - cpu) / n
    assert len(events) > 20, len(events)
    return per


def measure(src: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run(
        [sys.executable, __file__, "--child"], env=env, check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description="paired CPU overhead of two source trees")
    parser.add_argument("before", help="the first tree's src folder")
    parser.add_argument("after", help="the second tree's src folder")
    parser.add_argument("--pairs", type=int, default=10)
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"A = {args.before}, B = {args.after}; {args.pairs} rounds A B; load average {load}")
    a: dict[str, list[float]] = {k: [] for k in FIGURES}
    b: dict[str, list[float]] = {k: [] for k in FIGURES}
    for i in range(args.pairs):
        first, second = (args.before, args.after) if i % 2 == 0 else (args.after, args.before)
        one, two = measure(first), measure(second)
        fa, fb = (one, two) if first == args.before else (two, one)
        for k in FIGURES:
            a[k].append(fa[k])
            b[k].append(fb[k])
    for k, label in FIGURES.items():
        ratios = [y / x for x, y in zip(a[k], b[k], strict=True)]
        print(
            f"{label:<60} A {statistics.median(a[k]) * 1e6:7.1f} µs  "
            f"B {statistics.median(b[k]) * 1e6:7.1f} µs  B/A median {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.2f}-{max(ratios):.2f})"
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
    else:
        main()
