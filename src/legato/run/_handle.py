"""`RunHandle`: a run in progress that can be watched, awaited, cancelled or timed out.

`agent.start(...)` returns one. Cancelling (or the run's `timeout` running out) fences the
run first, through its effect gate: the epoch is bumped and a `CancelRequested` event is
journaled, so nothing is admitted from that moment on. Then the task driving the run is
cancelled; its tool tasks are cancelled and awaited; calls that started and never
finished are journaled as `cancelled`, and a result that arrives late is discarded.

`cancel()` works from any thread, and `legato.cancel_all_runs()` reaches every run in
flight in the process (see `legato.run._cancel`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable
from typing import Generic, Literal

from typing_extensions import TypeVar

from legato.events import Journal, RunEvent
from legato.exceptions import ConfigurationError, RunCancelled, RunParked, RunTimedOut
from legato.run._cancel import register, unregister
from legato.run._loop import RunDriver
from legato.run._result import RunResult

__all__ = ["HandleEvents", "RunHandle"]

_STOPPED = threading.Lock()
"""Guards a handle's end against another thread starting to wait for it."""

OutputT = TypeVar("OutputT", default=str)


class RunHandle(Generic[OutputT]):
    """A started run: `await handle.result()`, `handle.events()`, `handle.cancel()`."""

    def __init__(self, driver: RunDriver[OutputT], *, timeout: float | None = None) -> None:
        """Start driving `driver` on the running event loop."""
        self._driver = driver
        self._buffer: collections.deque[RunEvent] = collections.deque()
        self._ready: asyncio.Event | None = None
        """Set when an event is pushed; made by the first reader of `events()` (a run that
        is only awaited never needs it)."""
        self._ended = False
        self._running = False
        self._finishing = False
        self._error: BaseException | None = None
        self._stop: RunCancelled | None = None
        self._stopped: threading.Event | None = None
        """Made by the first `wait_stopped` of another thread (under `_STOPPED`)."""
        self._waiters: list[asyncio.Future[None]] | None = None
        """Callers of `result`/`wait` on the run's loop, woken as the run's task ends."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            msg = "a run is started inside a running event loop; from sync code use run_sync"
            raise ConfigurationError(msg) from None
        self._task = loop.create_task(self._drive(), name=f"legato-run-{self.run_id[:8]}")
        self._timer = (
            loop.call_later(timeout, self._time_out, timeout) if timeout is not None else None
        )
        self._key = register(self)

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self._driver.state.run_id

    @property
    def journal(self) -> Journal:
        """The run's journal so far."""
        return self._driver.journal

    @property
    def done(self) -> bool:
        """Whether the run has ended (finished, failed, parked or cancelled)."""
        return self._task.done()

    def cancel(self, reason: str = "cancelled by the caller") -> bool:
        """Fence and stop the run, from any thread; False if it had ended or was being stopped.

        On the run's own loop the fence is up when this returns. From another thread the
        fence goes up on the run's loop as soon as that loop gets to it (this does not
        block); True then means the request reached a run that had not ended.
        """
        if self._on_own_loop():
            return self._halt(RunCancelled(reason))
        return self.request_cancel(reason)

    def cancel_threadsafe(self, reason: str = "cancelled by the caller") -> None:
        """`cancel` from another thread (kept for callers of earlier versions)."""
        self.request_cancel(reason)

    def request_cancel(self, reason: str) -> bool:
        """Ask the run's loop to fence and stop it; never blocks (safe in a signal handler)."""
        if self._task.done() or self._stop is not None or self._finishing:
            return False
        try:
            self._task.get_loop().call_soon_threadsafe(self._halt, RunCancelled(reason))
        except RuntimeError:  # its loop is closed: the run cannot go on either
            return False
        return True

    def wait_stopped(self, timeout: float | None) -> bool:
        """Block this thread until the run has ended (not from the run's own loop)."""
        with _STOPPED:
            if self._ended:
                return True
            if self._stopped is None:
                self._stopped = threading.Event()
            stopped = self._stopped
        return stopped.wait(timeout)

    def _on_own_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._task.get_loop()
        except RuntimeError:
            return False

    def _time_out(self, timeout: float) -> None:
        self._halt(RunTimedOut(f"the run exceeded its timeout of {timeout:g} seconds"))

    def _halt(self, error: RunCancelled) -> bool:
        if self._task.done() or self._stop is not None or self._finishing:
            return False
        self._stop = error
        self._driver.gate.fence(str(error))  # first: from here on nothing is admitted
        self._driver.stopping(f"was cancelled ({error})")
        if self._running:  # a task cancelled before it starts would skip its own cleanup
            self._task.cancel()
        return True

    async def _drive(self) -> None:
        status: Literal["finished", "failed", "parked", "cancelled"] = "finished"
        self._running = True
        try:
            for event in self._driver.open_stream():  # the journal's past
                self._push(event)
            if self._stop is not None:  # cancelled before the run took its first step
                raise asyncio.CancelledError
            async with contextlib.aclosing(self._driver.drive()) as events:
                async for event in events:
                    self._push(event)
        except asyncio.CancelledError:
            if self._stop is None:  # someone cancelled the task itself
                self._stop = RunCancelled("the run's task was cancelled")
                self._driver.gate.fence(str(self._stop))
            self._driver.close_cancelled(self._stop)  # its events go onto the stream
            self._error, status = self._stop, "cancelled"
        except Exception as exc:  # every failure ends the run; result() re-raises it
            self._error = exc
            status = "parked" if isinstance(exc, RunParked) else "failed"
        finally:
            self._finishing = True  # the run has ended: a cancel now changes nothing
            if self._timer is not None:
                self._timer.cancel()
            for event in self._driver.pending_events():  # what the run's stream still has
                self._push(event)
            try:
                await self._run_end_hooks(status)
            finally:
                with _STOPPED:
                    self._ended = True
                    stopped = self._stopped
                if self._ready is not None:
                    self._ready.set()
                unregister(self._key)
                if stopped is not None:
                    stopped.set()
                self._wake_waiters()

    def _wake_waiters(self, _: object = None) -> None:
        waiters, self._waiters = self._waiters or (), None
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _task_ended(self) -> None:
        """Wait until the run's task has ended; cancelling the caller leaves the task alone.

        The waiter is woken from the task's last step, one turn of the loop sooner than
        `asyncio.wait` would wake it (that wakes it from the task's done callback).
        """
        if self._task.done():
            return
        waiter = self._task.get_loop().create_future()
        if self._waiters is None:
            self._waiters = []
            # a task cancelled before its first step never runs `_drive`'s wake-up
            self._task.add_done_callback(self._wake_waiters)
        self._waiters.append(waiter)
        await waiter
        if not self._task.done():  # woken from the task's last step: it ends in this turn
            await asyncio.wait([self._task])

    async def _run_end_hooks(
        self, status: Literal["finished", "failed", "parked", "cancelled"]
    ) -> None:
        hooks = self._driver.gate.hooks
        if hooks is not None:
            from legato.security import RunEnd

            error = str(self._error) if self._error is not None else None
            await hooks.on_run_end(RunEnd(status=status, error=error))

    def _push(self, event: RunEvent) -> None:
        self._buffer.append(event)
        if self._ready is not None:
            self._ready.set()

    async def wait(self) -> None:
        """Wait until the run has ended, whatever the outcome."""
        await self._task_ended()

    async def result(self) -> RunResult[OutputT]:
        """The run's result; raises what ended it otherwise (`RunParked`, `RunCancelled`, ...).

        Cancelling the caller does not cancel the run; call `cancel()` for that.
        """
        await self._task_ended()
        self._task.result()
        if self._error is not None:
            raise self._error
        return self._driver.result()

    def take_buffered(self) -> list[RunEvent]:
        """The events buffered now, taken at once (for the one consumer; see `HandleEvents`)."""
        events = list(self._buffer)
        self._buffer.clear()
        return events

    async def events(self) -> AsyncGenerator[RunEvent]:
        """Every event of the run, in order (one consumer); raises at the end if the run failed.

        Iterating a second time yields what the first left unread (nothing, once drained).
        Events are buffered until read, so a slow reader never slows the run.
        """
        while True:
            while self._buffer:
                yield self._buffer.popleft()
            if self._ended:
                break
            if self._ready is None:
                self._ready = asyncio.Event()
            self._ready.clear()
            if not self._buffer and not self._ended:
                await self._ready.wait()
        if self._error is not None:
            raise self._error


class HandleEvents(Generic[OutputT]):
    """A run's events as `Agent.stream` yields them, with what is buffered takeable at once.

    The run starts at the first `__anext__`, on the loop that iterates. `take_ready` takes
    the events the run has produced already (after the one just awaited), so a reader on
    the loop's own thread (`stream_sync`, `legato.run._main_stream`) takes them as a batch
    instead of running the loop once per event. `aclose` before the run's end cancels it
    with the same fence as `cancel()`, and returns once the run has ended.
    """

    __slots__ = ("_events", "_handle", "_start")

    def __init__(self, start: Callable[[], RunHandle[OutputT]]) -> None:
        """Events of the run `start()` starts (called at the first `__anext__`)."""
        self._start = start
        self._handle: RunHandle[OutputT] | None = None
        self._events: AsyncGenerator[RunEvent] | None = None

    def __aiter__(self) -> HandleEvents[OutputT]:
        return self

    async def __anext__(self) -> RunEvent:
        """The run's next event; raises at the end what ended a run that did not finish."""
        if self._events is None:
            self._handle = handle = self._start()
            self._events = handle.events()
        return await anext(self._events)

    def take_ready(self) -> list[RunEvent]:
        """The events the run has produced and the reader has not taken, without waiting."""
        return self._handle.take_buffered() if self._handle is not None else []

    async def aclose(self) -> None:
        """Stop reading; a run that has not ended is cancelled, and has ended on return."""
        handle, events = self._handle, self._events
        if events is not None:
            await events.aclose()
        if handle is not None and not handle.done:
            handle.cancel("the stream was closed")
            await handle.wait()
