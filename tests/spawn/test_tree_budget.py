"""Sub-agents spend from their parent run's budget: a parent limited to k model calls makes,
with all its children and theirs, exactly k — foreground, background, resumed and
`agent.as_tool` children alike, concurrent ones included. Each case has a twin with the
protection switched off (`unsafe_switches(tree_budget=False)`) that shows the overshoot."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from legato import Agent, RunContext, tool
from legato.budgets import Budget, BudgetLimits
from legato.effects import unsafe_switches
from legato.events import (
    ChildEvent,
    Journal,
    RunEvent,
    RunFailed,
    SpawnFinished,
    ToolCallFinished,
    ToolCallStarted,
    is_journal_event,
)
from legato.exceptions import BudgetExceeded, ConfigurationError
from legato.models import ModelRequest
from legato.spawn import MemoryJournalStore, child_budget, resume, spawn_tools
from legato.testing import FunctionModel, ScriptedModel, call, reply


@tool
async def look(n: int) -> str:
    """Look at something.

    Args:
        n: Which thing.
    """
    return f"saw {n}"


@dataclass
class Endless:
    """A child model that never stops working: every call asks for another `look`.

    Counts the calls it received (the calls that were really made), and waits a random
    moment in each so that concurrent children interleave differently per seed.
    """

    seed: int = 0
    start: asyncio.Event | None = None
    calls: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    async def __call__(self, request: ModelRequest) -> Any:
        self.calls += 1
        if self.start is not None:
            await self.start.wait()
        for _ in range(self.rng.randint(0, 3)):
            await asyncio.sleep(0)
        return reply(call("look", {"n": self.calls}))


async def run_events(agent: Agent[Any], prompt: str) -> tuple[list[RunEvent], Exception | None]:
    """The run's events, and how it failed (None when it finished)."""
    events: list[RunEvent] = []
    try:
        async for event in agent.stream(prompt):
            events.append(event)
    except Exception as exc:
        return events, exc
    return events, None


def task_number(request: ModelRequest, word: str) -> int:
    """The number in a child's task ("part 2" -> 2)."""
    task = next(m.text for m in request.messages if m.role == "user" and m.text.startswith(word))
    return int(task.split()[-1])


def ends(events: list[RunEvent]) -> list[SpawnFinished]:
    return [e for e in events if isinstance(e, SpawnFinished)]


def spawn_results(events: list[RunEvent]) -> list[str]:
    return [e.result.text for e in events if isinstance(e, ToolCallFinished)]


# -- a waited (foreground) child -----------------------------------------------------------------


def lead_spawning_one(child: Endless, budget: BudgetLimits | None) -> tuple[Agent[str], Any]:
    parent = ScriptedModel([reply(call("spawn", {"task": "look around", "tools": ["look"]})), "ok"])
    spawner = spawn_tools([look], model=FunctionModel(child))
    return Agent(parent, tools=[spawner], budget=budget), parent


@pytest.mark.parametrize("k", [1, 2, 5, 9])
async def test_a_child_draws_from_the_parent_budget_and_the_tree_makes_exactly_k_calls(
    k: int,
) -> None:
    child = Endless()
    agent, parent = lead_spawning_one(child, BudgetLimits(model_calls=k))
    events, error = await run_events(agent, "go")
    # the tree made exactly k model calls: the parent's first, and the child's k - 1
    assert len(parent.requests) + child.calls == k
    assert child.calls == k - 1
    # the child's next call was refused before it was sent; it ended with its budget outcome
    (ended,) = ends(events)
    assert ended.outcome == "budget" and ended.error is not None
    assert "BudgetExceeded: budget for model_calls exceeded: limit " + str(k) in ended.error
    child_end = [e.event for e in events if isinstance(e, ChildEvent)][-1]
    assert isinstance(child_end, RunFailed) and child_end.error_type == "BudgetExceeded"
    # the parent saw it as a tool error, then its own next call was refused too
    (spawned,) = spawn_results(events)
    assert f"failed: BudgetExceeded: budget for model_calls exceeded: limit {k}" in spawned
    assert isinstance(error, BudgetExceeded) and error.resource == "model_calls"
    assert isinstance(events[-1], RunFailed) and events[-1].error_type == "BudgetExceeded"


async def test_without_the_protection_a_child_overshoots_the_parent_budget() -> None:
    child = Endless()
    agent, parent = lead_spawning_one(child, BudgetLimits(model_calls=5))
    with unsafe_switches(tree_budget=False):
        events, error = await run_events(agent, "go")
    # the child spent from its step share only: 20 calls, on a parent limited to 5
    assert child.calls == 20
    assert len(parent.requests) + child.calls > 5
    assert ends(events)[0].error is not None and "MaxStepsExceeded" in (ends(events)[0].error or "")
    assert error is None  # the parent's own two calls fitted its budget


async def test_tool_calls_of_a_child_are_charged_to_the_parent_budget() -> None:
    seen: list[int] = []

    @tool
    async def count(n: int) -> str:
        """Count.

        Args:
            n: A number.
        """
        seen.append(n)
        return "counted"

    def child(request: ModelRequest) -> Any:
        return reply(call("count", {"n": len(request.messages)}))

    def lead() -> Agent[str]:
        parent = ScriptedModel([reply(call("spawn", {"task": "count", "tools": ["count"]})), "ok"])
        return Agent(parent, tools=[spawn_tools([count], model=FunctionModel(child))])

    events, error = await run_events_with(lead(), budget=BudgetLimits(tool_calls=4))
    assert len(seen) == 3  # the parent's spawn call was the first of the 4
    assert ends(events)[0].outcome == "budget"
    assert "tool_calls" in (ends(events)[0].error or "")
    assert error is None  # the parent answered: an answer is no tool call
    seen.clear()
    with unsafe_switches(tree_budget=False):
        await run_events_with(lead(), budget=BudgetLimits(tool_calls=4))
    assert len(seen) == 20  # the child's step share, not the parent's budget, stopped it


async def run_events_with(
    agent: Agent[Any], *, budget: BudgetLimits
) -> tuple[list[RunEvent], Exception | None]:
    events: list[RunEvent] = []
    try:
        async for event in agent.stream("go", budget=budget):
            events.append(event)
    except Exception as exc:
        return events, exc
    return events, None


# -- concurrent background children ----------------------------------------------------------------


async def race(seed: int, k: int) -> tuple[int, list[SpawnFinished], Exception | None]:
    """Four background children race for the last calls of a parent limited to k calls.

    The children's first calls wait until the parent is in `wait_children`, so all four
    are in flight together; returns the calls made in the whole tree.
    """
    start = asyncio.Event()
    children = [Endless(seed=seed * 10 + i, start=start) for i in range(4)]
    made: list[int] = []

    async def child(request: ModelRequest) -> Any:
        return await children[task_number(request, "part")](request)

    def parent(request: ModelRequest) -> Any:
        made.append(1)
        step = sum(m.role == "assistant" for m in request.messages)
        if step == 0:
            return reply(
                *[
                    call("spawn", {"task": f"part {i}", "tools": ["look"], "wait": False})
                    for i in range(4)
                ]
            )
        if step == 1:
            start.set()
            return reply(call("wait_children"))
        return "all done"

    spawner = spawn_tools([look], model=FunctionModel(child))
    agent = Agent(FunctionModel(parent), tools=[spawner], budget=BudgetLimits(model_calls=k))
    events, error = await run_events(agent, "go")
    return len(made) + sum(c.calls for c in children), ends(events), error


@pytest.mark.parametrize("seed", range(5))
async def test_concurrent_background_children_spend_exactly_the_parent_budget(seed: int) -> None:
    k = 12 + seed
    total, finished, error = await race(seed, k)
    assert total == k  # never more, and every call the budget allowed was made
    assert [f.outcome for f in finished] == ["budget"] * 4
    assert isinstance(error, BudgetExceeded)


async def test_without_the_protection_background_children_overshoot_together() -> None:
    with unsafe_switches(tree_budget=False):
        total, finished, error = await race(0, 12)
    assert total > 12  # each child ran to its step share of 20
    assert all("MaxStepsExceeded" in (f.error or "") for f in finished)
    assert error is None


# -- a resumed background child --------------------------------------------------------------------


async def test_a_resumed_child_draws_from_the_resumed_parent_budget() -> None:
    store = MemoryJournalStore()
    opened = asyncio.Event()
    child_calls: list[int] = []

    @tool
    async def fetch(n: int) -> str:
        """Fetch (the first fetch waits until opened).

        Args:
            n: Which thing.
        """
        if n == 1:
            await opened.wait()
        return f"fetched {n}"

    def child(request: ModelRequest) -> Any:
        child_calls.append(1)
        return reply(call("fetch", {"n": sum(m.role == "assistant" for m in request.messages) + 1}))

    async def first_parent(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            return reply(call("spawn", {"task": "fetch all", "tools": ["fetch"], "wait": False}))
        await asyncio.Event().wait()  # the parent stalls; it is interrupted here
        return "never"

    def build(
        parent: Any, budget: BudgetLimits | None, store: MemoryJournalStore = store
    ) -> Agent[str]:
        spawner = spawn_tools([fetch], model=FunctionModel(child), store=store)
        return Agent(parent, tools=[spawner], budget=budget)

    events: list[RunEvent] = []
    stream = build(FunctionModel(first_parent), None).stream("go")
    async for event in stream:
        events.append(event)
        if isinstance(event, ChildEvent) and isinstance(event.event, ToolCallStarted):
            break  # the child is inside its first fetch
    await stream.aclose()
    journal = Journal([e for e in events if is_journal_event(e)])
    opened.set()

    async def resumed_total(k: int) -> tuple[int, Exception | None]:
        child_calls.clear()
        parent = ScriptedModel([reply(call("wait_children")), "collected"])
        copy = await copied(store, journal)  # each resume starts from the interrupted store
        try:
            await resume(build(parent, BudgetLimits(model_calls=k), copy), journal)
        except Exception as exc:
            return len(parent.requests) + len(child_calls), exc
        return len(parent.requests) + len(child_calls), None

    total, error = await resumed_total(4)
    assert total == 4 and isinstance(error, BudgetExceeded)
    with unsafe_switches(tree_budget=False):
        total, error = await resumed_total(4)
    assert total > 4 and error is None


async def copied(store: MemoryJournalStore, parent: Journal) -> MemoryJournalStore:
    """A copy of what `store` holds for the children of the run of `parent`."""
    copy = MemoryJournalStore()
    run_id = next(e.run_id for e in parent if e.kind == "run_started")
    for record in await store.children(run_id):
        await copy.link(record)
        journal = await store.load(record.lineage.run_id)
        copy.append_events(record.lineage.run_id, (journal or Journal()).events, start=0)
    return copy


# -- agent.as_tool ---------------------------------------------------------------------------------


def lead_asking(helper: Agent[str], *, asks: int = 1) -> tuple[Agent[str], ScriptedModel]:
    tool_ = helper.as_tool(name="ask_helper", description="Ask the helper")
    parent = ScriptedModel(
        [reply(*[call("ask_helper", {"task": f"job {i}"}) for i in range(asks)]), "fine"]
    )
    return Agent(parent, tools=[tool_]), parent


async def test_an_agent_as_tool_draws_from_the_caller_budget() -> None:
    child = Endless()
    helper = Agent(FunctionModel(child), tools=[look], max_steps=30, name="helper")
    lead, parent = lead_asking(helper)
    with pytest.raises(BudgetExceeded):
        await lead.run("go", budget=BudgetLimits(model_calls=6))
    assert len(parent.requests) + child.calls == 6
    child.calls = 0
    lead, parent = lead_asking(helper)
    with unsafe_switches(tree_budget=False):
        result = await lead.run("go", budget=BudgetLimits(model_calls=6))
    assert child.calls == 30 and result.output == "fine"  # the helper ran to its own max_steps


@pytest.mark.parametrize("seed", range(3))
async def test_concurrent_agents_as_tools_spend_exactly_the_caller_budget(seed: int) -> None:
    models = [Endless(seed=seed * 10 + i) for i in range(3)]

    async def helper_model(request: ModelRequest) -> Any:
        return await models[task_number(request, "job")](request)

    helper = Agent(FunctionModel(helper_model), tools=[look], max_steps=30, name="helper")
    lead, parent = lead_asking(helper, asks=3)
    budget = Budget(model_calls=11)
    # all three helper calls failed (their budget outcome) in one step: one failing turn,
    # within the tool's retries; the caller's next model call finds the budget spent
    with pytest.raises(BudgetExceeded):
        await lead.run("go", budget=budget)
    assert len(parent.requests) == 1
    assert len(parent.requests) + sum(m.calls for m in models) == 11
    assert budget.used.model_calls == 11 and budget.reserved.model_calls == 0


async def test_a_child_with_a_budget_of_its_own_is_held_to_the_tighter_of_both() -> None:
    # the helper's own limit is the tighter: it stops, the caller goes on and answers
    child = Endless()
    helper = Agent(FunctionModel(child), tools=[look], budget=BudgetLimits(model_calls=2))
    lead, parent = lead_asking(helper)
    caller = Budget(model_calls=10)
    result = await lead.run("go", budget=caller)
    assert child.calls == 2 and result.output == "fine"
    assert caller.used.model_calls == len(parent.requests) + 2 == 4
    (ended,) = [e for e in result.journal if isinstance(e, SpawnFinished)]
    assert ended.outcome == "budget" and "limit 2" in (ended.error or "")
    # the caller's is the tighter: the helper stops when the caller's budget is spent
    child.calls = 0
    helper = Agent(FunctionModel(child), tools=[look], budget=BudgetLimits(model_calls=10))
    lead, parent = lead_asking(helper)
    with pytest.raises(BudgetExceeded):
        await lead.run("go", budget=BudgetLimits(model_calls=3))
    assert child.calls == 2 and len(parent.requests) == 1
    # a budget object the helper shares across runs keeps counting, and the caller's too
    shared = Budget(model_calls=3)
    child.calls = 0
    helper = Agent(FunctionModel(child), tools=[look], budget=shared)
    lead, _ = lead_asking(helper)
    caller = Budget(model_calls=10)
    assert (await lead.run("go", budget=caller)).output == "fine"
    assert shared.used.model_calls == 3 and caller.used.model_calls == 5


# -- what a tool sees --------------------------------------------------------------------------------


async def test_tools_see_the_run_budget_and_children_draw_from_it() -> None:
    seen: list[float] = []

    @tool
    async def check(ctx: RunContext[None]) -> str:
        """Check the budget."""
        assert ctx.budget is not None
        seen.append(ctx.budget.remaining().model_calls)
        return "checked"

    def child(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return "checked twice"
        return reply(call("check"))

    parent = ScriptedModel(
        [reply(call("check")), reply(call("spawn", {"task": "check", "tools": ["check"]})), "ok"]
    )
    agent = Agent(parent, tools=[spawn_tools([check], model=FunctionModel(child))])
    result = await agent.run("go", budget=BudgetLimits(model_calls=10))
    assert result.output == "ok"
    assert seen == [9, 7]  # the child's tool sees the parent's budget, with its own call spent
    bad = RunContext(deps=None, run_id="r", budget=_NotABudget())
    with pytest.raises(ConfigurationError, match="legato.budgets.Budget"):
        child_budget(None, bad)
    own = child_budget(BudgetLimits(model_calls=1), RunContext(deps=None, run_id="r"))
    assert own is not None and own.limits.model_calls == 1


class _NotABudget:
    @property
    def used(self) -> Any:
        return None

    def remaining(self) -> Any:
        return None
