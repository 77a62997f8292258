"""The recorder feeds the stream: what a caller sees is the stored journal, event for event.

Every event of a run takes one route to its caller (`legato.run._recorder`): recorded
(stored ahead, journaled, put on the run's stream) or, when it is never journaled (a text
delta, a tool's progress), put on the same stream. So the journal events a caller sees are
the journal itself, once each and in its order, each durable one stored before the caller
sees it, and each `ToolProgress` lies between its call's start and finish. Checked under
many seeded interleavings of concurrent tools that report progress (async tools that yield
a seeded number of times, a sync tool in its worker thread, side-effecting tools the gate
admits), and twins show the check catching a second route.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import pytest

from legato import Agent, RunContext, tool
from legato.events import (
    RunEvent,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    is_journal_event,
)
from legato.exceptions import RunCancelled
from legato.run import RunDriver
from legato.run._recorder import DURABLE_KINDS
from legato.run._scope import Scope
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply

SEEDS = range(40)
STEPS = 3


def _agent(seed: int, store: SQLiteStore) -> Agent:
    rng = random.Random(seed)
    pauses: dict[str, list[int]] = {}

    def plan(call_id: str) -> list[int]:
        """How many times the call yields to the loop between its progress reports."""
        return pauses.setdefault(call_id, [rng.randrange(4) for _ in range(rng.randrange(1, 5))])

    @tool
    async def crawl(ctx: RunContext[None], n: int) -> str:
        """Report progress while yielding a seeded number of times.

        Args:
            n: A label.
        """
        for done, spins in enumerate(plan(ctx.tool_call_id or ""), start=1):
            ctx.report_progress(done, message=f"crawl {n}")
            for _ in range(spins):
                await asyncio.sleep(0)
        return f"crawled {n}"

    @tool(side_effects="idempotent")
    async def ship(ctx: RunContext[None], n: int) -> str:
        """An effect the gate admits (its admission is recorded by the gate).

        Args:
            n: A label.
        """
        for spins in plan(ctx.tool_call_id or ""):
            ctx.report_progress(spins)
            await asyncio.sleep(0)
        return f"shipped {n}"

    @tool
    def count(ctx: RunContext[None], n: int) -> int:
        """A sync tool: its progress comes from its worker thread.

        Args:
            n: How far to count.
        """
        for i in range(n):
            ctx.report_progress(i + 1, n)
        return n

    names = ["crawl", "ship", "count"]
    turns: list[Any] = []
    for step in range(STEPS):
        calls = [
            call(rng.choice(names), {"n": rng.randrange(1, 4)}, id=f"s{step}c{i}")
            for i in range(rng.randrange(2, 6))
        ]
        turns.append(reply(f"step {step}: ", *calls))
    turns.append("All done, in several chunks of text.")
    model = ScriptedModel(turns, chunk_size=rng.randrange(3, 9))
    return Agent(model, tools=[crawl, ship, count], store=store)


def check_one_route(seen: list[RunEvent], stored: list[Any], at_sight: list[int]) -> None:
    """The property: the caller's journal events are the stored journal, event for event."""
    journal_seen = [e for e in seen if is_journal_event(e)]
    assert len(journal_seen) == len(stored), "the caller saw more or fewer events than stored"
    for index, (mine, theirs) in enumerate(zip(journal_seen, stored, strict=True)):
        assert mine == theirs, f"event {index}: the caller saw {mine.kind}, stored {theirs.kind}"
    # write-ahead: each durable event was stored when the caller saw it
    durable = [i for i, e in enumerate(journal_seen) if e.kind in DURABLE_KINDS]
    assert all(at_sight[i] > i for i in durable), "a durable event was seen before it was stored"
    # progress lies inside its call's flight
    started: set[str] = set()
    finished: set[str] = set()
    for event in seen:
        if isinstance(event, ToolCallStarted):
            started.add(event.call.id)
        elif isinstance(event, ToolCallFinished):
            finished.add(event.call.id)
        elif isinstance(event, ToolProgress):
            assert event.call_id in started, "progress before its call's start"
            assert event.call_id not in finished, "progress after its call's finish"


async def _run(seed: int, db: Path) -> tuple[list[RunEvent], list[Any], list[int]]:
    store = SQLiteStore(db)
    agent = _agent(seed, store)
    seen: list[RunEvent] = []
    at_sight: list[int] = []  # how many events the store held when each journal event was seen
    handle = agent.start("go")
    async for event in handle.events():
        seen.append(event)
        if is_journal_event(event):
            at_sight.append(len(store.load_run(handle.run_id)))
    await handle.result()
    return seen, list(store.load_run(handle.run_id)), at_sight


@pytest.fixture
def no_coalescing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every progress update becomes an event (more events to interleave)."""
    monkeypatch.setattr(Scope, "PROGRESS_INTERVAL", 0.0)


async def test_the_caller_sees_the_stored_journal_event_for_event(
    tmp_path: Path, no_coalescing: None
) -> None:
    kinds: set[str] = set()
    for seed in SEEDS:
        seen, stored, at_sight = await _run(seed, tmp_path / f"{seed}.db")
        check_one_route(seen, stored, at_sight)
        kinds.update(e.kind for e in seen)
    # the runs did exercise what the property is about
    assert {"tool_progress", "text_delta", "tool_call_admitted", "run_finished"} <= kinds


def _second_route(kind: str) -> Callable[[RunDriver[Any]], AsyncGenerator[RunEvent]]:
    """A driver whose stream has a second route besides the recorder's (the twins)."""
    original = RunDriver.drive  # what a handle iterates

    async def drive(self: RunDriver[Any]) -> AsyncGenerator[RunEvent]:
        side: list[RunEvent] = []
        if kind == "duplicate":  # the driver also yields what it records, as it records it
            self.recorder.observe(
                lambda e: side.append(e) if isinstance(e, ToolCallFinished) else None
            )
        async for event in original(self):
            if kind == "late queue" and isinstance(event, ToolProgress):
                side.append(event)  # progress on a queue of its own, drained at each step's end
                continue
            yield event
            if kind == "late queue" and event.kind != "step_finished":
                continue
            while side:
                yield side.pop(0)

    return drive


@pytest.mark.parametrize("kind", ["duplicate", "late queue"])
async def test_twin_a_second_route_is_caught(
    tmp_path: Path, no_coalescing: None, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setattr(RunDriver, "drive", _second_route(kind))
    caught = 0
    for seed in range(5):
        seen, stored, at_sight = await _run(seed, tmp_path / f"{seed}.db")
        try:
            check_one_route(seen, stored, at_sight)
        except AssertionError:
            caught += 1
    assert caught == 5


async def _cancelled_run(seed: int, db: Path) -> tuple[list[RunEvent], list[Any], list[int]]:
    """A run cancelled by its caller at a seeded moment, while calls report progress."""
    store = SQLiteStore(db)
    agent = _agent(seed, store)
    stop_at = random.Random(-seed).randrange(1, 12)
    seen: list[RunEvent] = []
    at_sight: list[int] = []
    handle = agent.start("go")
    progress = 0
    with pytest.raises(RunCancelled):
        async for event in handle.events():
            seen.append(event)
            if is_journal_event(event):
                at_sight.append(len(store.load_run(handle.run_id)))
            elif isinstance(event, ToolProgress):
                progress += 1
                if progress == stop_at:
                    handle.cancel("the caller stopped it")
    return seen, list(store.load_run(handle.run_id)), at_sight


async def test_a_run_cancelled_mid_flight_streams_its_whole_journal(
    tmp_path: Path, no_coalescing: None
) -> None:
    """The waits the cancel interrupts take nothing off the stream: the end is all there."""
    for seed in range(20):
        seen, stored, at_sight = await _cancelled_run(seed, tmp_path / f"{seed}.db")
        check_one_route(seen, stored, at_sight)
        assert [e.kind for e in seen if is_journal_event(e)][-1] == "run_failed"
        assert any(e.kind == "cancel_requested" for e in seen)


async def test_twin_a_wait_that_drops_what_it_holds_when_cancelled_is_caught(
    tmp_path: Path, no_coalescing: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wait that takes events off the stream and loses them when cancelled."""
    wait = Scope.wait

    async def lossy(self: Scope, tasks: Any) -> AsyncGenerator[None]:
        try:
            async for _ in wait(self, tasks):
                yield
        except asyncio.CancelledError:
            self._stream.take()  # what was on its way to the caller is lost
            raise

    monkeypatch.setattr(Scope, "wait", lossy)
    caught = 0
    for seed in range(5):
        seen, stored, at_sight = await _cancelled_run(seed, tmp_path / f"{seed}.db")
        try:
            check_one_route(seen, stored, at_sight)
        except AssertionError:
            caught += 1
    assert caught == 5
