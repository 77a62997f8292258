"""Every child that starts ends in its parent's journal and stream: one `SpawnFinished` for
each `SpawnStarted`, before the parent's own end, however the parent ends. Spawn events
(with every field) round-trip through JSON lines, replay and `legato trace`."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from io import StringIO
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from legato import Agent, replay, tool
from legato.approvals import ApprovalPolicy, MemoryApprovalStore, Rule
from legato.cli._render import render_journal
from legato.effects import unsafe_switches
from legato.events import (
    ChildEvent,
    Journal,
    Lineage,
    RunEvent,
    RunFinished,
    RunStarted,
    SpawnFinished,
    SpawnStarted,
    UserPrompt,
)
from legato.exceptions import RunCancelled, RunParked
from legato.messages import JsonValue, Message, Usage
from legato.models import ModelRequest
from legato.run import RunHandle
from legato.spawn import MemoryJournalStore, spawn_tools, tree_steps, tree_usage
from legato.testing import FunctionModel, call, reply

ENDS = {"run_finished", "run_failed", "run_parked"}


def assert_every_start_has_one_finish(events: Sequence[RunEvent]) -> list[SpawnFinished]:
    """The invariant, on a journal or a stream: per child, one start then one finish, all
    before the run's own end (the last of its own events)."""
    own = [e for e in events if not isinstance(e, ChildEvent)]
    assert own[-1].kind in ENDS
    assert not any(e.kind in ENDS for e in own[:-1])
    spawn = [e for e in own if isinstance(e, SpawnStarted | SpawnFinished)]
    assert spawn, "the scenario started no child"
    starts = Counter(e.lineage.run_id for e in spawn if isinstance(e, SpawnStarted))
    finishes = Counter(e.lineage.run_id for e in spawn if isinstance(e, SpawnFinished))
    assert starts == finishes and set(starts.values()) == {1}
    for child in starts:
        kinds = [e.kind for e in spawn if e.lineage.run_id == child]
        assert kinds == ["spawn_started", "spawn_finished"]
    return [e for e in spawn if isinstance(e, SpawnFinished)]


class Family:
    """A parent whose children (and grandchildren) block in `hang` until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered: list[str] = []
        self.changed = asyncio.Event()
        self.store = MemoryJournalStore()

    def agent(self, parent: Callable[[ModelRequest], Any], **options: Any) -> Agent[str]:
        family = self

        @tool
        async def hang(name: str) -> str:
            """Wait until released.

            Args:
                name: Who waits.
            """
            family.entered.append(name)
            family.changed.set()
            await family.release.wait()
            return f"{name} released"

        def child(request: ModelRequest) -> Any:
            task = next(m.text for m in request.messages if m.role == "user")
            last = request.messages[-1]
            if last.role == "tool":
                return f"{task}: {last.tool_results[0].text}"
            if task.startswith("nest"):  # start a grandchild in the background, then hang
                grandchild: dict[str, JsonValue] = {
                    "task": "grandchild",
                    "tools": ["hang"],
                    "wait": False,
                }
                return reply(call("spawn", grandchild, id="g"), call("hang", {"name": task}))
            if task.startswith("quick"):
                return f"{task} done"
            return reply(call("hang", {"name": task}))

        spawner = spawn_tools([hang], model=FunctionModel(child), store=self.store)
        return Agent(FunctionModel(parent), tools=[spawner], **options)

    async def entered_all(self, *names: str) -> None:
        while not set(names) <= set(self.entered):
            self.changed.clear()
            await self.changed.wait()


def turns(*script: Any) -> Callable[[ModelRequest], Awaitable[Any]]:
    """A parent model: the nth answer is script[n] (a callable is awaited first)."""

    async def parent(request: ModelRequest) -> Any:
        step = sum(m.role == "assistant" for m in request.messages)
        answer = script[step]
        while callable(answer):
            answer = answer()
            if asyncio.iscoroutine(answer):
                answer = await answer
        return answer

    return parent


def spawn(task: str, *, wait: bool = True, tools: Sequence[str] = ("hang",)) -> Any:
    arguments: dict[str, JsonValue] = {"task": task, "tools": list(tools), "wait": wait}
    return call("spawn", arguments, id=f"s-{task}")


async def both(handle: RunHandle[Any]) -> tuple[list[RunEvent], Journal]:
    """The run's whole stream, and its journal (a failed, cancelled or parked run's stream
    raises at its end)."""
    events: list[RunEvent] = []
    try:
        async for event in handle.events():
            events.append(event)
    except (RunCancelled, RunParked, RuntimeError):
        pass
    await handle.wait()
    return events, handle.journal


async def test_normal_end() -> None:
    family = Family()
    family.release.set()
    agent = family.agent(turns(reply(spawn("quick")), "done"))
    stream, journal = await both(agent.start("go"))
    for events in (stream, journal.events):
        [ended] = assert_every_start_has_one_finish(events)
        assert ended.outcome == "ok"


async def test_wait_children() -> None:
    family = Family()

    async def open_gate() -> Any:
        family.release.set()
        return reply(call("wait_children"))

    agent = family.agent(
        turns(reply(spawn("a", wait=False), spawn("b", wait=False)), open_gate, "done")
    )
    stream, journal = await both(agent.start("go"))
    for events in (stream, journal.events):
        ends = assert_every_start_has_one_finish(events)
        assert [e.outcome for e in ends] == ["ok", "ok"]


async def test_a_background_child_cancelled_at_the_end_is_recorded_ending() -> None:
    family = Family()

    async def leave() -> str:
        await family.entered_all("nest", "grandchild")
        return "leaving without it"

    agent = family.agent(turns(reply(spawn("nest", wait=False, tools=["hang", "spawn"])), leave))
    stream, journal = await both(agent.start("go"))
    assert journal.events[-1].kind == "run_finished"
    for events in (stream, journal.events):
        [ended] = assert_every_start_has_one_finish(events)
        assert ended.outcome == "cancelled"
        assert ended.error == (
            "RunCancelled: the parent run finished while the child was still running"
        )
    # the grandchild ended in the child's journal, and in the stream before the child did
    child = await family.store.load(ended.lineage.run_id)
    assert child is not None
    inner = [e for e in child if isinstance(e, SpawnFinished)]
    assert [e.outcome for e in inner] == ["cancelled"]
    deep = next(
        i
        for i, e in enumerate(stream)
        if isinstance(e, ChildEvent) and isinstance(e.event, SpawnFinished)
    )
    assert deep < stream.index(ended)
    # the child's journal was left open (a cancelled child can be resumed), not failed
    assert child.events[-1].kind not in ENDS


async def test_without_the_fix_a_cancelled_child_never_ends_in_the_journal() -> None:
    family = Family()

    async def leave() -> str:
        await family.entered_all("slow")
        return "leaving without it"

    agent = family.agent(turns(reply(spawn("slow", wait=False)), leave))
    with unsafe_switches(finish_children=False):
        _, journal = await both(agent.start("go"))
    kinds = [e.kind for e in journal]
    assert kinds.count("spawn_started") == 1 and kinds.count("spawn_finished") == 0


async def test_parent_cancelled() -> None:
    family = Family()
    agent = family.agent(turns(reply(spawn("waited"), spawn("background", wait=False))))
    handle = agent.start("go")
    await family.entered_all("waited", "background")
    handle.cancel("stop now")
    stream, journal = await both(handle)
    assert journal.events[-1].kind == "run_failed"
    for events in (stream, journal.events):
        ends = assert_every_start_has_one_finish(events)
        assert {e.outcome for e in ends} == {"cancelled"}
        assert all("the parent run was cancelled" in (e.error or "") for e in ends)


async def test_parent_failing() -> None:
    family = Family()

    async def crash() -> Any:
        await family.entered_all("background")
        raise RuntimeError("the parent's model broke")

    agent = family.agent(turns(reply(spawn("background", wait=False)), crash))
    stream, journal = await both(agent.start("go"))
    assert journal.events[-1].kind == "run_failed"
    for events in (stream, journal.events):
        [ended] = assert_every_start_has_one_finish(events)
        assert ended.outcome == "cancelled" and "the parent run failed" in (ended.error or "")


async def test_parent_parked() -> None:
    family = Family()

    @tool(side_effects="irreversible")
    def pay() -> str:
        """Pay."""
        return "paid"

    async def ask() -> Any:
        await family.entered_all("background")
        return reply(call("pay"))

    policy = ApprovalPolicy(rules=[Rule("pay", "ask")], store=MemoryApprovalStore())
    agent = family.agent(turns(reply(spawn("background", wait=False)), ask), approvals=policy)
    agent.tool_sources.append(_extra(pay))
    stream, journal = await both(agent.start("go"))
    assert journal.events[-1].kind == "run_parked"
    for events in (stream, journal.events):
        [ended] = assert_every_start_has_one_finish(events)
        assert ended.outcome == "cancelled" and "parked" in (ended.error or "")


def _extra(t: Any) -> Any:
    from legato import Toolset

    return Toolset([t], name="extra")


# -- spawn events through JSON, replay and trace ------------------------------------------------

names = st.text(alphabet="abcdefghij-_0123456789", min_size=1, max_size=12)
counts = st.integers(min_value=0, max_value=10**6)
lineages = st.builds(
    Lineage,
    run_id=names,
    parent_run_id=st.just("root"),
    parent_step=st.integers(0, 50),
    parent_call_id=st.none() | names,
    agent=names,
    depth=st.integers(1, 5),
)
usages = st.builds(Usage, input_tokens=counts, output_tokens=counts, requests=st.integers(0, 9))
started = st.builds(
    SpawnStarted,
    lineage=lineages,
    task=st.text(max_size=40),
    tools=st.lists(names, max_size=3).map(tuple),
    skills=st.lists(names, max_size=2).map(tuple),
    max_steps=st.none() | st.integers(1, 100),
    max_tokens=st.none() | counts,
    background=st.booleans(),
    resumed=st.booleans(),
)
finished = st.builds(
    SpawnFinished,
    lineage=lineages,
    outcome=st.sampled_from(["ok", "error", "timeout", "budget", "cancelled"]),
    output=st.none() | st.text(max_size=30) | st.integers(),
    error=st.none() | st.text(max_size=40),
    usage=usages,
    steps=st.integers(0, 100),
    tree_steps=st.none() | st.integers(0, 1000),
    from_journal=st.booleans(),
)


@given(st.lists(started | finished, max_size=8))
def test_spawn_events_round_trip_replay_and_render(spawned: list[Any]) -> None:
    journal = Journal(
        [
            RunStarted(run_id="root", agent="a", model="m"),
            UserPrompt(message=Message.user("go")),
            *spawned,
            RunFinished(output="done", usage=Usage()),
        ]
    )
    text = journal.to_jsonl()
    again = Journal.from_jsonl(text)
    assert again == journal and again.to_jsonl() == text
    assert replay(text).output == "done"
    # each child counts once, with its last record
    last = {e.lineage.run_id: e for e in spawned if isinstance(e, SpawnFinished)}
    assert tree_usage(again).total_tokens == sum(e.usage.total_tokens for e in last.values())
    assert tree_steps(again) == sum(
        e.tree_steps if e.tree_steps is not None else e.steps for e in last.values()
    )
    out = StringIO()
    render_journal(Console(file=out, width=200), again)
    assert out.getvalue().count("⑂ child") == len(spawned)


def test_a_journal_written_before_tree_steps_still_reads() -> None:
    line = (
        '{"kind": "spawn_finished", "lineage": {"run_id": "c", "parent_run_id": "r", '
        '"parent_step": 1, "parent_call_id": null, "agent": "spawn-child", "depth": 1}, '
        '"outcome": "ok", "steps": 3}'
    )
    [event] = Journal.from_jsonl(line).events
    assert isinstance(event, SpawnFinished) and event.tree_steps is None and event.steps == 3


def test_trace_prints_a_cancelled_child(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from legato.cli._app import app

    family = Family()

    async def run() -> Journal:
        async def leave() -> str:
            await family.entered_all("slow")
            return "bye"

        agent = family.agent(turns(reply(spawn("slow", wait=False)), leave))
        return (await agent.run("go")).journal

    journal = asyncio.run(run())
    path = tmp_path / "run.jsonl"
    path.write_text(journal.to_jsonl(), encoding="utf-8")
    traced = CliRunner().invoke(app, ["trace", str(path)])
    assert traced.exit_code == 0, traced.output
    assert "[cancelled]" in traced.output and "the parent run finished" in traced.output
    assert replay(journal).output == "bye"
