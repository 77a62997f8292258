"""Cancelling runs from anywhere: every run in flight in the process, and Ctrl-C.

A Ctrl-C reaches the main thread only. A run driven from another thread (a GUI's worker,
a server's handler, a notebook's background job) goes on when the main thread catches the
`KeyboardInterrupt` and carries on, and its tools' effects land. Two ways to reach it:

- `cancel_all_runs()` fences and cancels every run in flight in this process, whatever
  thread or event loop drives it. It only asks: each run's fence goes up on its own loop
  (nothing is admitted from then on, tool tasks are cancelled and awaited, isolated workers
  are killed). Safe to call from a signal handler; `wait=` blocks until they have stopped.
- `install_sigint_handler()` makes Ctrl-C do that first, then whatever the handler before
  it did (by default, raise `KeyboardInterrupt`). A program that owns SIGINT itself can
  call `cancel_all_runs()` from its own handler instead.

`RunHandle.cancel()` works from any thread too.

Every `RunHandle` registers itself here while it runs; the registry holds weak references,
and its operations are single dictionary operations (atomic under the GIL), so a signal
handler that interrupts the main thread in the middle of one never waits on a lock.
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
import weakref
from typing import Any, Protocol

from legato.exceptions import ConfigurationError

__all__ = [
    "cancel_all_runs",
    "install_sigint_handler",
    "register",
    "sigint_handler_installed",
    "unregister",
]


class Cancellable(Protocol):
    """What the registry needs of a run: ask it to stop from any thread, and see it stop."""

    def request_cancel(self, reason: str) -> bool:
        """Ask the run to fence and stop, without blocking; False if it had ended."""
        ...

    def wait_stopped(self, timeout: float | None) -> bool:
        """Block until the run has ended (from a thread other than its loop's)."""
        ...


_LIVE: dict[int, weakref.ref[Any]] = {}
"""Runs in flight, by registration number."""
_NUMBERS = itertools.count()


def register(run: Cancellable) -> int:
    """Record a run in flight; returns its key for `unregister`."""
    key = next(_NUMBERS)
    _LIVE[key] = weakref.ref(run, lambda _: _LIVE.pop(key, None))
    return key


def unregister(key: int) -> None:
    """Forget a run that has ended."""
    _LIVE.pop(key, None)


def cancel_all_runs(
    reason: str = "every run in the process was cancelled", *, wait: float | None = None
) -> int:
    """Fence and cancel every run in flight in this process, on whatever thread it runs.

    Each run stops as `RunHandle.cancel()` stops it: nothing is admitted after its fence,
    its tool tasks are cancelled and awaited, the calls it abandons are journaled as
    `cancelled`, and tools with `isolation="process"` have their worker killed. A caller
    waiting on such a run (`run_sync`, `stream_sync`, `await handle.result()`) gets
    `RunCancelled(reason)`.

    Without `wait`, this only asks and returns at once (safe in a signal handler). With
    `wait=seconds`, it then blocks until every run asked has stopped, at most that long
    (do not wait from the thread that drives one of them: it would wait on itself).

    Returns:
        How many runs were asked to stop.
    """
    runs = [run for ref in tuple(_LIVE.values()) if (run := ref()) is not None]
    asked = [run for run in runs if run.request_cancel(reason)]
    if wait is not None:
        deadline = time.monotonic() + wait
        for run in asked:
            run.wait_stopped(max(0.0, deadline - time.monotonic()))
    return len(asked)


class _Handler:
    """Legato's SIGINT handler: cancel every run, then hand on to the handler from before."""

    __slots__ = ("previous",)

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, signum: int, frame: Any) -> None:
        cancel_all_runs("interrupted (SIGINT)")
        previous = self.previous
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.default_int_handler(signum, frame)
        # SIG_IGN (or None: installed outside Python): the interrupt ends here


def install_sigint_handler() -> None:
    """Make Ctrl-C (SIGINT) cancel every run in flight in the process, on any thread.

    The new handler calls `cancel_all_runs()`, then the handler that was in place (by
    default Python's, which raises `KeyboardInterrupt` in the main thread). Call it once,
    from the main thread, at start-up; a second call changes nothing. While a run is
    driven on the main thread by `run_sync`, that run's own interrupt handling applies
    (the run is cancelled and waited for, then `KeyboardInterrupt` is raised) and runs on
    other threads are cancelled as well.

    Raises:
        ConfigurationError: called from a thread other than the main thread (Python
            installs signal handlers from the main thread only).
    """
    if threading.current_thread() is not threading.main_thread():
        msg = "install_sigint_handler() must be called from the main thread"
        raise ConfigurationError(msg)
    current = signal.getsignal(signal.SIGINT)
    if isinstance(current, _Handler):
        return
    signal.signal(signal.SIGINT, _Handler(current))


def sigint_handler_installed(handler: object) -> bool:
    """Whether `handler` is legato's SIGINT handler."""
    return isinstance(handler, _Handler)
