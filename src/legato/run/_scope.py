"""`Scope`: the run's side channel for events raised inside tools, and the tasks it owns."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Iterable
from typing import Any

from legato.events import RunEvent

__all__ = ["Scope"]


class Scope:
    """Implements `legato.tools.RunScope` for one run."""

    __slots__ = ("_queue", "_tasks")

    def __init__(self) -> None:
        self._queue: asyncio.Queue[RunEvent] = asyncio.Queue()
        self._tasks: set[asyncio.Task[Any]] = set()

    def emit(self, event: RunEvent) -> None:
        """Queue an event for the run's stream."""
        self._queue.put_nowait(event)

    def start_task(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Start a task the run owns until it ends."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def pending(self) -> list[RunEvent]:
        """Take every event queued so far."""
        events: list[RunEvent] = []
        while not self._queue.empty():
            events.append(self._queue.get_nowait())
        return events

    async def wait(self, tasks: Iterable[asyncio.Future[Any]]) -> AsyncIterator[RunEvent]:
        """Wait for `tasks` to finish, yielding emitted events as they arrive."""
        waiting = list(tasks)
        while True:
            for event in self.pending():
                yield event
            if all(t.done() for t in waiting):
                return
            getter = asyncio.ensure_future(self._queue.get())
            try:
                await asyncio.wait([*waiting, getter], return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await getter
            if getter.done() and not getter.cancelled():
                yield getter.result()

    async def close(self) -> None:
        """Cancel and await every task the run still owns."""
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
