"""Interrupt a parent while its children run, resume it: unfinished children resume from
their journals, finished ones are not re-run."""

from __future__ import annotations

import asyncio
from typing import Any

from legato import Agent, tool
from legato.events import (
    ChildEvent,
    Journal,
    ModelResponded,
    RunEvent,
    SpawnFinished,
    SpawnStarted,
    ToolCallFinished,
    ToolCallStarted,
    is_journal_event,
)
from legato.models import ModelRequest
from legato.spawn import MemoryJournalStore, resume, spawn_tools
from legato.testing import FunctionModel, ScriptedModel, call, reply


class Gate:
    """A tool that blocks until opened; counts how often it really ran to completion."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.entered = asyncio.Event()
        self.completed = 0


def build(gate: Gate, store: MemoryJournalStore, child_model: Any, parent_model: Any) -> Agent[str]:
    @tool
    async def fetch(name: str) -> str:
        """Fetch a thing (blocks for name 'slow' until the gate opens).

        Args:
            name: What to fetch.
        """
        if name == "slow":
            gate.entered.set()
            await gate.open.wait()
        gate.completed += 1
        return f"{name}-data"

    return Agent(parent_model, tools=[spawn_tools([fetch], model=child_model, store=store)])


def child_turns(calls: list[str]) -> FunctionModel:
    def turn(request: ModelRequest) -> Any:
        task = next(
            m.text for m in request.messages if m.role == "user" and "Context" not in m.text
        )
        calls.append(task)
        last = request.messages[-1]
        if last.role == "tool":
            return f"{task}: {last.tool_results[0].text}"
        return reply(call("fetch", {"name": task}))

    return FunctionModel(turn)


async def interrupt(agent: Agent[str], gate: Gate) -> list[RunEvent]:
    """Run until the slow child is inside its tool, then stop the parent."""
    events: list[RunEvent] = []
    stream = agent.stream("fetch both")
    fast_done = slow_in = False
    async for event in stream:
        events.append(event)
        if isinstance(event, ChildEvent):
            inner = event.event
            fast_done = fast_done or inner.kind == "run_finished"
            slow_in = slow_in or (
                isinstance(inner, ToolCallStarted) and inner.call.arguments == {"name": "slow"}
            )
        if fast_done and slow_in:
            break
    await stream.aclose()
    return events


SPAWN_BOTH = reply(
    call("spawn", {"task": "fast", "tools": ["fetch"]}),
    call("spawn", {"task": "slow", "tools": ["fetch"]}),
)


async def test_resuming_the_parent_resumes_unfinished_children_and_reads_finished_ones() -> None:
    store = MemoryJournalStore()
    gate = Gate()
    child_calls: list[str] = []
    agent = build(gate, store, child_turns(child_calls), ScriptedModel([SPAWN_BOTH]))
    events = await interrupt(agent, gate)
    # the journal survives a process restart as JSON lines
    journal = Journal.from_jsonl(Journal([e for e in events if is_journal_event(e)]).to_jsonl())
    # interrupted: both spawn calls started, neither finished in the parent's journal
    assert not any(isinstance(e, ToolCallFinished) for e in journal)
    children = [e.lineage.run_id for e in journal if isinstance(e, SpawnStarted)]
    assert len(children) == 2
    fast_id = next(
        e.lineage.run_id for e in journal if isinstance(e, SpawnStarted) and e.task == "fast"
    )
    slow_id = next(
        e.lineage.run_id for e in journal if isinstance(e, SpawnStarted) and e.task == "slow"
    )
    fast_journal = await store.load(fast_id)
    assert fast_journal is not None and fast_journal.events[-1].kind == "run_finished"
    slow_before = await store.load(slow_id)
    assert slow_before is not None and slow_before.events[-1].kind == "tool_call_started"
    calls_before = list(child_calls)
    assert calls_before.count("fast") == 2 and calls_before.count("slow") == 1

    # resume with a fresh agent (a new process would build it the same way) on the same store
    gate.open.set()
    completed_before = gate.completed
    resumed_parent = ScriptedModel(["fast and slow fetched"])
    child_calls.clear()
    agent2 = build(gate, store, child_turns(child_calls), resumed_parent)
    result = await resume(agent2, journal)
    assert result.output == "fast and slow fetched"
    texts = [e.result.text for e in result.journal if isinstance(e, ToolCallFinished)]
    assert texts == ["fast: fast-data", "slow: slow-data"]
    # the finished child was read from its journal; only the slow child's model ran again
    assert child_calls == ["slow"]
    assert gate.completed == completed_before + 1  # the slow fetch ran once more; fast not at all
    ends = {e.lineage.run_id: e for e in result.journal if isinstance(e, SpawnFinished)}
    assert ends[fast_id].from_journal
    assert not ends[slow_id].from_journal
    restarts = [e for e in result.journal if isinstance(e, SpawnStarted) and e.resumed]
    assert {e.lineage.run_id for e in restarts} == {fast_id, slow_id}
    slow_after = await store.load(slow_id)
    assert slow_after is not None
    # the slow child's first model call is not repeated: one response before, one after
    assert sum(isinstance(e, ModelResponded) for e in slow_after) == 2
    assert slow_after.events[: len(slow_before)] == slow_before.events


async def test_without_the_store_a_resumed_parent_would_run_its_children_again() -> None:
    """The protection switched off: a fresh store means both children start over."""
    store = MemoryJournalStore()
    gate = Gate()
    child_calls: list[str] = []
    agent = build(gate, store, child_turns(child_calls), ScriptedModel([SPAWN_BOTH]))
    events = await interrupt(agent, gate)
    journal = Journal([e for e in events if is_journal_event(e)])
    gate.open.set()
    child_calls.clear()
    agent2 = build(gate, MemoryJournalStore(), child_turns(child_calls), ScriptedModel(["done"]))
    await resume(agent2, journal)
    assert sorted(child_calls) == ["fast", "fast", "slow", "slow"]


async def test_a_background_child_is_resumed_when_the_parent_resumes() -> None:
    store = MemoryJournalStore()
    gate = Gate()
    child_calls: list[str] = []

    async def first_parent(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            return reply(call("spawn", {"task": "slow", "tools": ["fetch"], "wait": False}))
        await asyncio.Event().wait()  # the parent stalls; it is interrupted here
        return "never"

    events: list[RunEvent] = []
    agent = build(gate, store, child_turns(child_calls), FunctionModel(first_parent))
    stream = agent.stream("go")
    child_in = spawned = False
    async for event in stream:
        events.append(event)
        spawned = spawned or isinstance(event, ToolCallFinished)
        child_in = child_in or (
            isinstance(event, ChildEvent) and isinstance(event.event, ToolCallStarted)
        )
        if spawned and child_in:
            break
    await stream.aclose()
    journal = Journal([e for e in events if is_journal_event(e)])
    spawn_text = next(e.result.text for e in journal if isinstance(e, ToolCallFinished))
    assert spawn_text.startswith("Started child")
    gate.open.set()
    child_calls.clear()
    resumed = ScriptedModel([reply(call("wait_children")), "collected"])
    result = await resume(build(gate, store, child_turns(child_calls), resumed), journal)
    texts = [e.result.text for e in result.journal if isinstance(e, ToolCallFinished)]
    assert texts[-1].endswith("slow: slow-data")
    assert child_calls == ["slow"]  # resumed after its first model call, not started over
    assert result.output == "collected"


async def test_the_loop_resumes_an_interrupted_response_without_rerunning_finished_calls() -> None:
    runs: list[str] = []
    gate = asyncio.Event()

    @tool
    async def work(name: str) -> str:
        """Do some work (name 'slow' waits for the gate).

        Args:
            name: Which work.
        """
        runs.append(name)
        if name == "slow":
            await gate.wait()
        return f"{name} done"

    turns = [reply(call("work", {"name": "fast"}), call("work", {"name": "slow"})), "both done"]
    agent = Agent(ScriptedModel(turns), tools=[work])
    events: list[RunEvent] = []
    stream = agent.stream("go")
    async for event in stream:
        events.append(event)
        if isinstance(event, ToolCallFinished):  # fast finished; slow is still running
            break
    await stream.aclose()
    assert runs == ["fast", "slow"]
    gate.set()
    journal = Journal([e for e in events if is_journal_event(e)])
    result = await resume(Agent(ScriptedModel(turns[1:]), tools=[work]), journal)
    assert runs == ["fast", "slow", "slow"]  # fast was not run again
    assert result.output == "both done"
    tool_message = next(m for m in result.messages if m.role == "tool")
    assert [r.text for r in tool_message.tool_results] == ["fast done", "slow done"]
