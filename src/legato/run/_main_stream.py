"""A stream driven on the main thread's own loop by `stream_sync` (see `legato.run._sync`)."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, TypeVar, cast

__all__ = ["OPEN_STREAMS", "MainStream", "is_stream_handler"]

T = TypeVar("T")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class MainStream(Generic[T]):
    """One task drives a whole stream on the main thread's loop, handing each item across.

    The task pulls an item, stops the loop and waits; the caller's `next()` resumes the
    task and runs the loop until the next item (or the end). An iterator with a
    `take_ready()` method (`legato.run._handle.HandleEvents`) hands over, with each item it
    was awaited for, the items it already holds: the caller takes them without running the
    loop again (each run of the loop costs a turn of its own). One task and one context for
    the whole stream, and Ctrl-C handled by one SIGINT handler installed for the stream's
    lifetime, instead of an `asyncio.Runner.run` per item (each a new task and a handler
    installed and restored). Ctrl-C while the loop runs cancels the task (the run records
    its cancellation) and raises `KeyboardInterrupt` in the caller; between items it raises
    `KeyboardInterrupt` at once, as the default handler does.
    """

    __slots__ = (
        "_interrupted",
        "_items",
        "_loop",
        "_original",
        "_owns_sigint",
        "_resume",
        "_running",
        "_task",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, iterator: AsyncIterator[T]) -> None:
        self._loop = loop
        self._items: collections.deque[T] = collections.deque()
        """Items the task has handed over and the caller has not taken yet."""
        self._resume: asyncio.Future[bool] | None = None
        self._running = False
        self._interrupted = False
        self._owns_sigint = False
        self._original: Any = signal.default_int_handler
        self._task = task = loop.create_task(
            self._drive(iterator), context=contextvars.copy_context()
        )
        task.add_done_callback(lambda _: self._hand_back())

    async def _drive(self, iterator: AsyncIterator[T]) -> None:
        take_ready: Callable[[], list[T]] | None = getattr(iterator, "take_ready", None)
        try:
            while True:
                try:
                    item = await anext(iterator)
                except StopAsyncIteration:
                    return
                self._items.append(item)
                if take_ready is not None:
                    self._items.extend(take_ready())
                self._resume = resume = self._loop.create_future()
                self._hand_back()
                if not await resume:  # the caller left the stream
                    return
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()

    def _hand_back(self) -> None:
        """Return to the caller once this loop iteration ends (only from this stream's run)."""
        if self._running:
            self._loop.stop()

    def items(self) -> Iterator[T]:
        """The stream's items, for the caller's thread (the main thread)."""
        previous = signal.getsignal(signal.SIGINT)
        if previous is signal.default_int_handler:
            self._owns_sigint = True
        elif is_stream_handler(previous):  # a stream opened while another is open
            self._owns_sigint = True
            self._original = cast(Any, previous).__self__._original
        if self._owns_sigint:
            signal.signal(signal.SIGINT, self._on_sigint)
        OPEN_STREAMS.append(self)
        try:
            while True:
                done, item = self._step()
                if done:
                    return
                yield cast(T, item)
        finally:
            OPEN_STREAMS.remove(self)
            try:
                self._close()
            finally:
                self._give_back_sigint()

    def _give_back_sigint(self) -> None:
        """Hand Ctrl-C on: to the newest stream still open, else to the handler from before.

        Streams open at the same time may end in any order.
        """
        if self._owns_sigint and signal.getsignal(signal.SIGINT) == self._on_sigint:
            owners = [stream for stream in OPEN_STREAMS if stream._owns_sigint]
            signal.signal(signal.SIGINT, owners[-1]._on_sigint if owners else self._original)

    def _step(self) -> tuple[bool, T | None]:
        if not self._items:
            resume, self._resume = self._resume, None
            if resume is not None and not resume.done():
                resume.set_result(True)
            self._run()
        if self._items:
            return False, self._items.popleft()
        return True, self._outcome()

    def _run(self) -> None:
        self._running = True
        try:
            self._loop.run_forever()
        finally:
            self._running = False

    def _outcome(self) -> None:
        task = self._task
        if task.cancelled() and self._interrupted:
            raise KeyboardInterrupt
        task.result()  # the stream's error (or its cancellation), raised in the caller

    def _close(self) -> None:
        """Let the stream close itself (the caller left early, or an error ended it)."""
        task = self._task
        if task.done():
            return
        resume, self._resume = self._resume, None
        if resume is not None and not resume.done():
            resume.set_result(False)
        else:
            task.cancel()
        if _running_loop() is not None:
            # Collected while a loop runs on this thread: the loop cannot be re-entered; the
            # task ends when the main loop next runs (or at exit).
            return
        while not task.done():
            self._run()
        if not task.cancelled():
            task.result()  # an error while closing the stream is raised, as `aclose()` would

    def _on_sigint(self, signum: int, frame: object) -> None:
        if self._running and not self._interrupted and not self._task.done():
            self._interrupted = True
            self._task.cancel()
            self._loop.call_soon_threadsafe(lambda: None)  # wake a loop blocked in select
            return
        raise KeyboardInterrupt


OPEN_STREAMS: list[MainStream[Any]] = []
"""Main-thread streams open now, oldest first."""


def is_stream_handler(handler: object) -> bool:
    """Whether `handler` is an open stream's SIGINT handler."""
    return isinstance(getattr(handler, "__self__", None), MainStream)
