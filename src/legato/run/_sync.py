"""Run coroutines and async iterators from synchronous code, even inside a running loop.

One bridge design: a sync call hands its coroutine (`run_sync`) or async iterator
(`iterate_sync`, behind `stream_sync`) to an event loop that outlives the call, one task
there drives it, and the caller's thread waits for the result or for each item. The loop
is one of two homes:

- **The main thread's own loop** (`_MainLoop`): on the main thread with no loop running (a
  script, a CLI, a test), one `asyncio.Runner` made on the first call and driven by the
  main thread itself. No thread hop per call. `run` is `Runner.run`; `iterate` is a
  `legato.run._main_stream.MainStream` (the task stops the loop at each item and the next
  `next()` resumes it).
- **A loop thread** (`_LoopThread`): anywhere else, the process's shared loop in a daemon
  thread, started on the first such call (never at import). `run` submits the task and
  waits for its future; `iterate` hands items across a queue.

Either way the loop outlives the call, so clients bound to it (a provider's HTTP connection
pool, an MCP session) are reused from call to call; no `nest_asyncio`. The caller's
context variables are copied into the task (and nothing leaks back).

Edge cases, each handled in one place:

- **Inside a running loop (Jupyter, an async web handler).** The caller's loop is blocked
  by the call, so the work goes to the shared loop thread (`_home`).
- **On the shared loop's own thread** (an async tool calling `run_sync`): waiting on that
  loop would wait on itself; the call gets a private `_LoopThread`, closed after it.
- **The main thread and SIGINT.** On the main loop, Ctrl-C cancels the run's task, the run
  records its cancellation, then `KeyboardInterrupt` is raised (`Runner.run`, or the
  stream's own handler). While the main thread waits on a loop thread inside
  `asyncio.run`, the first Ctrl-C interrupts the wait (`_interruptible`), the work is
  cancelled and waited for, and a second Ctrl-C stops waiting. A handler of legato's
  (`install_sigint_handler`) or an open stream's gives way to the runner's while a
  main-loop run lasts, and other threads' runs are cancelled too (`_owned_elsewhere`).
- **A background thread.** Ctrl-C never reaches it: a run on a loop thread is cancelled
  when its caller is interrupted, at interpreter exit, or when the program asks
  (`cancel_all_runs`, `install_sigint_handler`, in `legato.run._cancel`).
- **The interpreter exit hook.** Runs in flight on a loop thread are cancelled and their
  fences waited for before the interpreter joins threads (`_cancel_in_flight`); the main
  loop is closed at exit without starting a thread (`_MainLoop.close`), after the closings
  of provider clients whose models were dropped between calls have run to their end.
- **Cancel from another thread.** A cancel of the call (`_Call.cancel`) reaches its task on
  its loop, or stops it before it starts; the caller then gets `RunCancelled` with the
  reason.
- **Iterate versus run.** Same homes and same task per call; a stream left early (or
  interrupted) cancels its task and waits for it to end before the caller goes on.
- **Fork.** A forked child makes its own loops (each home checks the pid).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import inspect
import os
import queue
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator
from typing import Any, Generic, TypeVar, cast

from legato.exceptions import RunCancelled
from legato.run._cancel import cancel_all_runs, sigint_handler_installed
from legato.run._main_stream import MainStream as _MainStream
from legato.run._main_stream import is_stream_handler as _is_stream_handler

__all__ = ["iterate_sync", "run_sync"]

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code."""
    return _home().run(coro)


def iterate_sync(iterator: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code, on the loop `run_sync` would use."""
    yield from _home().iterate(iterator)  # the home is chosen at the first `next()`


def _home() -> _MainLoop | _LoopThread:
    """Where a sync call made from here runs (see the module documentation)."""
    if _BACKGROUND.owns_current_thread():
        return _LoopThread("legato-sync_private", private=True)
    if _MAIN.available():
        return _MAIN
    return _BACKGROUND


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# -- home 1: the main thread's own loop ----------------------------------------------------------


class _MainLoop:
    """The main thread's own loop: one `asyncio.Runner` reused by every sync call made there."""

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None
        self._pid = 0
        self._closed = False

    def available(self) -> bool:
        """Whether the caller is the main thread with no loop running (and not at exit)."""
        return (
            not self._closed
            and threading.current_thread() is threading.main_thread()
            and _running_loop() is None
        )

    def _get(self) -> asyncio.Runner:
        if self._runner is None or self._pid != os.getpid():
            if self._runner is None:
                atexit.register(self.close)
            # A runner inherited through fork shares its epoll and sockets with the parent;
            # it is dropped unclosed. `loop_factory` keeps the loop out of `set_event_loop`.
            self._runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
            self._pid = os.getpid()
        return self._runner

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` as one task of the runner, in a copy of the caller's context.

        (A runner's default context is the one copied when it was made, shared by every
        later call.) Inside a `stream_sync` loop, or under `install_sigint_handler()`, the
        runner owns Ctrl-C while the run lasts (it cancels the run and waits for it);
        legato's handler then reaches other threads.
        """
        runner = self._get()
        replaced = signal.getsignal(signal.SIGINT)
        kept: list[T] = []

        async def keep() -> None:
            # The task's result stays None: the runner, restoring SIGINT after the task,
            # gets its own handler back, and `signal` turns that handler into a message with
            # the task's repr in it, result included (a whole `RunResult`, journal and all).
            kept.append(await coro)

        with _default_sigint_over(_owned_elsewhere):
            try:
                runner.run(keep(), context=contextvars.copy_context())
                return kept[0]
            except KeyboardInterrupt:
                if sigint_handler_installed(replaced):
                    cancel_all_runs("interrupted (SIGINT)")
                raise
            finally:
                if inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == "CORO_CREATED":
                    coro.close()  # a task cancelled before its first step never awaited it

    def iterate(self, iterator: AsyncIterator[T]) -> Iterator[T]:
        """One task drives the whole stream on the runner's loop (`MainStream`)."""
        return _MainStream(self._get().get_loop(), iterator).items()

    def close(self) -> None:
        """Close the loop at exit: cancel what is left, close clients, then the loop.

        Not `Runner.close()`: it joins the loop's default executor from a new thread, which
        Python 3.12+ refuses at interpreter shutdown ("can't create new thread at interpreter
        shutdown"). By the time `atexit` hooks run, `concurrent.futures` has joined the
        executor's workers already, so closing the loop (which shuts the executor down
        without waiting) starts no thread.
        """
        self._closed = True
        runner, self._runner = self._runner, None
        if runner is None or self._pid != os.getpid():
            return
        loop = runner.get_loop()
        try:
            _finish_closings(loop)
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def _finish_closings(loop: asyncio.AbstractEventLoop) -> None:
    """Let provider clients whose models were dropped finish closing on `loop` (not cancel)."""
    if "legato.models._provider" in sys.modules:  # not loaded: no client was made
        from legato.models._provider import finish_closings

        loop.run_until_complete(finish_closings())


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the loop's tasks and let them finish, as `asyncio.run` does at its end."""
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception during legato's loop shutdown",
                    "exception": task.exception(),
                    "task": task,
                }
            )


# -- home 2: a loop in a thread of its own -------------------------------------------------------


class _LoopThread:
    """An event loop running in a thread of its own: the process's shared one, or a private one.

    The shared loop is made on first use (and again after a fork); a private one is made for
    one call and closed after it, as `asyncio.run` closes its loop.
    """

    def __init__(self, name: str, *, private: bool = False) -> None:
        self._name = name
        self._private = private
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        """The running loop (started, or restarted after a fork)."""
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive()
            if self._loop is None or self._pid != os.getpid() or not alive:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    def owns_current_thread(self) -> bool:
        """Whether the caller is running on the loop's own thread."""
        thread = self._thread
        # After a fork, a new thread of the child may get the ident of the parent's loop thread.
        return (
            thread is not None
            and self._pid == os.getpid()
            and thread.ident == threading.get_ident()
        )

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` as one task on the loop; the caller's thread waits for its result."""
        try:
            with _in_flight(_submit(coro, self.get())) as call, _interruptible():
                return _wait(call)
        finally:
            self._done()

    def iterate(self, iterator: AsyncIterator[T]) -> Iterator[T]:
        """One task on the loop drives the whole stream into a queue the caller reads.

        Items are handed across as they come (no coroutine submitted and waited for per
        item). An interrupt of the caller (Ctrl-C inside `asyncio.run`) or leaving early
        cancels the task and waits for it to end (the run records its cancellation).
        """
        handoff: queue.SimpleQueue[object] = queue.SimpleQueue()

        async def drive() -> None:
            try:
                async for item in iterator:
                    handoff.put(item)
            finally:
                try:
                    aclose = getattr(iterator, "aclose", None)
                    if aclose is not None:
                        await aclose()
                finally:
                    handoff.put(_END)

        try:
            with _in_flight(_submit(drive(), self.get())) as call:
                try:
                    while True:
                        with _interruptible():
                            item = handoff.get()
                        if item is _END:
                            _wait(call)  # the stream's error, or its cancellation, raised here
                            return
                        yield cast(T, item)
                finally:
                    if not call.future.done():  # left early, or interrupted: cancel, wait
                        call.cancel()
                        with (
                            _interruptible(),
                            contextlib.suppress(concurrent.futures.CancelledError),
                        ):
                            call.future.result()  # a second Ctrl-C stops waiting
        finally:
            self._done()

    def _done(self) -> None:
        """After a call: a private loop is closed (its async generators, its executor)."""
        if not self._private or self._loop is None or self._thread is None:
            return
        loop, thread, self._loop = self._loop, self._thread, None
        # as `asyncio.run` does, so that what is tied to this loop (e.g. a provider's HTTP
        # client) is closed with it
        if "legato.models._provider" in sys.modules:
            from legato.models._provider import finish_closings

            _submit(finish_closings(), loop).future.result()
        _submit(_cancel_rest(), loop).future.result()
        _submit(loop.shutdown_asyncgens(), loop).future.result()
        _submit(loop.shutdown_default_executor(), loop).future.result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


async def _cancel_rest() -> None:
    """Cancel the loop's other tasks and let them finish (a private loop's last step)."""
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


_MAIN = _MainLoop()
_BACKGROUND = _LoopThread("legato-sync-loop")
_END = object()
"""Put in a loop thread's stream queue after its last item."""


class _Call(Generic[T]):
    """One coroutine submitted to a loop in another thread: its future, and its cancel."""

    __slots__ = ("_lock", "_loop", "_requested", "_task", "future", "reason")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._task: asyncio.Task[T] | None = None
        self._requested = False
        self.reason: str | None = None
        """Why another thread cancelled the call (None: not cancelled from elsewhere)."""
        self._lock = threading.Lock()
        self.future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def started(self, task: asyncio.Task[T]) -> bool:
        """Record the task (on the loop); False when a cancel came first."""
        with self._lock:
            self._task = task
            return not self._requested

    def cancel(self, reason: str | None = None) -> None:
        """Cancel the task on its loop (or before it starts), from any thread.

        `Future.cancel()` cannot do this: a future whose work began is RUNNING, and
        cancelling a running future always fails.
        """
        with self._lock:
            self._requested = True
            self.reason = reason
            task = self._task
        if task is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(task.cancel)
        else:
            self.future.cancel()  # not started yet: it never will be


def _submit(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> _Call[T]:
    """`run_coroutine_threadsafe`, with the task running in a copy of the caller's context."""
    context = contextvars.copy_context()
    call: _Call[T] = _Call(loop)
    future = call.future

    def start() -> None:
        if not future.set_running_or_notify_cancel():
            coro.close()
            return
        task = loop.create_task(coro, context=context)
        if not call.started(task):
            task.cancel()

        def settle(done: asyncio.Task[T]) -> None:
            if done.cancelled():
                # the future is RUNNING, which `Future.cancel()` refuses: set the error
                future.set_exception(concurrent.futures.CancelledError())
            elif (error := done.exception()) is not None:
                future.set_exception(error)
            else:
                future.set_result(done.result())

        task.add_done_callback(settle)

    loop.call_soon_threadsafe(start)
    return call


def _wait(call: _Call[T]) -> T:
    """The call's result; an interrupt of the caller (Ctrl-C) cancels the work first.

    After an interrupt the task is cancelled on its loop and the caller waits for the
    cancellation to finish (the run's fence: nothing is admitted after it, and the journal
    records it) before the interrupt goes on. A second interrupt stops waiting.
    """
    try:
        return call.future.result()
    except concurrent.futures.CancelledError:
        if call.reason is not None:  # cancelled from another thread: say why, in legato's terms
            raise RunCancelled(call.reason) from None
        raise
    except BaseException:
        if not call.future.done():
            call.cancel()
            with contextlib.suppress(Exception):
                call.future.result()
        raise


# -- the interpreter exit hook -------------------------------------------------------------------

_IN_FLIGHT: set[_Call[Any]] = set()
"""Calls on a loop thread not finished yet (cancelled at interpreter shutdown)."""
_IN_FLIGHT_LOCK = threading.Lock()
_EXIT_HOOK: list[int] = []
"""The pid that registered the shutdown hook (a forked child registers its own)."""
_FENCE_WAIT = 30.0
"""Seconds shutdown waits for each cancelled run to reach its fence."""


@contextlib.contextmanager
def _in_flight(call: _Call[T]) -> Generator[_Call[T]]:
    """Keep `call` where interpreter shutdown finds it while the caller waits on it."""
    _register_exit_hook()
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT.add(call)
    try:
        yield call
    finally:
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT.discard(call)


def _cancel_in_flight() -> None:
    """At interpreter shutdown: cancel the loop threads' runs, wait for their fences.

    A Ctrl-C reaches the main thread only; a run started by `run_sync` in a worker thread
    would go on (and its tools' effects land) while the interpreter waits for that thread.
    """
    with _IN_FLIGHT_LOCK:
        calls = list(_IN_FLIGHT)
    for call in calls:
        call.cancel("the interpreter is shutting down (Ctrl-C on the main thread?)")
    for call in calls:
        with contextlib.suppress(Exception):
            call.future.result(timeout=_FENCE_WAIT)


def _register_exit_hook() -> None:
    """Run `_cancel_in_flight` before the interpreter joins non-daemon threads at exit."""
    if _EXIT_HOOK and _EXIT_HOOK[0] == os.getpid():
        return
    _EXIT_HOOK[:] = [os.getpid()]
    register = getattr(threading, "_register_atexit", None)  # the hook concurrent.futures uses
    if register is not None:
        with contextlib.suppress(RuntimeError):  # already shutting down
            register(_cancel_in_flight)


# -- SIGINT --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _interruptible() -> Generator[None]:
    """On the main thread inside `asyncio.run`, let the first Ctrl-C interrupt the wait.

    `asyncio.run` installs a SIGINT handler that only cancels its main task, which is
    blocked in this very wait; the interrupt would be seen once the run had finished.
    While the wait lasts, Ctrl-C raises `KeyboardInterrupt` here instead.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _default_sigint_over(_is_asyncio_handler):
        yield


def _is_asyncio_handler(handler: object) -> bool:
    function = getattr(handler, "func", handler)  # asyncio.Runner binds it with partial
    owner = getattr(function, "__self__", None)
    return isinstance(owner, asyncio.Runner)


@contextlib.contextmanager
def _default_sigint_over(replaced: Callable[[object], bool]) -> Generator[None]:
    """While the block runs, the default SIGINT handler instead of one `replaced` accepts."""
    current = signal.getsignal(signal.SIGINT)
    if not replaced(current):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, current)


def _owned_elsewhere(handler: object) -> bool:
    """A SIGINT handler a main-thread run gives way to: a stream's, or legato's own."""
    return _is_stream_handler(handler) or sigint_handler_installed(handler)
