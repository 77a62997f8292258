"""The four shared-state anomalies, each produced by a scripted scenario with coherence off
and prevented with it on: 1,000 randomized interleavings each, no model involved.

The counts are printed in the test output, e.g. `stale-generation: coherence off 929/1000
violations, on 0/1000`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from legato import RunContext, Tool
from legato.coherence import CommitSequencer, ResourceStore, ToolRegistry
from legato.exceptions import CommitConflict, PhantomTool

RUNS = 1000
Scenario = Callable[[random.Random, bool], Awaitable[bool]]
"""One randomized run: True when the anomaly happened."""


async def jitter(rng: random.Random, most: int = 3) -> None:
    """Give other tasks a random number of chances to run (no sleeping)."""
    for _ in range(rng.randint(0, most)):
        await asyncio.sleep(0)


async def stale_generation(rng: random.Random, enforce: bool) -> bool:
    """Three agents each read a counter, generate, and write it plus one."""
    store = ResourceStore({"state:counter": 0}, enforce=enforce)

    async def agent(name: str) -> None:
        for _ in range(20):
            txn = store.begin(author=name)
            value = txn.read("state:counter")
            await jitter(rng)  # generating from the snapshot
            txn.write("state:counter", value + 1)
            try:
                txn.commit()
            except CommitConflict:
                continue  # re-read and retry, as the model is told to
            return

    await asyncio.gather(*(agent(n) for n in "abc"))
    return store.read("state:counter").value != 3  # an update was lost


async def phantom_tool(rng: random.Random, enforce: bool) -> bool:
    """A child is shown a tool; meanwhile the tool is replaced or removed; the child calls it."""
    live = {"deploy": "v1"}
    stale_runs: list[str] = []

    def make(version: str) -> Tool:
        async def deploy() -> str:
            if live.get("deploy") != version:
                stale_runs.append(version)  # dispatched an implementation no longer registered
            return version

        return Tool.from_schema(
            name="deploy", description="Deploy.", parameters={"type": "object"}, function=deploy
        )

    registry = ToolRegistry([make("v1")], enforce=enforce)
    shown = {t.name: t for t in await registry.list_tools()}

    async def admin() -> None:
        await jitter(rng)
        if rng.random() < 0.5:
            registry.replace(make("v2"))
            live["deploy"] = "v2"
        else:
            registry.remove("deploy")
            live.pop("deploy")

    async def child() -> None:
        await jitter(rng)
        ctx: RunContext[None] = RunContext(deps=None, run_id="child")
        try:
            await shown["deploy"].invoke({}, ctx)
        except PhantomTool:
            pass  # the child sees a tool error and looks at the tools again

    await asyncio.gather(admin(), child())
    return bool(stale_runs)


async def causal_cascade(rng: random.Random, enforce: bool) -> bool:
    """B derives y from x, which A wrote and which is then retracted."""
    store = ResourceStore({"state:x": "clean", "state:y": "initial"}, enforce=enforce)
    a = store.begin(author="A")
    a.write("state:x", "bad")
    bad = a.commit()

    async def derive() -> None:
        for _ in range(20):
            await jitter(rng, 2)
            txn = store.begin(author="B")
            x = txn.read("state:x")
            await jitter(rng)
            txn.write("state:y", f"derived from {x}")
            try:
                txn.commit()
            except CommitConflict:
                continue
            return

    async def retract() -> None:
        await jitter(rng, 4)
        store.retract(bad.id)

    await asyncio.gather(derive(), retract())
    return "bad" in str(store.read("state:y").value)  # the retracted value lives on


async def tool_effect_reordering(rng: random.Random, enforce: bool) -> bool:
    """Parallel calls finish in random order; their effects must apply in issue order."""
    sequencer = CommitSequencer(enforce=enforce)
    applied: list[int] = []
    count = rng.randint(2, 5)

    async def call(ordinal: int) -> None:
        await jitter(rng, 5)
        await sequencer.commit(ordinal, lambda: applied.append(ordinal))

    await asyncio.gather(*(call(i) for i in range(count)))
    return applied != list(range(count))


SCENARIOS: dict[str, Scenario] = {
    "stale-generation": stale_generation,
    "phantom-tool": phantom_tool,
    "causal-cascade": causal_cascade,
    "tool-effect-reordering": tool_effect_reordering,
}


async def violations(scenario: Scenario, *, enforce: bool, seed: int) -> int:
    rng = random.Random(seed)
    count = 0
    for _ in range(RUNS):
        count += await scenario(rng, enforce)
    return count


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_anomaly_happens_without_coherence_and_never_with_it(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = SCENARIOS[name]
    off = await violations(scenario, enforce=False, seed=7)
    on = await violations(scenario, enforce=True, seed=7)
    with capsys.disabled():
        print(f"\n{name}: coherence off {off}/{RUNS} violations, on {on}/{RUNS}")
    assert off > 0, "the scenario must be able to produce the anomaly"
    assert on == 0
