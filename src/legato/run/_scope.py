"""`Scope`: what tools reach of their run (its stream, its gate, its store), and the tasks it owns.

A tool's events go onto the run's one stream (`legato.run._recorder.EventStream`): a
journal event is recorded (the recorder puts it on the stream), any other event is put on
it as is. The scope keeps no queue of its own. While the loop waits (for tool calls, for the
model while sub-agents work), `wait` and `interleave` yield (None) whenever the stream has
events, and the loop hands them to its caller.

Tool progress goes through it too (`RunContext.report_progress`, MCP progress
notifications). Progress is stream-only and bounded to the call's flight: the executor
opens a call's window before the call runs and closes it before the call's result is
returned, so every `ToolProgress` of a call is queued after its `ToolCallStarted` and
before its `ToolCallFinished`; an update outside the window is dropped. Within the window,
updates are coalesced: at most one event per call every `progress_interval` seconds,
the first at once, later ones held (the newest replaces the held one) until the interval
has passed; a held update is streamed when the call returns, and dropped when the call is
cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from legato.events import JournalEvent, RunEvent, ToolProgress, is_journal_event
from legato.run._recorder import EventStream

if TYPE_CHECKING:
    from legato.effects import EffectGate
    from legato.run._recorder import JournalSink

__all__ = ["Scope", "on_loop"]

T = TypeVar("T")


def on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[T], object], arg: T) -> None:
    """`fn(arg)` now when called on `loop`'s thread, else handed to `loop` (in call order)."""
    try:
        here = asyncio.get_running_loop() is loop
    except RuntimeError:
        here = False
    if here:
        fn(arg)
    else:
        loop.call_soon_threadsafe(fn, arg)


class _Flight:
    """The progress window of one tool call in flight."""

    __slots__ = ("held", "loop", "sent_at", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.sent_at: float | None = None
        """Loop time of the last update streamed."""
        self.held: ToolProgress | None = None
        """The newest update not streamed yet (it came too soon after the last one)."""
        self.timer: asyncio.TimerHandle | None = None


class Scope:
    """Implements `legato.tools.RunScope` for one run.

    `emit` records a journal event at once (write-ahead; recording puts it on the stream)
    and puts any other event on the stream; `publish` puts a stream-only event.
    """

    __slots__ = (
        "_flights",
        "_record",
        "_stream",
        "_tasks",
        "gate",
        "progress_interval",
        "stopping",
        "store",
    )

    PROGRESS_INTERVAL = 0.1
    """Default seconds between two progress events of one call (0: every update)."""

    def __init__(
        self,
        record: Callable[[JournalEvent], object] | None = None,
        *,
        stream: EventStream | None = None,
        progress_interval: float | None = None,
    ) -> None:
        """A scope whose events are recorded with `record` and streamed on `stream`.

        `stream`: the run's (its recorder's) stream; default: a stream of the scope's own,
        open at once (a scope outside a run).
        """
        if stream is None:
            stream = EventStream()
            stream.open()
        self._stream = stream
        self._tasks: set[asyncio.Task[Any]] = set()
        self._record = record
        self._flights: dict[str, _Flight] = {}
        self.progress_interval = (
            self.PROGRESS_INTERVAL if progress_interval is None else progress_interval
        )
        """Seconds between two progress events of one call (0: every update)."""
        self.gate: EffectGate | None = None
        """The run's effect gate (children inherit it; see `legato.spawn`)."""
        self.store: JournalSink | None = None
        """Where the run's journal is written ahead (children's journals go there too)."""
        self.stopping: str | None = None
        """Why the run is stopping (`finished`, `failed`, `parked`, `was cancelled`), once
        `close` has begun: a task it cancels can tell why."""

    def emit(self, event: RunEvent) -> None:
        """Record a journal event in the run's journal now; put any other on the stream."""
        if self._record is not None and is_journal_event(event):
            self._record(event)  # recording puts it on the stream
        else:
            self._stream.put(event)

    def publish(self, event: RunEvent) -> None:
        """Put an event that is never journaled (progress, a delta) on the stream."""
        self._stream.put(event)

    # -- tool progress (stream-only) --------------------------------------------------------

    def open_call(self, call_id: str) -> None:
        """A call starts running: its progress is streamed from now on."""
        self._flights[call_id] = _Flight(asyncio.get_running_loop())

    def close_call(self, call_id: str, *, flush: bool) -> None:
        """A call stopped running: stream its held update (`flush`) or drop it."""
        flight = self._flights.pop(call_id, None)
        if flight is None:
            return
        if flight.timer is not None:
            flight.timer.cancel()
        if flush and flight.held is not None:
            self.publish(flight.held)

    def progress(self, event: ToolProgress) -> None:
        """Stream a call's progress, coalesced; dropped unless the call is in flight.

        Safe from any thread: off the run's loop (a sync tool in its worker thread) the
        update is handed to the loop, in order.
        """
        flight = self._flights.get(event.call_id)
        if flight is not None:
            on_loop(flight.loop, self._progress, event)

    def _progress(self, event: ToolProgress) -> None:
        flight = self._flights.get(event.call_id)
        if flight is None:  # the call ended while the update was on its way
            return
        now = flight.loop.time()
        due = now if flight.sent_at is None else flight.sent_at + self.progress_interval
        if flight.held is None and due <= now:
            flight.sent_at = now
            self.publish(event)
            return
        flight.held = event
        if flight.timer is None:
            flight.timer = flight.loop.call_at(due, self._release, event.call_id)

    def _release(self, call_id: str) -> None:
        flight = self._flights.get(call_id)
        if flight is None:
            return
        flight.timer = None
        if flight.held is not None:
            flight.sent_at = flight.loop.time()
            self.publish(flight.held)
            flight.held = None

    @property
    def owns_tasks(self) -> bool:
        """Whether tasks the run started (sub-agents in the background) are still running."""
        return bool(self._tasks)

    def start_task(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Start a task the run owns until it ends."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def wait(self, tasks: Iterable[asyncio.Future[Any]]) -> AsyncIterator[None]:
        """Wait for `tasks` to finish; yield whenever the stream has events meanwhile.

        The caller of the loop takes them at each yield. Nothing is taken here, so a wait
        that is cancelled loses nothing.
        """
        waiting = [t for t in tasks if not t.done()]
        stream = self._stream
        wake = stream.wake
        for task in waiting:
            task.add_done_callback(lambda _: wake.set())
        while True:
            if stream:
                yield
            if all(t.done() for t in waiting):
                return
            wake.clear()
            if not stream and not all(t.done() for t in waiting):
                await wake.wait()

    async def interleave(self, source: AsyncIterator[T]) -> AsyncIterator[T | None]:
        """Yield `source`'s items, and None whenever the stream has events meanwhile.

        While the run owns background tasks (sub-agents working while the model thinks),
        their events reach the caller without waiting for the model; without such tasks the
        source is read directly.
        """
        while True:
            if not self._tasks:
                if self._stream:
                    yield None
                try:
                    item = await anext(source)
                except StopAsyncIteration:
                    return
                yield item
                continue
            step = asyncio.ensure_future(anext(source))
            try:
                async for _ in self.wait([step]):
                    yield None
            finally:
                if not step.done():
                    step.cancel()
                    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                        await step
            try:
                item = step.result()
            except StopAsyncIteration:
                return
            yield item

    async def close(self, why: str = "stopped") -> None:
        """Cancel and await every task the run still owns; `why` the run is stopping."""
        if self.stopping is None:
            self.stopping = why
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
