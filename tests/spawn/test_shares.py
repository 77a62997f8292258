"""Budget shares: a child's share is a `Budget` split from its parent's, it holds *before*
the child spends (each call reserved like any model call), and a resumed parent's pool and
a resumed child's share are rebuilt from their journals. Each protection has a twin run
with it switched off (`unsafe_switches`) that shows the failure it prevents."""

from __future__ import annotations

import asyncio
from typing import Any

from legato import Agent, tool
from legato.approvals import ApprovalPolicy, Approve, MemoryApprovalStore, Rule
from legato.budgets import Budget, Spend, estimate_tokens
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
from legato.exceptions import RunParked
from legato.messages import JsonValue, Usage
from legato.models import ModelRequest
from legato.spawn import MemoryJournalStore, SpawnLimits, resume, spawn_tools
from legato.testing import FunctionModel, ScriptedModel, call, reply

# -- a child's share holds before each model call ------------------------------------------------


@tool
def look(n: int) -> str:
    """Look at something.

    Args:
        n: Which thing.
    """
    return "seen " + "x" * 40


class HonestChild:
    """A child model that honours `max_tokens`: each call reports its estimated input and
    min(max_tokens, 300) output tokens; it looks at things five times, then answers."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int | None, Usage]] = []

    def __call__(self, request: ModelRequest) -> Any:
        limit = request.settings.max_tokens
        usage = Usage(input_tokens=estimate_tokens(request), output_tokens=min(limit or 300, 300))
        self.calls.append((estimate_tokens(request), limit, usage))
        turn = sum(m.role == "assistant" for m in request.messages)
        if turn >= 5:
            return reply("looked enough", usage=usage)
        return reply(call("look", {"n": turn}), usage=usage)


async def spawn_one(
    child: Any, *, share: int, pool: Budget, tools: tuple[Any, ...] = (look,)
) -> tuple[SpawnFinished, Journal]:
    parent = ScriptedModel(
        [
            reply(call("spawn", {"task": "look around", "tools": ["look"], "max_tokens": share})),
            "ok",
        ]
    )
    spawner = spawn_tools(list(tools), model=FunctionModel(child), children_budget=lambda _: pool)
    result = await Agent(parent, tools=[spawner]).run("go")
    ended = next(e for e in result.journal if isinstance(e, SpawnFinished))
    journal = await spawner.store.load(ended.lineage.run_id)
    assert journal is not None
    return ended, journal


async def test_a_child_is_stopped_before_a_call_its_share_cannot_pay_for() -> None:
    child = HonestChild()
    pool = Budget(steps=50, tokens=10_000)
    ended, journal = await spawn_one(child, share=1600, pool=pool)
    # the share held: the child spent no more than 1,600 tokens
    spent = sum(u.total_tokens for _, _, u in child.calls)
    assert ended.usage.total_tokens == spent <= 1600
    # each call's output was capped to what the share left after its (estimated) input
    left = 1600
    for estimate, limit, usage in child.calls:
        assert limit is not None and estimate + limit <= left
        left -= usage.total_tokens
    last = child.calls[-1][1]
    assert last is not None and last < 300  # the last call got a shorter leash
    assert all(limit is not None and limit < 4096 for _, limit, _ in child.calls)  # fitted
    # a clear, typed outcome: refused before the fourth call, not after it
    assert len(child.calls) == 3
    assert ended.outcome == "budget"
    assert ended.error is not None and ended.error.startswith("BudgetExceeded: budget for tokens")
    failed = journal.events[-1]
    assert isinstance(failed, RunFailed) and failed.error_type == "BudgetExceeded"
    # the parent's budget got back exactly the unspent part of the share
    assert pool_left(pool) == (50 - len(child.calls), 10_000 - spent)
    assert pool.reserved == Spend()


def pool_left(budget: Budget) -> tuple[float, float]:
    remaining = budget.remaining()
    return remaining.steps, remaining.tokens


async def test_without_reserving_a_child_crosses_its_share_and_is_stopped_one_call_late() -> None:
    """The twin: the naive check (`spent < limit`, then call) lets the call that crosses
    the share happen; only the call after it is refused."""
    child = HonestChild()
    pool = Budget(steps=50, tokens=10_000)
    with unsafe_switches(reserve_worst_case=False):
        ended, _ = await spawn_one(child, share=1600, pool=pool)
    spent = sum(u.total_tokens for _, _, u in child.calls)
    assert ended.outcome == "budget" and ended.usage.total_tokens == spent
    assert spent > 1600  # the share was crossed by the last call made
    assert sum(u.total_tokens for _, _, u in child.calls[:-1]) < 1600  # it was the last call
    # and the parent pays for it: more than the share left its budget
    assert pool_left(pool)[1] == 10_000 - spent < 10_000 - 1600


async def test_a_share_too_small_for_the_first_call_is_refused_before_any_call() -> None:
    child = HonestChild()
    pool = Budget(steps=50, tokens=10_000)
    ended, journal = await spawn_one(child, share=3, pool=pool)
    assert child.calls == []  # nothing was spent
    assert ended.outcome == "budget" and "this call needs" in (ended.error or "")
    assert ended.usage.total_tokens == 0
    assert pool_left(pool) == (50, 10_000)
    assert [e.kind for e in journal][-1] == "run_failed"


async def test_the_floor_leaves_no_call_with_a_useless_output_allowance() -> None:
    child = HonestChild()
    limits = SpawnLimits(min_output_tokens=250)
    parent = ScriptedModel(
        [reply(call("spawn", {"task": "t", "tools": ["look"], "max_tokens": 1500})), "ok"]
    )
    spawner = spawn_tools([look], model=FunctionModel(child), limits=limits)
    await Agent(parent, tools=[spawner]).run("go")
    assert all(limit is not None and limit >= 250 for _, limit, _ in child.calls)


async def test_shares_a_child_hands_on_count_against_its_own_steps() -> None:
    """Steps, too, hold for the subtree: a child that moved steps to a grandchild has
    fewer left for itself, though its own `max_steps` would allow more."""
    release = asyncio.Event()

    @tool
    async def hang() -> str:
        """Wait."""
        await release.wait()
        return "released"

    def turn(request: ModelRequest) -> Any:
        if "depth 2" in (request.instructions or ""):
            return reply(call("hang"))
        if request.messages[-1].role == "tool":
            return "child went on"
        task: dict[str, JsonValue] = {
            "task": "deep",
            "tools": ["hang"],
            "max_steps": 2,
            "wait": False,
        }
        return reply(call("spawn", task))

    async def run() -> SpawnFinished:
        parent = ScriptedModel(
            [reply(call("spawn", {"task": "t", "tools": ["spawn", "hang"], "max_steps": 3})), "ok"]
        )
        spawner = spawn_tools([hang], model=FunctionModel(turn))
        result = await Agent(parent, tools=[spawner]).run("go")
        return next(e for e in result.journal if isinstance(e, SpawnFinished))

    ended = await run()  # 1 step of its own + 2 held by the grandchild: no step left
    assert ended.outcome == "budget" and "budget for steps" in (ended.error or "")
    with unsafe_switches(reserve_worst_case=False):
        unguarded = await run()
    assert unguarded.outcome == "ok"  # it took a second step its share did not have


# -- a resumed parent's account is rebuilt from its journal -------------------------------------


class Parked:
    """A parent that spawns a child (waited) and a background child, then parks on an
    approval while the background child is inside a blocking tool."""

    def __init__(self) -> None:
        self.store = MemoryJournalStore()
        self.approvals = MemoryApprovalStore()
        self.release = asyncio.Event()
        self.seen: dict[str, tuple[float, float]] = {}

    def agent(self, pool: Budget, parent: Any) -> Agent[str]:
        release = self.release

        @tool
        async def block() -> str:
            """Block until released."""
            await release.wait()
            return "released"

        @tool(side_effects="irreversible")
        def send_email(to: str) -> str:
            """Send an email.

            Args:
                to: The recipient.
            """
            return f"sent to {to}"

        def child(request: ModelRequest) -> Any:
            last = request.messages[-1]
            if last.role == "tool":
                return reply("slow done", usage=Usage(input_tokens=50, output_tokens=7))
            if "slow" in last.text:
                return reply(call("block"), usage=Usage(input_tokens=40, output_tokens=5))
            return reply("quick done", usage=Usage(input_tokens=30, output_tokens=3))

        spawner = spawn_tools(
            [block],
            model=FunctionModel(child),
            store=self.store,
            children_budget=lambda _: pool,
            limits=SpawnLimits(max_children=2),
        )
        policy = ApprovalPolicy(rules=[Rule("send_email", "ask")], store=self.approvals)
        return Agent(FunctionModel(parent), tools=[spawner, send_email], approvals=policy)

    async def park(self) -> Journal:
        pool = Budget(steps=50, tokens=5000)

        def parent(request: ModelRequest) -> Any:
            turn = sum(m.role == "assistant" for m in request.messages)
            if turn == 0:
                return reply(call("spawn", {"task": "quick", "max_tokens": 1000, "max_steps": 5}))
            if turn == 1:
                slow: dict[str, JsonValue] = {
                    "task": "slow",
                    "tools": ["block"],
                    "max_tokens": 1200,
                    "max_steps": 5,
                }
                return reply(call("spawn", {**slow, "wait": False}))
            self.seen["before"] = pool_left(pool)  # the slow child is running: it holds its share
            return reply(call("send_email", {"to": "bob"}))

        try:
            await self.agent(pool, parent).run("go")
        except RunParked as parked:
            request = parked.parked.requests[0]
            await self.approvals.decide(request.id, request.token, Approve())
            return Journal.from_jsonl(parked.parked.journal.to_jsonl())  # a new process
        raise AssertionError("the run should have parked")

    async def resume(self, journal: Journal) -> tuple[Budget, Journal]:
        pool = Budget(steps=50, tokens=5000)

        def parent(request: ModelRequest) -> Any:
            turn = sum(m.role == "assistant" for m in request.messages)
            if turn == 3:
                return reply(call("todo", {"add": ["collect"]}))  # the spawn tools wake up
            if turn == 4:
                self.seen["after"] = pool_left(pool)
                # (a test model numbers its calls from 1 again: give this one an id of its own)
                return reply(call("spawn", {"task": "one more", "max_steps": 1}, id="more"))
            if turn == 5:
                self.release.set()
                return reply(call("wait_children"))
            return "all done"

        result = await self.agent(pool, parent).resume(journal)
        return pool, result.journal


def texts(journal: Journal) -> list[str]:
    return [e.result.text for e in journal if isinstance(e, ToolCallFinished)]


async def test_a_resumed_parent_keeps_the_shares_its_children_took_before_it_parked() -> None:
    scenario = Parked()
    journal = await scenario.park()
    ends = [e for e in journal if isinstance(e, SpawnFinished)]
    assert [e.outcome for e in ends] == ["ok", "cancelled"]
    quick = ends[0].usage.total_tokens
    pool, resumed = await scenario.resume(journal)
    # the totals after the resume equal the totals before parking: the quick child's
    # spending is charged, the slow child (resumed) holds its share again
    assert scenario.seen["after"] == scenario.seen["before"]
    assert scenario.seen["before"] == (50 - 1 - 5, 5000 - quick - 1200)
    # the fan-out count too: the slow child was resumed, a third child is refused
    assert "started its limit of 2 children" in texts(resumed)[-2]
    assert texts(resumed)[-1].endswith("slow done")
    # at the end the parent got back exactly what the slow child left unspent; what the
    # slow child spent before the park is counted once
    slow = [e for e in resumed if isinstance(e, SpawnFinished)][-1]
    assert slow.outcome == "ok" and slow.usage.total_tokens == 45 + 57
    assert pool_left(pool) == (50 - 1 - 2, 5000 - quick - slow.usage.total_tokens)
    assert pool.reserved == Spend()


async def test_without_the_rebuild_a_resumed_parent_forgets_what_it_gave_away() -> None:
    scenario = Parked()
    journal = await scenario.park()
    with unsafe_switches(rebuild_shares=False):
        _, resumed = await scenario.resume(journal)
    # the quick child's spending is forgotten: the parent has more to hand out than it had
    after, before = scenario.seen["after"], scenario.seen["before"]
    assert after[1] > before[1]
    # and it starts a third child past its limit of two
    assert not any("started its limit" in t for t in texts(resumed))


# -- a resumed child's own spending before the interruption still counts ----------------------


async def interrupted_child(store: MemoryJournalStore, gate: asyncio.Event) -> Journal:
    """A parent whose child (share 1,000 tokens) spent 900 tokens, then was cut off in a tool."""

    @tool
    async def fetch() -> str:
        """Fetch (waits for the gate)."""
        await gate.wait()
        return "fetched"

    def child(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return reply("child done", usage=Usage(input_tokens=20, output_tokens=2))
        return reply(call("fetch"), usage=Usage(input_tokens=880, output_tokens=20))

    spawn = reply(call("spawn", {"task": "fetch it", "tools": ["fetch"], "max_tokens": 1000}))
    agent = Agent(
        ScriptedModel([spawn]),
        tools=[spawn_tools([fetch], model=FunctionModel(child), store=store)],
    )
    events: list[RunEvent] = []
    stream = agent.stream("go")
    async for event in stream:
        events.append(event)
        if isinstance(event, ChildEvent) and isinstance(event.event, ToolCallStarted):
            break  # the process dies here
    await stream.aclose()
    return Journal([e for e in events if is_journal_event(e)])


def resumed_agent(store: MemoryJournalStore, gate: asyncio.Event) -> Agent[str]:
    @tool
    async def fetch() -> str:
        """Fetch."""
        return "fetched"

    def child(request: ModelRequest) -> Any:
        return reply("child done", usage=Usage(input_tokens=20, output_tokens=2))

    return Agent(
        ScriptedModel(["parent done"]),
        tools=[spawn_tools([fetch], model=FunctionModel(child), store=store)],
    )


async def test_a_resumed_child_counts_what_it_spent_before_the_interruption() -> None:
    store, gate = MemoryJournalStore(), asyncio.Event()
    journal = await interrupted_child(store, gate)
    result = await resume(resumed_agent(store, gate), journal)
    ended = [e for e in result.journal if isinstance(e, SpawnFinished)][-1]
    # 100 tokens left: not enough for the next call's input and output
    assert ended.outcome == "budget"
    assert ended.usage.total_tokens == 900


async def test_without_the_rebuild_a_resumed_child_gets_its_whole_share_again() -> None:
    store, gate = MemoryJournalStore(), asyncio.Event()
    journal = await interrupted_child(store, gate)
    with unsafe_switches(rebuild_shares=False):
        result = await resume(resumed_agent(store, gate), journal)
    ended = [e for e in result.journal if isinstance(e, SpawnFinished)][-1]
    assert ended.outcome == "ok"
    assert ended.usage.total_tokens == 922 > 900  # past what its share had left


# -- one budget tree: what runs inside a child spends from its share, reserved together -------


async def helpers_in_a_child(share: int) -> tuple[int, SpawnFinished]:
    """A spawned child (token share `share`) asks three helpers (`agent.as_tool`) at once;
    each helper loops until its budget stops it. Returns the tokens the child's subtree
    really spent, as its models reported them."""
    from legato.models import ModelSettings

    spent: list[int] = []

    async def helper_model(request: ModelRequest) -> Any:
        await asyncio.sleep(0)  # the three helpers' calls interleave
        usage = Usage(input_tokens=100, output_tokens=request.settings.max_tokens or 100)
        spent.append(usage.total_tokens)
        await asyncio.sleep(0)
        return reply(call("look", {"n": len(spent)}), usage=usage)

    helper = Agent(
        FunctionModel(helper_model),
        tools=[look],
        name="helper",
        max_steps=100,
        model_settings=ModelSettings(max_tokens=100),
    )
    ask = helper.as_tool(name="ask_helper", description="Ask a helper")

    def child(request: ModelRequest) -> Any:
        usage = Usage(input_tokens=50, output_tokens=10)
        spent.append(usage.total_tokens)
        if request.messages[-1].role == "tool":
            return reply("asked", usage=usage)
        return reply(*[call("ask_helper", {"task": f"job {i}"}) for i in range(3)], usage=usage)

    parent = ScriptedModel(
        [reply(call("spawn", {"task": "ask", "tools": ["ask_helper"], "max_tokens": share})), "ok"]
    )
    spawner = spawn_tools([ask], model=FunctionModel(child))
    result = await Agent(parent, tools=[spawner]).run("go")
    ended = next(e for e in result.journal if isinstance(e, SpawnFinished) and e.lineage.depth == 1)
    return sum(spent), ended


async def test_concurrent_helpers_inside_a_child_cannot_cross_its_share_together() -> None:
    """The share is a `Budget`: the helpers a child calls run on it, and their concurrent
    calls reserve in it before they are sent, so the whole subtree stays within it."""
    spent, ended = await helpers_in_a_child(3000)
    assert 2500 < spent <= 3000
    assert ended.usage.total_tokens == spent


async def test_without_reserving_concurrent_helpers_cross_the_share() -> None:
    with unsafe_switches(reserve_worst_case=False):
        spent, _ = await helpers_in_a_child(3000)
    assert spent > 3000
