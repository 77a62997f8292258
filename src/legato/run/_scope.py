"""`Scope`: the run's side channel for events raised inside tools, and the tasks it owns.

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
import collections
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from legato.events import JournalEvent, RunEvent, ToolProgress, is_journal_event

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

    Every event that comes out of the scope's queue has been journaled already when it is
    a journal event: `emit` records it at once (write-ahead), `publish` takes events that
    someone else (the effect gate) recorded.
    """

    __slots__ = (
        "_events",
        "_flights",
        "_record",
        "_tasks",
        "_wake",
        "gate",
        "last_yielded",
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
        progress_interval: float | None = None,
    ) -> None:
        self._events: collections.deque[RunEvent] = collections.deque()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._record = record
        self._flights: dict[str, _Flight] = {}
        self.last_yielded: RunEvent | None = None
        """The event `wait` yielded last: events still queued were recorded after it."""
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
        """Record a journal event in the run's journal now, and queue it for the stream."""
        if self._record is not None and is_journal_event(event):
            self._record(event)
        self.publish(event)

    def publish(self, event: RunEvent) -> None:
        """Queue an event that is already journaled (or never is) for the stream."""
        self._events.append(event)
        self._wake.set()

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

    def start_task(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Start a task the run owns until it ends."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def pending(self) -> list[RunEvent]:
        """Take every event queued so far."""
        events = list(self._events)
        self._events.clear()
        return events

    async def wait(self, tasks: Iterable[asyncio.Future[Any]]) -> AsyncIterator[RunEvent]:
        """Wait for `tasks` to finish, yielding queued events as they arrive.

        An event is taken from the queue only when it is yielded, so a wait that is
        cancelled loses nothing: the rest stays queued for whoever drains it next.
        """
        waiting = [t for t in tasks if not t.done()]
        wake = self._wake
        for task in waiting:
            task.add_done_callback(lambda _: wake.set())
        while True:
            while self._events:
                event = self.last_yielded = self._events.popleft()
                yield event
            if all(t.done() for t in waiting):
                return
            wake.clear()
            if not self._events and not all(t.done() for t in waiting):
                await wake.wait()

    async def interleave(self, source: AsyncIterator[T]) -> AsyncIterator[T | RunEvent]:
        """Yield `source`'s items, and the scope's events while waiting for the next one.

        While the run owns background tasks (sub-agents working while the model thinks),
        their events reach the stream without waiting for the model; without such tasks the
        source is read directly.
        """
        while True:
            if not self._tasks:
                for event in self.pending():
                    yield event
                try:
                    item = await anext(source)
                except StopAsyncIteration:
                    return
                yield item
                continue
            step = asyncio.ensure_future(anext(source))
            try:
                async for event in self.wait([step]):
                    yield event
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
