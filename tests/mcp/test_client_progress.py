"""MCP progress notifications of tool calls in a run become `ToolProgress` stream events.

Against real servers: `servers/progress.py` (stdio, written with the `mcp` SDK) and
@modelcontextprotocol/server-everything's `trigger-long-running-operation` (stdio and
Streamable HTTP). The events sit inside their call's window, keep the server's order,
are coalesced when a server floods, reach a parent run from a child, and change nothing
in the run's result or journal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from legato import Agent, Journal, replay
from legato.events import (
    ChildEvent,
    RunEvent,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    is_journal_event,
)
from legato.mcp import HTTPServer, MCPClient, ProgressUpdate, StdioServer
from legato.run._scope import Scope
from legato.testing import ScriptedModel, call, reply

HERE = Path(__file__).resolve().parent
EVERYTHING_JS = (
    HERE.parents[1] / ".mcp-node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
LONG = "trigger-long-running-operation"

pytestmark = pytest.mark.usefixtures("no_leaked_children")


def progress_of(events: Sequence[RunEvent], call_id: str) -> list[ToolProgress]:
    return [e for e in events if isinstance(e, ToolProgress) and e.call_id == call_id]


def window(events: Sequence[RunEvent], call_id: str) -> tuple[int, int]:
    """Stream positions of a call's start and finish."""
    start = next(
        i for i, e in enumerate(events) if isinstance(e, ToolCallStarted) and e.call.id == call_id
    )
    finish = next(
        i for i, e in enumerate(events) if isinstance(e, ToolCallFinished) and e.call.id == call_id
    )
    return start, finish


def assert_in_flight(events: Sequence[RunEvent]) -> None:
    for index, event in enumerate(events):
        if isinstance(event, ToolProgress):
            start, finish = window(events, event.call_id)
            assert start < index < finish, event


def assert_increasing(values: Sequence[float]) -> None:
    assert all(a < b for a, b in zip(values, values[1:], strict=False)), values


def _no_progress_callback(*_: object) -> None:
    """`MCPClient._progress_callback` switched off: requests carry no progress token."""


async def stream(agent: Agent[Any], prompt: str) -> tuple[list[RunEvent], Journal, Any]:
    handle = agent.start(prompt)
    events = [e async for e in handle.events()]
    result = await handle.result()
    return events, result.journal, result


# -- a Python server written with the SDK ---------------------------------------------------------


@pytest.mark.parametrize("progress", [True, False], ids=["progress", "no-progress"])
async def test_progress_of_an_mcp_call_streams_and_the_journal_does_not_change(
    progress: bool,
    python_server: Callable[..., StdioServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not progress:  # the twin: no progress token sent, so the server reports nothing
        monkeypatch.setattr(MCPClient, "_progress_callback", _no_progress_callback)
    updates: list[ProgressUpdate] = []
    client = MCPClient(python_server("progress"), name="progress", on_progress=updates.append)
    model = ScriptedModel([reply(call("count", {"steps": 4, "pause": 0.15}, id="c1")), "ok"])
    async with client:
        events, journal, result = await stream(Agent(model, tools=[client]), "count")

    seen = progress_of(events, "c1")
    if progress:
        assert seen, "the server's notifications reached the stream"
        assert_increasing([p.progress for p in seen])
        assert seen[-1].progress == 4.0  # the last update is never coalesced away
        assert all(p.total == 4.0 and p.message == f"step {p.progress:g}" for p in seen)
        assert {(p.tool, p.step, p.run_id) for p in seen} == {("count", 1, result.run_id)}
        # the user's callback still gets every notification, uncoalesced
        assert [(u.tool, u.tool_call_id, u.progress) for u in updates] == [
            ("count", "c1", float(i)) for i in range(1, 5)
        ]
    else:
        assert not seen and not updates
    assert_in_flight(events)
    # the journal is exactly the stream's journal events; the run is the same either way
    assert [e for e in events if is_journal_event(e)] == list(journal)
    assert [e.kind for e in journal] == [
        "run_started",
        "user_prompt",
        "model_requested",
        "model_responded",
        "tool_call_started",
        "tool_call_admitted",
        "tool_call_finished",
        "step_finished",
        "model_requested",
        "model_responded",
        "step_finished",
        "run_finished",
    ]
    finished = next(e for e in journal if isinstance(e, ToolCallFinished))
    assert finished.result.text == "counted 4"
    again = replay(Journal.from_jsonl(journal.to_jsonl()))
    assert again.messages == result.messages and again.output == "ok"


async def test_parallel_mcp_calls_each_stream_their_own_progress(
    python_server: Callable[..., StdioServer],
) -> None:
    model = ScriptedModel(
        [
            reply(
                call("count", {"steps": 3, "pause": 0.12}, id="a"),
                call("count", {"steps": 5, "pause": 0.12}, id="b"),
            ),
            "ok",
        ]
    )
    async with MCPClient(python_server("progress"), name="progress") as client:
        events, _, _ = await stream(Agent(model, tools=[client]), "count twice")
    assert_in_flight(events)
    for call_id, steps in (("a", 3.0), ("b", 5.0)):
        values = [p.progress for p in progress_of(events, call_id)]
        assert_increasing(values)
        assert values[-1] == steps
        assert {p.total for p in progress_of(events, call_id)} == {steps}


@pytest.mark.parametrize("coalesced", [True, False], ids=["coalesced", "every-update"])
async def test_a_flooding_server_is_coalesced(
    coalesced: bool,
    python_server: Callable[..., StdioServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not coalesced:  # the twin: without the rule, each of the 500 notifications is an event
        monkeypatch.setattr(Scope, "PROGRESS_INTERVAL", 0.0)
    updates: list[ProgressUpdate] = []
    client = MCPClient(python_server("progress"), name="progress", on_progress=updates.append)
    model = ScriptedModel([reply(call("flood", {"n": 500}, id="f")), "ok"])
    async with client:
        started = time.monotonic()
        events, journal, _ = await stream(Agent(model, tools=[client]), "flood")
        elapsed = time.monotonic() - started
    values = [p.progress for p in progress_of(events, "f")]
    assert len(updates) == 500  # every notification arrived
    assert_increasing(values)
    assert values[-1] == 500.0
    assert_in_flight(events)
    if coalesced:
        # one event at once, then at most one per interval, plus the last one at the end
        assert len(values) <= 2 + elapsed / Scope.PROGRESS_INTERVAL
        assert len(values) < 500
    else:
        assert values == [float(i) for i in range(1, 501)]
    assert "tool_progress" not in journal.to_jsonl()


async def test_a_childs_mcp_progress_reaches_the_parent_as_child_events(
    python_server: Callable[..., StdioServer],
) -> None:
    async with MCPClient(python_server("progress"), name="progress") as client:
        helper = Agent(
            ScriptedModel([reply(call("count", {"steps": 3, "pause": 0.12}, id="ci")), "3"]),
            tools=[client],
            name="counter",
        )
        parent = ScriptedModel([reply(call("ask", {"task": "count to 3"}, id="pa")), "done"])
        agent = Agent(parent, tools=[helper.as_tool(name="ask", description="Ask the counter")])
        events, journal, _ = await stream(agent, "go")
    wrapped = [
        (i, e.lineage, e.event)
        for i, e in enumerate(events)
        if isinstance(e, ChildEvent) and isinstance(e.event, ToolProgress)
    ]
    assert wrapped
    assert {lineage.agent for _, lineage, _ in wrapped} == {"counter"}
    values = [p.progress for _, _, p in wrapped]
    assert_increasing(values)
    assert values[-1] == 3.0
    start, finish = window(events, "pa")
    assert all(start < i < finish for i, _, _ in wrapped)
    assert_in_flight([e.event for e in events if isinstance(e, ChildEvent)])
    assert not any(isinstance(e, ToolProgress) for e in journal)


# -- server-everything: its long-running operation ------------------------------------------------


async def _long_operation_run(client: MCPClient) -> list[RunEvent]:
    model = ScriptedModel([reply(call(LONG, {"duration": 1, "steps": 4}, id="long")), "ok"])
    async with client:
        events, journal, _ = await stream(Agent(model, tools=[client]), "take your time")
    finished = next(e for e in journal if isinstance(e, ToolCallFinished))
    assert "Long running operation completed" in finished.result.text
    assert "tool_progress" not in journal.to_jsonl()
    return events


def _check_long_operation(events: Sequence[RunEvent]) -> None:
    seen = progress_of(events, "long")
    values = [p.progress for p in seen]
    assert values, "server-everything's notifications reached the stream"
    assert_increasing(values)
    assert values[-1] == 4.0
    assert {(p.tool, p.total) for p in seen} == {(LONG, 4.0)}
    assert_in_flight(events)


async def test_everything_long_running_operation_streams_progress(
    everything_stdio: StdioServer,
) -> None:
    events = await _long_operation_run(MCPClient(everything_stdio, name="everything"))
    _check_long_operation(events)


async def test_everything_long_running_operation_over_http_streams_progress(
    node: Path,
    free_port: int,
    http_process: Callable[..., AbstractAsyncContextManager[object]],
) -> None:
    loopback = HERE / "servers" / "loopback.cjs"
    argv = [str(node), "--require", str(loopback), str(EVERYTHING_JS), "streamableHttp"]
    async with http_process(*argv, port=free_port, env={"PORT": str(free_port)}):
        url = f"http://127.0.0.1:{free_port}/mcp"
        events = await _long_operation_run(MCPClient(HTTPServer(url=url), name="everything"))
    _check_long_operation(events)
