"""Tools reach the run's stream and own tasks through `RunContext.scope`."""

from __future__ import annotations

import asyncio

from legato import Agent, RunContext, tool
from legato.events import (
    ChildEvent,
    Lineage,
    RunEvent,
    StepFinished,
    ToolCallFinished,
    is_journal_event,
)
from legato.models import TextDelta
from legato.testing import ScriptedModel, call, reply

LINEAGE = Lineage(run_id="child", parent_run_id="p", parent_step=1, parent_call_id="c", agent="kid")


async def test_events_emitted_by_a_running_tool_stream_before_it_finishes() -> None:
    release = asyncio.Event()

    @tool
    async def chatty(ctx: RunContext[None]) -> str:
        """Emit progress, then finish."""
        assert ctx.scope is not None
        ctx.scope.emit(ChildEvent(lineage=LINEAGE, event=TextDelta(text="working")))
        await release.wait()
        return "finished"

    agent = Agent(ScriptedModel([reply(call("chatty")), "ok"]), tools=[chatty])
    kinds: list[str] = []
    async for event in agent.stream("go"):
        kinds.append(event.kind)
        if isinstance(event, ChildEvent):
            # the tool is still blocked: its child event arrived while the parent waited
            assert "tool_call_finished" not in kinds
            release.set()
    assert kinds.index("child_event") < kinds.index("tool_call_finished")


async def test_journal_events_from_the_scope_are_journaled_child_events_are_not() -> None:
    @tool
    async def noisy(ctx: RunContext[None]) -> str:
        """Emit a journal event and a stream event."""
        assert ctx.scope is not None
        ctx.scope.emit(StepFinished(step=99))
        ctx.scope.emit(ChildEvent(lineage=LINEAGE, event=TextDelta(text="x")))
        return "done"

    result = await Agent(ScriptedModel([reply(call("noisy")), "ok"]), tools=[noisy]).run("go")
    steps = [e.step for e in result.journal if isinstance(e, StepFinished)]
    assert 99 in steps
    assert not any(e.kind == "child_event" for e in result.journal)
    assert [e.result.text for e in result.journal if isinstance(e, ToolCallFinished)] == ["done"]


async def test_tasks_owned_by_the_run_are_cancelled_when_it_ends() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def background() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    @tool
    async def launch(ctx: RunContext[None]) -> str:
        """Start background work and return at once."""
        assert ctx.scope is not None
        ctx.scope.start_task(background(), name="bg")
        await started.wait()
        return "launched"

    await Agent(ScriptedModel([reply(call("launch")), "ok"]), tools=[launch]).run("go")
    assert cancelled.is_set()


async def test_the_stream_keeps_journal_order_for_bursts_of_scope_events() -> None:
    release = asyncio.Event()

    @tool
    async def bursty(ctx: RunContext[None]) -> str:
        """Emit several journal events at once, then finish."""
        assert ctx.scope is not None
        for n in range(90, 95):
            ctx.scope.emit(StepFinished(step=n))
        await release.wait()
        return "done"

    @tool
    async def opener() -> str:
        """Let the other call finish a moment later."""
        await asyncio.sleep(0)
        release.set()
        return "opened"

    agent = Agent(
        ScriptedModel([reply(call("bursty"), call("opener")), "ok"]), tools=[bursty, opener]
    )
    streamed: list[RunEvent] = []
    handle = agent.start("go")
    async for event in handle.events():
        streamed.append(event)
    await handle.result()
    assert [e for e in streamed if is_journal_event(e)] == list(handle.journal)
