"""`Scope`: the run's side channel for events raised inside tools, and the tasks it owns."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from legato.events import JournalEvent, RunEvent, is_journal_event

__all__ = ["Scope"]

T = TypeVar("T")


class Scope:
    """Implements `legato.tools.RunScope` for one run.

    Every event that comes out of the scope's queue has been journaled already when it is
    a journal event: `emit` records it at once (write-ahead), `publish` takes events that
    someone else (the effect gate) recorded.
    """

    __slots__ = ("_events", "_record", "_tasks", "_wake", "last_yielded", "stopping")

    def __init__(self, record: Callable[[JournalEvent], object] | None = None) -> None:
        self._events: collections.deque[RunEvent] = collections.deque()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._record = record
        self.last_yielded: RunEvent | None = None
        """The event `wait` yielded last: events still queued were recorded after it."""
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
