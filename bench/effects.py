"""Admission overhead of the effect gate, per effect.

Measures `EffectGate.admit` + `settle` for a side-effecting call (the effect id hash, the
dedup ledger, the fence checks, the journal records), with and without an approval
policy, and the same through whole agent runs (a step of 20 parallel side-effecting calls
vs 20 read-only ones). Target: well under 1 ms per effect (journal in memory; the SQLite
store adds its write when it lands).

Then the cost of where a sync tool runs: a daemon thread (the default), the event loop's
thread pool (`asyncio.to_thread`, what legato used before), and a worker process
(`isolation="process"`, which can be killed on cancel or timeout): a call forked from a
warm worker parent (zygote), and the first call, which has to start the zygote.

Run: python bench/effects.py
"""

from __future__ import annotations

import asyncio
import statistics
import time

from legato import Agent, RunContext, Tool, tool
from legato.approvals import ApprovalPolicy, Rule
from legato.budgets import Budget
from legato.effects import Admitted, EffectGate
from legato.events import Journal, RunStarted
from legato.messages import ToolCallPart, ToolResultPart
from legato.testing import ScriptedModel, call, reply


@tool(side_effects="irreversible")
async def write(key: str, value: str) -> str:
    """An in-memory effect."""
    return "ok"


@tool
async def read(key: str, value: str) -> str:
    """Read-only."""
    return "ok"


async def gate_loop(n: int, *, policy: ApprovalPolicy | None, budget: Budget | None) -> float:
    journal = Journal([RunStarted(run_id="bench", agent="a", model="m")])
    gate = EffectGate(journal=journal, policy=policy, budget=budget)
    tools = {"write": write}
    gate.bind(tools)
    calls = [
        ToolCallPart.from_arguments(
            id=f"c{i}", name="write", arguments={"key": f"k{i}", "value": "v" * 40}
        )
        for i in range(n)
    ]
    await gate.begin_step(1, calls, tools)
    started = time.perf_counter()
    for c in calls:
        admitted = await gate.admit(c, write, {"key": "k", "value": "v"})
        assert isinstance(admitted, Admitted)
        await gate.settle(admitted, _result(c), "ok")
    return (time.perf_counter() - started) / n


@tool(side_effects="irreversible", isolation="process")
def sync_write(key: str, value: str) -> str:
    """A sync in-memory effect."""
    return key + value


sync_in_thread = sync_write.replace(name="sync_in_thread", isolation="thread")


async def sync_calls(t: Tool, n: int) -> float:
    ctx: RunContext[None] = RunContext(deps=None, run_id="bench")
    times: list[float] = []
    for i in range(n):
        started = time.perf_counter()
        await t.invoke({"key": f"k{i}", "value": "v" * 40}, ctx)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def pooled_calls(n: int) -> float:
    times: list[float] = []
    for i in range(n):
        started = time.perf_counter()
        await asyncio.to_thread(sync_write.function, key=f"k{i}", value="v" * 40)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def cold_process_calls(n: int) -> float:
    from legato.tools._isolation import close_workers

    times: list[float] = []
    for i in range(n):
        close_workers()  # the next call starts the worker parent (zygote) first
        started = time.perf_counter()
        await sync_write.invoke({"key": f"k{i}", "value": "v"}, RunContext(deps=None, run_id="b"))
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def sync_tool_costs() -> None:
    await sync_calls(sync_write, 20)  # warm up: a worker started
    rows = [
        ("sync tool, daemon thread", await sync_calls(sync_in_thread, 500)),
        ("sync tool, asyncio.to_thread", await pooled_calls(500)),
        ("sync tool, forked from a warm zygote", await sync_calls(sync_write, 500)),
        ("sync tool, zygote started first", await cold_process_calls(5)),
    ]
    for label, seconds in rows:
        print(f"{label:<34} {seconds * 1e6:10.1f} us per call (median)")


def _result(c: ToolCallPart) -> ToolResultPart:
    return ToolResultPart.text_result(call_id=c.id, name=c.name, text="ok")


async def agent_step(tool_name: str, n: int) -> float:
    model = ScriptedModel(
        [reply(*(call(tool_name, {"key": f"k{i}", "value": "v"}) for i in range(n))), "done"]
    )
    agent = Agent(model, tools=[write, read])
    started = time.perf_counter()
    await agent.run("go")
    return time.perf_counter() - started


async def main() -> None:
    n = 5000
    await gate_loop(500, policy=None, budget=None)  # warm up
    rows = [
        ("gate, no policy", await gate_loop(n, policy=None, budget=None)),
        (
            "gate, policy (3 rules, auto)",
            await gate_loop(
                n,
                policy=ApprovalPolicy(
                    rules=[
                        Rule("write", "auto", arguments={"key": "k*"}),
                        Rule("w*", "ask", arguments={"key": "secret*"}),
                        Rule("write", "auto"),
                    ]
                ),
                budget=None,
            ),
        ),
        (
            "gate, policy + budget",
            await gate_loop(n, policy=ApprovalPolicy(), budget=Budget(tool_calls=10**9)),
        ),
    ]
    for label, seconds in rows:
        print(f"{label:<32} {seconds * 1e6:8.1f} us per admitted effect")
    effect_runs = [await agent_step("write", 20) for _ in range(30)]
    read_runs = [await agent_step("read", 20) for _ in range(30)]
    e, r = statistics.median(effect_runs), statistics.median(read_runs)
    print(
        f"agent run, 20 parallel calls:    side-effecting {e * 1e3:.2f} ms, read-only {r * 1e3:.2f} ms "
        f"-> {(e - r) / 20 * 1e6:.1f} us extra per effect (median of 30)"
    )
    await sync_tool_costs()


if __name__ == "__main__":
    asyncio.run(main())
