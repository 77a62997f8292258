"""Tools report progress with `RunContext.report_progress`; it streams as `ToolProgress`.

Progress is stream-only: it sits between the call's start and finish in the stream, never
in the journal, and a run's result, journal and replay are the same with or without it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from legato import Agent, Journal, RunContext, replay, tool
from legato.events import (
    ChildEvent,
    RunEvent,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    is_journal_event,
)
from legato.exceptions import RunCancelled
from legato.run._scope import Scope
from legato.testing import ScriptedModel, call, reply


def progress_of(events: Sequence[RunEvent], call_id: str) -> list[ToolProgress]:
    return [e for e in events if isinstance(e, ToolProgress) and e.call_id == call_id]


def assert_in_flight(events: Sequence[RunEvent]) -> None:
    """Every progress event lies between its call's start and finish."""
    for index, event in enumerate(events):
        if not isinstance(event, ToolProgress):
            continue
        started = [
            i
            for i, e in enumerate(events)
            if isinstance(e, ToolCallStarted) and e.call.id == event.call_id
        ]
        finished = [
            i
            for i, e in enumerate(events)
            if isinstance(e, ToolCallFinished) and e.call.id == event.call_id
        ]
        assert started and finished, event
        assert started[0] < index < finished[0], event


@pytest.fixture
def no_coalescing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every update becomes an event (for tests of exact interleaving)."""
    monkeypatch.setattr(Scope, "PROGRESS_INTERVAL", 0.0)


async def test_progress_streams_while_the_call_runs_and_is_never_journaled() -> None:
    release = asyncio.Event()

    @tool
    async def crawl(ctx: RunContext[None], pages: int) -> str:
        """Crawl some pages."""
        ctx.report_progress(2, pages, "fetched b")
        await release.wait()  # held until the stream has shown the progress
        return f"crawled {pages}"

    agent = Agent(ScriptedModel([reply(call("crawl", {"pages": 5})), "done"]), tools=[crawl])
    handle = agent.start("go")
    streamed: list[RunEvent] = []
    async for event in handle.events():
        streamed.append(event)
        if isinstance(event, ToolProgress):
            assert not any(isinstance(e, ToolCallFinished) for e in streamed)
            release.set()
    result = await handle.result()

    [progress] = [e for e in streamed if isinstance(e, ToolProgress)]
    started = next(e for e in streamed if isinstance(e, ToolCallStarted))
    assert progress == ToolProgress(
        run_id=result.run_id,
        step=1,
        call_id=started.call.id,
        tool="crawl",
        progress=2.0,
        total=5.0,
        message="fetched b",
    )
    assert progress.fraction == pytest.approx(0.4)
    assert_in_flight(streamed)
    # the journal is the stream without its stream-only events, and has no progress
    assert [e for e in streamed if is_journal_event(e)] == list(result.journal)
    assert "tool_progress" not in result.journal.to_jsonl()
    again = replay(Journal.from_jsonl(result.journal.to_jsonl()))
    assert again.output == result.output == "done"
    assert again.messages == result.messages


async def test_parallel_calls_interleave_each_inside_its_own_window(no_coalescing: None) -> None:
    turns = {name: asyncio.Event() for name in ("a1", "b1", "a2", "b2")}

    @tool
    async def alpha(ctx: RunContext[None]) -> str:
        """First worker."""
        ctx.report_progress(1, 2)
        turns["a1"].set()
        await turns["b1"].wait()
        ctx.report_progress(2, 2)
        turns["a2"].set()
        await turns["b2"].wait()
        return "alpha"

    @tool
    async def beta(ctx: RunContext[None]) -> str:
        """Second worker."""
        await turns["a1"].wait()
        ctx.report_progress(1, 2)
        turns["b1"].set()
        await turns["a2"].wait()
        ctx.report_progress(2, 2)
        turns["b2"].set()
        return "beta"

    model = ScriptedModel([reply(call("alpha", id="a"), call("beta", id="b")), "ok"])
    events = [e async for e in Agent(model, tools=[alpha, beta]).stream("go")]
    assert_in_flight(events)
    trace = [
        f"{e.call_id}{e.progress:g}" if isinstance(e, ToolProgress) else f"{e.kind}:{e.call.id}"
        for e in events
        if isinstance(e, ToolProgress | ToolCallStarted | ToolCallFinished)
    ]
    assert trace == [
        "tool_call_started:a",
        "tool_call_started:b",
        "a1",
        "b1",
        "a2",
        "b2",
        "tool_call_finished:a",
        "tool_call_finished:b",
    ]


@pytest.mark.parametrize("coalesced", [True, False], ids=["coalesced", "every-update"])
async def test_a_flood_of_updates_is_coalesced_and_the_last_one_kept(
    coalesced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An interval far longer than the flood can take, however loaded the machine: the
    # outcome cannot depend on how fast the loop runs. The twin turns the rule off.
    monkeypatch.setattr(Scope, "PROGRESS_INTERVAL", 60.0 if coalesced else 0.0)

    @tool
    async def flood(ctx: RunContext[None]) -> str:
        """Report a thousand times without pausing."""
        for i in range(1, 1001):
            ctx.report_progress(i, 1000)
        return "flooded"

    model = ScriptedModel([reply(call("flood", id="f")), "ok"])
    events = [e async for e in Agent(model, tools=[flood]).stream("go")]
    values = [p.progress for p in progress_of(events, "f")]
    assert_in_flight(events)
    if coalesced:
        # the first at once; the rest came within the interval: the newest is held and
        # streamed when the call returns
        assert values == [1.0, 1000.0]
    else:
        assert values == [float(i) for i in range(1, 1001)]


async def test_updates_spaced_out_are_all_streamed() -> None:
    @tool
    async def paced(ctx: RunContext[None]) -> str:
        """Report three times, waiting longer than the interval between reports."""
        for i in range(1, 4):
            ctx.report_progress(i, 3)
            # on the loop's clock, as the rule is: the next report is past the interval
            await asyncio.sleep(Scope.PROGRESS_INTERVAL * 1.5)
        return "paced"

    model = ScriptedModel([reply(call("paced", id="p")), "ok"])
    events = [e async for e in Agent(model, tools=[paced]).stream("go")]
    assert [p.progress for p in progress_of(events, "p")] == [1.0, 2.0, 3.0]


async def test_a_sync_tool_reports_from_its_worker_thread(no_coalescing: None) -> None:
    threads: set[int] = set()

    @tool
    def grind(ctx: RunContext[None], steps: int) -> str:
        """A blocking tool (runs in a worker thread)."""
        threads.add(threading.get_ident())
        for i in range(1, steps + 1):
            ctx.report_progress(i, steps, f"step {i}")
        return "ground"

    model = ScriptedModel([reply(call("grind", {"steps": 4}, id="g")), "ok"])
    events = [e async for e in Agent(model, tools=[grind]).stream("go")]
    assert threading.get_ident() not in threads
    assert [(p.progress, p.message) for p in progress_of(events, "g")] == [
        (1.0, "step 1"),
        (2.0, "step 2"),
        (3.0, "step 3"),
        (4.0, "step 4"),
    ]
    assert_in_flight(events)


@pytest.mark.parametrize("when", ["after", "during"])
async def test_progress_reported_after_the_call_finished_is_dropped(when: str) -> None:
    leaked: list[RunContext[Any]] = []

    @tool
    async def quick(ctx: RunContext[None]) -> str:
        """Return at once, leaking its context."""
        leaked.append(ctx)
        if when == "during":  # the twin: the same report inside the call is streamed
            ctx.report_progress(1, 1, "late?")
        return "quick"

    @tool
    async def later() -> str:
        """Runs in the next step, after `quick` finished."""
        leaked[0].report_progress(1, 1, "late?")
        return "later"

    model = ScriptedModel([reply(call("quick", id="q")), reply(call("later", id="l")), "ok"])
    events = [e async for e in Agent(model, tools=[quick, later]).stream("go")]
    assert len(progress_of(events, "q")) == (1 if when == "during" else 0)
    assert_in_flight(events)


async def test_a_cancelled_call_streams_nothing_after_its_finish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Scope, "PROGRESS_INTERVAL", 60.0)  # the second report is surely held
    hold = asyncio.Event()

    @tool
    async def stuck(ctx: RunContext[None]) -> str:
        """Report, report again at once (held), then hang."""
        ctx.report_progress(1, 10)
        ctx.report_progress(2, 10)  # within the interval: held, dropped on cancel
        await hold.wait()
        return "never"

    agent = Agent(ScriptedModel([reply(call("stuck", id="s")), "ok"]), tools=[stuck])
    handle = agent.start("go")
    streamed: list[RunEvent] = []
    with pytest.raises(RunCancelled):
        async for event in handle.events():
            streamed.append(event)
            if isinstance(event, ToolProgress):
                handle.cancel("stop")
    assert [p.progress for p in progress_of(streamed, "s")] == [1.0]
    finished = next(e for e in streamed if isinstance(e, ToolCallFinished))
    assert finished.outcome == "cancelled"
    assert_in_flight(streamed)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ((float("nan"), None, None), "progress must be a finite number"),
        ((1, float("inf"), None), "total must be a finite number"),
        (("half", None, None), "progress must be a number"),
        ((True, None, None), "progress must be a number"),
        ((1, 2, 3), "message must be a string"),
    ],
)
async def test_unusable_progress_fails_the_call_with_a_clear_error(
    arguments: tuple[Any, Any, Any], problem: str
) -> None:
    @tool
    async def broken(ctx: RunContext[None]) -> str:
        """Report something that is not progress."""
        ctx.report_progress(*arguments)
        return "unreachable"

    model = ScriptedModel([reply(call("broken", id="x")), "ok"])
    events = [e async for e in Agent(model, tools=[broken]).stream("go")]
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert finished.outcome == "error"
    assert problem in finished.result.text
    assert not progress_of(events, "x")


def test_outside_a_run_reporting_progress_does_nothing() -> None:
    ctx: RunContext[None] = RunContext(deps=None, run_id="direct", tool_call_id="c")
    ctx.report_progress(1, 2, "no scope, no stream")  # no error, no event anywhere


def test_stream_sync_yields_progress(no_coalescing: None) -> None:
    @tool
    async def steps(ctx: RunContext[None]) -> str:
        """Two steps."""
        ctx.report_progress(1, 2)
        await asyncio.sleep(0)
        ctx.report_progress(2, 2)
        return "stepped"

    model = ScriptedModel([reply(call("steps", id="s")), "ok"])
    events = list(Agent(model, tools=[steps]).stream_sync("go"))
    assert [p.progress for p in progress_of(events, "s")] == [1.0, 2.0]
    assert_in_flight(events)


async def test_a_childs_progress_reaches_the_parent_wrapped_like_its_other_events(
    no_coalescing: None,
) -> None:
    @tool
    async def index(ctx: RunContext[None]) -> str:
        """The child's slow tool."""
        for i in (1, 2, 3):
            ctx.report_progress(i, 3, f"chunk {i}")
            await asyncio.sleep(0)
        return "indexed"

    helper = Agent(
        ScriptedModel([reply(call("index", id="ci")), "index built"]), tools=[index], name="helper"
    )
    parent = ScriptedModel([reply(call("ask_helper", {"task": "index it"}, id="pa")), "ok"])
    agent = Agent(parent, tools=[helper.as_tool(name="ask_helper", description="Ask the helper")])
    handle = agent.start("go")
    events = [e async for e in handle.events()]
    result = await handle.result()

    child_progress = [
        (e.lineage, e.event)
        for e in events
        if isinstance(e, ChildEvent) and isinstance(e.event, ToolProgress)
    ]
    assert [(p.progress, p.message) for _, p in child_progress] == [
        (1.0, "chunk 1"),
        (2.0, "chunk 2"),
        (3.0, "chunk 3"),
    ]
    lineage = child_progress[0][0]
    assert lineage.agent == "helper" and lineage.parent_call_id == "pa"
    assert {p.run_id for _, p in child_progress} == {lineage.run_id}
    # inside the child's own call window, and inside the parent's call that runs the child
    inner = [e.event for e in events if isinstance(e, ChildEvent)]
    assert_in_flight(inner)
    positions = [
        i
        for i, e in enumerate(events)
        if isinstance(e, ChildEvent) and isinstance(e.event, ToolProgress)
    ]
    start = next(
        i for i, e in enumerate(events) if isinstance(e, ToolCallStarted) and e.call.id == "pa"
    )
    finish = next(
        i for i, e in enumerate(events) if isinstance(e, ToolCallFinished) and e.call.id == "pa"
    )
    assert start < min(positions) and max(positions) < finish
    assert "tool_progress" not in result.journal.to_jsonl()


async def test_the_journal_is_the_same_with_or_without_progress() -> None:
    def make(report: bool) -> Agent[str]:
        @tool
        async def work(ctx: RunContext[None], size: int) -> str:
            """Work in chunks."""
            for i in range(size):
                if report:
                    ctx.report_progress(i + 1, size)
                await asyncio.sleep(0)
            return f"worked {size}"

        return Agent(ScriptedModel([reply(call("work", {"size": 3}, id="w")), "ok"]), tools=[work])

    def shape(journal: Journal) -> list[Any]:
        """The journal without what differs between any two runs (ids, durations)."""
        return [
            (e.kind, e.result.text if isinstance(e, ToolCallFinished) else None) for e in journal
        ]

    quiet = await make(report=False).run("go")
    loud = make(report=True).start("go")
    streamed = [e async for e in loud.events()]
    noisy = await loud.result()
    assert progress_of(streamed, "w")  # the stream had progress ...
    assert shape(noisy.journal) == shape(quiet.journal)  # ... the journal did not change
    assert noisy.output == quiet.output and noisy.messages == quiet.messages
