"""Run coroutines and async iterators from synchronous code, even inside a running loop.

Where a sync call runs:

- **On the main thread, outside any running loop** (a script, a CLI, a test): on one
  long-lived event loop that the main thread itself drives, one `asyncio.Runner` made on the
  first call and closed at interpreter exit. No thread hop per call, and the caller's
  context variables are seen by the run.
- **Anywhere else** (a worker thread; code whose own loop is running, as in Jupyter or an
  async web handler): on one long-lived event loop in a background thread, started on the
  first such call (never at import) and shared by every later one.

A stream (`iterate_sync`, behind `stream_sync`) is one task driving the whole async
iterator on that loop: on the main thread each item is handed over by stopping the loop
and the next `next()` resumes it (`legato.run._main_stream`); on the background loop items
go through a queue.

Ctrl-C reaches the main thread only: a run on the background loop is cancelled when its
caller is interrupted, at interpreter exit, or when the program asks (`cancel_all_runs`,
`install_sigint_handler`, in `legato.run._cancel`).

Either way the loop outlives the call, so clients bound to it (a provider's HTTP connection
pool, an MCP session) are reused from call to call instead of being rebuilt each time; no
`nest_asyncio`, no second code path. Code running on the background loop that calls back into
the sync API (an async tool calling `run_sync`) would wait on itself; it gets a private loop
in a worker thread instead. A forked child process makes its own loops.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import os
import queue
import signal
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator
from typing import Any, Generic, TypeVar, cast

from legato.exceptions import RunCancelled
from legato.run._cancel import cancel_all_runs, sigint_handler_installed
from legato.run._main_stream import MainStream as _MainStream
from legato.run._main_stream import is_stream_handler as _is_stream_handler

__all__ = ["iterate_sync", "run_sync"]

T = TypeVar("T")

_Run = Callable[[Coroutine[Any, Any, Any]], Any]
"""Runs one coroutine to completion and returns its result (or raises its error)."""


class _MainLoop:
    """The main thread's own loop: one `asyncio.Runner` reused by every sync call made there."""

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None
        self._pid = 0
        self._closed = False

    def runner(self) -> asyncio.Runner | None:
        """The runner, if the caller is the main thread with no loop running; else None."""
        if self._closed or threading.current_thread() is not threading.main_thread():
            return None
        if _running_loop() is not None:
            return None
        if self._runner is None or self._pid != os.getpid():
            if self._runner is None:
                atexit.register(self.close)
            # A runner inherited through fork shares its epoll and sockets with the parent;
            # it is dropped unclosed. `loop_factory` keeps the loop out of `set_event_loop`.
            self._runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
            self._pid = os.getpid()
        return self._runner

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
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


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


class _BackgroundLoop:
    """The process's shared event loop thread, made on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        """The running background loop (started, or restarted after a fork)."""
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive()
            if self._loop is None or self._pid != os.getpid() or not alive:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="legato-sync-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    def owns_current_thread(self) -> bool:
        """Whether the caller is running on the background loop's own thread."""
        thread = self._thread
        # After a fork, a new thread of the child may get the ident of the parent's loop thread.
        return (
            thread is not None
            and self._pid == os.getpid()
            and thread.ident == threading.get_ident()
        )


_MAIN = _MainLoop()
_BACKGROUND = _BackgroundLoop()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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


_IN_FLIGHT: set[_Call[Any]] = set()
"""Calls on the background loop not finished yet (cancelled at interpreter shutdown)."""
_IN_FLIGHT_LOCK = threading.Lock()
_EXIT_HOOK: list[int] = []
"""The pid that registered the shutdown hook (a forked child registers its own)."""


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


def _cancel_in_flight() -> None:
    """At interpreter shutdown: cancel the background loop's runs, wait for their fences.

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


_FENCE_WAIT = 30.0
"""Seconds shutdown waits for each cancelled run to reach its fence."""


def _register_exit_hook() -> None:
    """Run `_cancel_in_flight` before the interpreter joins non-daemon threads at exit."""
    if _EXIT_HOOK and _EXIT_HOOK[0] == os.getpid():
        return
    _EXIT_HOOK[:] = [os.getpid()]
    register = getattr(threading, "_register_atexit", None)  # the hook concurrent.futures uses
    if register is not None:
        with contextlib.suppress(RuntimeError):  # already shutting down
            register(_cancel_in_flight)


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


def _run_privately(coro: Coroutine[Any, Any, T]) -> T:
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="legato-sync"
    ) as pool:
        return pool.submit(context.run, asyncio.run, coro).result()


def _on_background(coro: Coroutine[Any, Any, T]) -> T:
    _register_exit_hook()
    call = _submit(coro, _BACKGROUND.get())
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT.add(call)
    try:
        with _interruptible():
            return _wait(call)
    finally:
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT.discard(call)


def _runner() -> _Run | None:
    """Where a sync call from here runs its coroutines (None: on a private loop)."""
    if _BACKGROUND.owns_current_thread():
        return None
    main = _MAIN.runner()
    if main is None:
        return _on_background

    def on_main(coro: Coroutine[Any, Any, Any]) -> Any:
        # Each call gets a copy of the caller's context now; a runner's default is the one
        # copied when it was made, shared by every later call. Inside a `stream_sync` loop,
        # or under `install_sigint_handler()`, the runner owns Ctrl-C while the run lasts
        # (it cancels the run and waits for it); legato's handler then reaches other threads.
        replaced = signal.getsignal(signal.SIGINT)
        with _default_sigint_over(_owned_elsewhere):
            try:
                return main.run(coro, context=contextvars.copy_context())
            except KeyboardInterrupt:
                if sigint_handler_installed(replaced):
                    cancel_all_runs("interrupted (SIGINT)")
                raise

    return on_main


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code."""
    run = _runner()
    return _run_privately(coro) if run is None else cast(T, run(coro))


def iterate_sync(iterator: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code, on the loop `run_sync` would use."""
    if not _BACKGROUND.owns_current_thread() and (main := _MAIN.runner()) is not None:
        yield from _iterate_on_main(main, iterator)
        return
    run = _runner()
    if run is None:
        yield from _iterate_privately(iterator)
        return
    yield from _iterate_on_background(iterator)


def _iterate_on_main(main: asyncio.Runner, iterator: AsyncIterator[T]) -> Iterator[T]:
    return _MainStream(main.get_loop(), iterator).items()


_END = object()
"""Put in a background stream's queue after its last item."""


def _iterate_on_background(iterator: AsyncIterator[T]) -> Iterator[T]:
    """One task on the background loop drives the whole stream into a queue the caller reads.

    Items are handed across as they come (no coroutine submitted and waited for per item).
    The task is one of the in-flight calls, so interpreter shutdown cancels it like a run;
    an interrupt of the caller (Ctrl-C inside `asyncio.run`) or leaving early cancels it
    and waits for it to end (the run records its cancellation) before going on.
    """
    _register_exit_hook()
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

    call = _submit(drive(), _BACKGROUND.get())
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT.add(call)
    try:
        while True:
            with _interruptible():
                item = handoff.get()
            if item is _END:
                _wait(call)  # the stream's error, or its cancellation, raised here
                return
            yield cast(T, item)
    finally:
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT.discard(call)
        if not call.future.done():  # left early, or interrupted: cancel, wait for the end
            call.cancel()
            with _interruptible(), contextlib.suppress(concurrent.futures.CancelledError):
                call.future.result()  # a second Ctrl-C stops waiting


def _iterate_privately(iterator: AsyncIterator[T]) -> Iterator[T]:
    """`iterate_sync` on a loop of its own (for callers on the background loop's thread)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="legato-stream", daemon=True)
    thread.start()
    try:
        while True:
            done, item = _submit(_next(iterator), loop).future.result()
            if done:
                return
            yield cast(T, item)
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            _submit(aclose(), loop).future.result()
        # Finish async generators and the default executor as `asyncio.run` does, so that
        # resources tied to this loop (e.g. a provider's HTTP client) are closed with it.
        _submit(loop.shutdown_asyncgens(), loop).future.result()
        _submit(loop.shutdown_default_executor(), loop).future.result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


async def _next(iterator: AsyncIterator[T]) -> tuple[bool, T | None]:
    try:
        return False, await anext(iterator)
    except StopAsyncIteration:
        return True, None


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
