"""Cancellation, run timeouts and the fence, through real runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legato import Agent, RunHandle, Tool, tool
from legato.effects import unsafe_switches
from legato.events import (
    CancelRequested,
    RunEvent,
    RunFailed,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallStarted,
    is_journal_event,
)
from legato.exceptions import ConfigurationError, RunCancelled, RunTimedOut
from legato.testing import ScriptedModel, call, reply


async def test_cancel_mid_tool_fences_cancels_and_journals() -> None:
    started = asyncio.Event()
    landed: list[str] = []

    @tool(side_effects="irreversible")
    async def transfer(amount: int) -> str:
        """Move money."""
        started.set()
        await asyncio.sleep(30)
        landed.append("transfer")
        return "done"

    model = ScriptedModel([reply(call("transfer", {"amount": 5})), "never"])
    handle = Agent(model, tools=[transfer]).start("go")
    await started.wait()
    assert handle.cancel("user pressed stop")
    assert not handle.cancel()  # only once
    with pytest.raises(RunCancelled, match="user pressed stop"):
        await handle.result()
    assert landed == []
    events = list(handle.journal)
    kinds = [type(e) for e in events]
    fence = kinds.index(CancelRequested)
    assert ToolCallAdmitted not in kinds[fence:]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [f.outcome for f in finished] == ["cancelled"]
    assert isinstance(events[-1], RunFailed) and events[-1].error_type == "RunCancelled"
    assert len(model.requests) == 1


async def test_run_timeout_is_the_same_fence() -> None:
    @tool(side_effects="idempotent")
    async def slow() -> str:
        """Take long."""
        await asyncio.sleep(30)
        return "x"

    model = ScriptedModel([reply(call("slow")), "never"])
    with pytest.raises(RunTimedOut, match="timeout of 0.05"):
        await Agent(model, tools=[slow]).run("go", timeout=0.05)


async def test_late_result_is_recorded_cancelled_and_never_applied() -> None:
    release = asyncio.Event()
    admitted = asyncio.Event()

    @tool(side_effects="irreversible")
    async def stubborn() -> str:
        """Ignores the first cancellation, then returns a result late."""
        admitted.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await release.wait()
            return "LATE RESULT"
        return "x"

    model = ScriptedModel([reply(call("stubborn")), "never"])
    handle = Agent(model, tools=[stubborn]).start("go")
    await admitted.wait()
    handle.cancel()
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(RunCancelled):
        await handle.result()
    finished = [e for e in handle.journal if isinstance(e, ToolCallFinished)]
    assert [f.outcome for f in finished] == ["cancelled"]
    assert all("LATE RESULT" not in f.result.text for f in finished)


async def test_closing_a_stream_cancels_the_run() -> None:
    started = asyncio.Event()
    tasks: list[asyncio.Task[object]] = []

    @tool
    async def wait_forever() -> str:
        """Wait."""
        task = asyncio.current_task()
        assert task is not None
        tasks.append(task)
        started.set()
        await asyncio.sleep(30)
        return "x"

    agent = Agent(ScriptedModel([reply(call("wait_forever")), "never"]), tools=[wait_forever])
    stream = agent.stream("go")
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            await started.wait()
            break
    await stream.aclose()
    assert tasks and all(t.done() for t in tasks)


async def test_cancelling_the_caller_cancels_the_run() -> None:
    started = asyncio.Event()
    tasks: list[asyncio.Task[object]] = []

    @tool
    async def wait_forever() -> str:
        """Wait."""
        task = asyncio.current_task()
        assert task is not None
        tasks.append(task)
        started.set()
        await asyncio.sleep(30)
        return "x"

    agent = Agent(ScriptedModel([reply(call("wait_forever")), "never"]), tools=[wait_forever])
    runner = asyncio.create_task(agent.run("go"))
    await started.wait()
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert tasks and all(t.done() for t in tasks)


def _spawn_group() -> subprocess.Popen[bytes]:
    # a shell whose child `sleep` is a grandchild of ours, all in a new session
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess,time; subprocess.Popen(['sleep','30']); time.sleep(30)",
        ],
        start_new_session=True,
    )


def process_tool(pids: list[int]) -> Tool:
    @tool(side_effects="irreversible")
    async def run_job() -> str:
        """Run a process group; kill the whole group if cancelled."""
        proc = _spawn_group()
        pids.append(proc.pid)
        try:
            await asyncio.to_thread(proc.wait)
        except asyncio.CancelledError:
            os.killpg(proc.pid, signal.SIGKILL)
            await asyncio.to_thread(proc.wait)
            raise
        return "done"

    return run_job


def _group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in process group `pgid`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


async def test_no_process_survives_a_timeout() -> None:
    pids: list[int] = []
    model = ScriptedModel([reply(call("run_job")), "never"])
    agent = Agent(model, tools=[process_tool(pids)])
    with pytest.raises(RunTimedOut):
        await agent.run("go", timeout=0.3)
    (pid,) = pids
    # SIGKILL is delivered asynchronously: the orphaned grandchild is gone moments later
    for _ in range(200):
        if not _group_alive(pid):
            break
        await asyncio.sleep(0.01)
    assert not _group_alive(pid)


async def test_without_reaping_the_process_survives_the_timeout() -> None:
    """The twin: with task reaping switched off, the tool's group outlives the run."""
    pids: list[int] = []
    model = ScriptedModel([reply(call("run_job")), "never"])
    agent = Agent(model, tools=[process_tool(pids)])
    with unsafe_switches(reap_tasks=False):
        with pytest.raises(RunTimedOut):
            await agent.run("go", timeout=0.3)
    (pid,) = pids
    try:
        assert _group_alive(pid)
    finally:
        os.killpg(pid, signal.SIGKILL)  # the abandoned tool task reaps it and ends
        for _ in range(500):
            if not _group_alive(pid):
                break
            await asyncio.sleep(0.01)


async def test_stream_shows_the_fence_and_matches_the_journal() -> None:
    started = asyncio.Event()

    @tool(side_effects="irreversible")
    async def slow() -> str:
        """Slow."""
        started.set()
        await asyncio.sleep(30)
        return "x"

    handle = Agent(ScriptedModel([reply(call("slow")), "never"]), tools=[slow]).start("go")
    streamed: list[RunEvent] = []

    async def consume() -> None:
        with contextlib.suppress(RunCancelled):
            async for event in handle.events():
                streamed.append(event)

    consumer = asyncio.create_task(consume())
    await started.wait()
    handle.cancel()
    await consumer
    assert [e for e in streamed if is_journal_event(e)] == list(handle.journal)
    assert any(isinstance(e, CancelRequested) for e in streamed)


def test_start_outside_an_event_loop_is_a_clear_error() -> None:
    agent = Agent(ScriptedModel(["x"]))
    with pytest.raises(ConfigurationError, match="run_sync"):
        agent.start("go")


def test_leaving_stream_sync_early_cancels_the_run() -> None:
    cancelled, running = threading.Event(), threading.Event()

    @tool
    async def wait_forever() -> str:
        """Wait."""
        running.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "x"

    agent = Agent(ScriptedModel([reply(call("wait_forever")), "never"]), tools=[wait_forever])
    for event in agent.stream_sync("go"):
        if isinstance(event, ToolCallStarted):
            assert running.wait(5)  # the run goes on in its own thread meanwhile
            break
    assert cancelled.wait(5)


async def test_events_can_be_iterated_after_the_run_and_again() -> None:
    handle = Agent(ScriptedModel(["hi"])).start("go")
    result = await handle.result()
    first = [e async for e in handle.events()]
    assert [e async for e in handle.events()] == []
    assert [e for e in first if is_journal_event(e)] == list(result.journal)


async def test_cancel_right_after_start_ends_the_run_cleanly() -> None:
    model = ScriptedModel(["never"])
    handle = Agent(model).start("go")
    handle.cancel("changed my mind")
    with pytest.raises(RunCancelled, match="changed my mind"):
        await handle.result()
    streamed = [e async for e in _events_until_error(handle)]
    assert streamed == list(handle.journal)
    assert [type(e).__name__ for e in streamed][-2:] == ["CancelRequested", "RunFailed"]
    assert model.requests == []


async def _events_until_error(handle: RunHandle[str]) -> AsyncIterator[RunEvent]:
    with contextlib.suppress(RunCancelled):
        async for event in handle.events():
            yield event
