"""`stream_sync` on the main thread: one task drives the whole stream, items handed across.

Each item used to cost an `asyncio.Runner.run` (a new task, a SIGINT handler installed and
restored). Now one task pulls the stream for its whole life and the caller's `next()` only
runs the loop until the next item. What must hold: the stream runs in one task and one copy
of the caller's context; Ctrl-C (while the run works, or between items) interrupts the
caller and cancels the run; leaving early closes the stream and records the run's end;
errors surface at the caller's `next()`; nested sync calls between items still work; the
events a run has already produced come across as one batch (one run of the loop for several
events, not one per event).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import signal
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path
from typing import cast

import pytest

import legato.run._sync as facade
from legato import Agent, tool
from legato.events import RunEvent, RunFailed, RunFinished, ToolCallFinished, ToolCallStarted
from legato.run._handle import HandleEvents
from legato.run._sync import iterate_sync
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply

_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="-")


class _Source:
    """An async generator that records where each of its items was made, and its closing."""

    def __init__(self, count: int, *, fail_after: int | None = None) -> None:
        self.count = count
        self.fail_after = fail_after
        self.tasks: list[asyncio.Task[object] | None] = []
        self.context: list[str] = []
        self.closed = False

    async def items(self) -> AsyncIterator[int]:
        try:
            for index in range(self.count):
                if index == self.fail_after:
                    raise LookupError(f"item {index} is missing")
                await asyncio.sleep(0)
                self.tasks.append(asyncio.current_task())
                self.context.append(_SEEN.get())
                _SEEN.set(f"set by item {index}")
                yield index
        finally:
            self.closed = True


def _waiting_agent(store: SQLiteStore) -> Agent:
    @tool
    async def wait_forever() -> str:
        """Wait."""
        await asyncio.sleep(30)
        return "x"

    model = ScriptedModel([reply(call("wait_forever")), "never"])
    return Agent(model, tools=[wait_forever], store=store)


def _runner_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    run = asyncio.Runner.run

    def counted(self: asyncio.Runner, *args: object, **kwargs: object) -> object:
        calls.append(1)
        return run(self, *args, **kwargs)  # type: ignore[arg-type]  # passed through as given

    monkeypatch.setattr(asyncio.Runner, "run", counted)
    return calls


def test_one_task_and_one_context_drive_the_whole_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _runner_runs(monkeypatch)
    source = _Source(5)
    token = _SEEN.set("caller")
    try:
        assert list(iterate_sync(source.items())) == [0, 1, 2, 3, 4]
        assert _SEEN.get() == "caller"  # nothing leaks back
    finally:
        _SEEN.reset(token)
    assert len({id(task) for task in source.tasks}) == 1
    assert source.context == ["caller", *(f"set by item {i}" for i in range(4))]
    assert runs == []  # no runner round trip per item
    assert source.closed


def test_twin_a_runner_run_per_item_makes_a_task_per_item(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the main-thread driver (the path worker threads still take): a task per item."""
    runs = _runner_runs(monkeypatch)

    def per_item(self: facade._MainLoop, iterator: AsyncIterator[object]) -> Iterator[object]:
        return _per_item(self._get(), iterator)

    monkeypatch.setattr(facade._MainLoop, "iterate", per_item)
    source = _Source(5)
    assert list(iterate_sync(source.items())) == [0, 1, 2, 3, 4]
    assert len({id(task) for task in source.tasks}) == 5
    assert len(runs) >= 5


def _per_item(main: asyncio.Runner, iterator: AsyncIterator[object]) -> Iterator[object]:
    """The old way: one `Runner.run` per item."""

    async def pull() -> tuple[bool, object]:
        try:
            return False, await anext(iterator)
        except StopAsyncIteration:
            return True, None

    while True:
        done, item = main.run(pull(), context=contextvars.copy_context())
        if done:
            return
        yield item


def test_an_error_surfaces_at_the_callers_next_after_the_items_before_it() -> None:
    source = _Source(5, fail_after=2)
    got: list[int] = []
    with pytest.raises(LookupError, match="item 2 is missing"):
        for item in iterate_sync(source.items()):
            got.append(item)
    assert got == [0, 1]
    assert source.closed


def test_leaving_early_closes_the_stream_and_records_the_runs_end(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    for event in _waiting_agent(store).stream_sync("go"):
        if isinstance(event, ToolCallStarted):
            break
    (info,) = store.list_runs()
    last = store.load_run(info.run_id).events[-1]
    assert isinstance(last, RunFailed), last
    assert info.status == "failed"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert Agent(ScriptedModel(["still fine"])).run_sync("hi").output == "still fine"


def test_ctrl_c_while_the_run_works_cancels_it_and_interrupts_the_caller() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finished: list[bool] = []

    @tool
    async def slow() -> str:
        """Get interrupted."""
        signal.raise_signal(signal.SIGINT)  # what Ctrl-C does
        await asyncio.sleep(10)
        finished.append(True)
        return "too late"

    agent = Agent(ScriptedModel([reply(call("slow")), "x"]), tools=[slow])
    kinds: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        for event in agent.stream_sync("go"):
            kinds.append(event.kind)
    assert finished == []
    assert kinds[0] == "run_started"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert [e.kind for e in agent.stream_sync("again")][-1] == "run_finished"


def test_ctrl_c_between_items_interrupts_the_caller_there(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    seen: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        for event in _waiting_agent(store).stream_sync("go"):
            seen.append(event.kind)
            signal.raise_signal(signal.SIGINT)  # in the caller's own code
            seen.append("not reached")
    assert seen == ["run_started"]
    assert store.list_runs()[0].status == "failed"  # the stream was closed: the run's end recorded
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sync_calls_between_items_work_and_keep_ctrl_c() -> None:
    @tool
    async def interrupt() -> str:
        """Get interrupted."""
        signal.raise_signal(signal.SIGINT)
        await asyncio.sleep(10)
        return "too late"

    outer = Agent(ScriptedModel([reply(call("interrupt")), "x"]), tools=[interrupt])
    nested: list[object] = []
    last = None
    for event in Agent(ScriptedModel(["outer"])).stream_sync("go"):
        if not nested:
            nested.append(Agent(ScriptedModel(["inner"])).run_sync("hi").output)
            nested.append([e.kind for e in Agent(ScriptedModel(["s"])).stream_sync("x")][-1])
            with pytest.raises(KeyboardInterrupt):
                outer.run_sync("go")  # the runner's own Ctrl-C handling, inside the stream
        last = event
    assert isinstance(last, RunFinished)
    assert nested == ["inner", "run_finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_tool_results_stream_in_order_with_a_plain_def_tool() -> None:
    @tool
    def double(x: int) -> int:
        """Double.

        Args:
            x: The number.
        """
        return 2 * x

    model = ScriptedModel([reply(call("double", {"x": 4})), "eight"])
    events = list(Agent(model, tools=[double]).stream_sync("go"))
    results = [e.result.content for e in events if isinstance(e, ToolCallFinished)]
    assert [[getattr(part, "text", part) for part in content] for content in results] == [["8"]]
    assert isinstance(events[-1], RunFinished)


@pytest.mark.parametrize("first_to_end", ["older", "newer"])
def test_streams_read_in_turn_end_in_any_order_and_leave_ctrl_c_as_it_was(
    first_to_end: str,
) -> None:
    older_source, newer_source = _Source(3), _Source(3)
    older = cast(Generator[int], iterate_sync(older_source.items()))
    newer = cast(Generator[int], iterate_sync(newer_source.items()))
    assert [(next(older), next(newer)) for _ in range(2)] == [(0, 0), (1, 1)]
    first, second = (older, newer) if first_to_end == "older" else (newer, older)
    first.close()
    # the stream still open keeps its Ctrl-C handling
    assert facade._is_stream_handler(signal.getsignal(signal.SIGINT))
    assert list(second) == [2]
    assert older_source.closed and newer_source.closed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_error_while_closing_early_reaches_the_caller() -> None:
    async def items() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            raise OSError("could not close")

    stream = cast(Generator[int], iterate_sync(items()))
    assert next(stream) == 1
    with pytest.raises(OSError, match="could not close"):
        stream.close()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# -- from a worker thread: one task on the background loop feeds a queue --------------------------


def _in_worker(fn: Callable[[], object]) -> object:
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn).result(timeout=30)


def test_a_worker_threads_stream_is_one_task_in_the_callers_context() -> None:
    source = _Source(5)

    def read() -> list[int]:
        _SEEN.set("worker")
        return list(iterate_sync(source.items()))

    assert _in_worker(read) == [0, 1, 2, 3, 4]
    assert len({id(task) for task in source.tasks}) == 1
    assert source.context == ["worker", *(f"set by item {i}" for i in range(4))]
    assert source.closed


def test_a_worker_threads_stream_raises_its_error_after_the_items_before_it() -> None:
    source = _Source(5, fail_after=2)
    got: list[int] = []

    def read() -> None:
        for item in iterate_sync(source.items()):
            got.append(item)

    with pytest.raises(LookupError, match="item 2 is missing"):
        _in_worker(read)
    assert got == [0, 1]
    assert source.closed


def test_leaving_a_worker_threads_stream_early_cancels_the_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")

    def read() -> None:
        for event in _waiting_agent(store).stream_sync("go"):
            if isinstance(event, ToolCallStarted):
                break

    _in_worker(read)
    (info,) = store.list_runs()
    assert isinstance(store.load_run(info.run_id).events[-1], RunFailed)
    assert info.status == "failed"


def test_shutdown_cancels_a_worker_threads_stream_in_legatos_terms(tmp_path: Path) -> None:
    from legato.exceptions import RunCancelled

    store = SQLiteStore(tmp_path / "runs.db")
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            for event in _waiting_agent(store).stream_sync("go"):
                if isinstance(event, ToolCallStarted):
                    facade._cancel_in_flight()  # what interpreter shutdown does
        except BaseException as exc:
            outcome.append(exc)

    _in_worker(read)
    assert len(outcome) == 1 and isinstance(outcome[0], RunCancelled), outcome
    assert store.list_runs()[0].status == "failed"


# -- events the run already produced are taken as a batch ---------------------------------------


def _loop_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts each time a loop is run (`run_forever`: one per batch handed to the caller)."""
    runs: list[int] = []
    run_forever = asyncio.BaseEventLoop.run_forever

    def counted(self: asyncio.BaseEventLoop) -> None:
        runs.append(1)
        run_forever(self)

    monkeypatch.setattr(asyncio.BaseEventLoop, "run_forever", counted)
    return runs


def _tool_agent(store: SQLiteStore | None = None) -> Agent:
    @tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return f"value of {key}"

    model = ScriptedModel([reply(call("lookup", {"key": "a"})), "the value is known"])
    return Agent(model, tools=[lookup], store=store)


def _kinds_and_steps(events: list[RunEvent]) -> list[tuple[str, object]]:
    return [(e.kind, getattr(e, "step", None)) for e in events]


def test_events_already_produced_come_as_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _kinds_and_steps(asyncio.run(_collect(_tool_agent())))
    _tool_agent().run_sync("warm up")  # the main loop exists before counting
    runs = _loop_runs(monkeypatch)
    events = list(_tool_agent().stream_sync("what is a?"))
    assert _kinds_and_steps(events) == expected  # the same events, in the same order
    assert isinstance(events[-1], RunFinished)
    assert len(events) >= 10
    assert len(runs) <= len(events) // 2, (len(runs), len(events))


def test_twin_without_take_ready_the_loop_runs_once_per_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same stream with the batch hidden: the caller runs the loop for every event."""
    _tool_agent().run_sync("warm up")
    monkeypatch.setattr(HandleEvents, "take_ready", None)
    runs = _loop_runs(monkeypatch)
    events = list(_tool_agent().stream_sync("what is a?"))
    assert isinstance(events[-1], RunFinished)
    assert len(runs) > len(events)


def test_leaving_in_the_middle_of_a_batch_cancels_the_run_once(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    stream = _tool_agent(store).stream_sync("go")
    first = next(stream)
    assert first.kind == "run_started"
    cast("Generator[RunEvent, None, None]", stream).close()  # its batch is left unread
    (info,) = store.list_runs()
    events = store.load_run(info.run_id).events
    assert isinstance(events[-1], RunFailed), events[-1]
    assert "the stream was closed" in events[-1].message
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


async def _collect(agent: Agent) -> list[RunEvent]:
    return [event async for event in agent.stream("what is a?")]
