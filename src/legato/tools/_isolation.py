"""Where a tool's function runs: in this process, or in a worker process that can be killed.

Python cannot stop a thread. A plain `def` tool that is cancelled or times out has its
result discarded, but the thread runs on and its side effect lands anyway; an `async def`
tool is cancelled in the event loop, but the threads or processes it started run on. With
`@tool(isolation="process")` the call runs in a worker process instead (forked from a
pre-imported worker parent, see `legato.tools._zygote`), and on cancellation or timeout its
whole process group is killed with `SIGKILL`: whatever the function had not done yet never
happens.

- Arguments and results cross by value (pickle). An argument or result that cannot be
  pickled (an open file, a lambda, a lock) fails the call with `ToolIsolationError`; the
  function itself must be importable by name (a module-level `def` or `async def`, not a
  lambda, a local function or a method), which `@tool` checks when the tool is made.
- A tool defined in the script being run (`__main__`) is found by loading that script again
  under another name, so its top level must be guarded by `if __name__ == "__main__":`, as
  for `multiprocessing`.
- The function sees a copy of its arguments; it cannot take the `RunContext` (the run's
  state, scope and journal stay in the run's process).
- A tool's `timeout` counts from its first line in the worker, not from the worker's start.

Thread mode runs each sync call on a *daemon* thread rather than the event loop's default
executor, so a hung sync tool never keeps the interpreter alive at exit (the executor's
threads are joined at shutdown; daemon threads are not).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from legato.exceptions import ToolDefinitionError
from legato.tools._zygote import call_in_process, close_workers, timeout_from_first_line

__all__ = [
    "Isolation",
    "call_in_process",
    "call_in_thread",
    "check_isolatable",
    "close_workers",
    "timeout_from_first_line",
]

Isolation: TypeAlias = Literal["thread", "process"]
"""`thread`: a sync function runs on a daemon thread, an async one on the run's loop (neither
is stopped for sure: a cancelled call's thread, or a thread it started, may still land its
effect). `process`: it runs in a worker process whose group is killed on cancellation or
timeout."""


# -- definition-time checks --------------------------------------------------------------------


def check_isolatable(
    name: str, function: Callable[..., Any], *, context_parameter: str | None, is_async: bool
) -> None:
    """Raise `ToolDefinitionError` unless `function` can run in a worker process."""
    problem = None
    qualname = getattr(function, "__qualname__", "")
    del is_async  # a coroutine function runs on an event loop in its worker
    if context_parameter is not None:
        problem = f"it takes the RunContext ({context_parameter!r}), which stays in the run"
    elif not isinstance(getattr(function, "__module__", None), str) or not qualname:
        problem = "it has no module-level name a worker could import it by"
    elif "<lambda>" in qualname or "<locals>" in qualname:
        problem = "a lambda or a function defined inside another cannot be imported by name"
    elif "." in qualname or hasattr(function, "__self__"):
        problem = "a method cannot be imported by name; use a module-level function"
    if problem is not None:
        msg = f'tool {name!r} cannot use isolation="process": {problem}'
        raise ToolDefinitionError(msg)


# -- thread mode ---------------------------------------------------------------------------------


_Job: TypeAlias = tuple[Callable[[], Any], Callable[[Any], None]]
"""What a tool thread runs, and what it then does with the outcome (off the lock)."""


class _ToolThreads:
    """Daemon threads that run plain `def` tools, kept for reuse.

    A call goes to an idle thread when there is one and to a new thread otherwise, so a
    hung call never holds up another (there is no upper bound, as with a thread per call),
    and the threads are daemons: an abandoned call never delays interpreter exit. A thread
    idle for `IDLE` seconds ends. Reusing them saves starting a thread per call (`def`
    tools are the common case).
    """

    IDLE = 30.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._idle = 0
        """Idle threads not yet promised a job."""
        self._pid = os.getpid()

    def submit(self, job: _Job) -> None:
        """Run `job` on an idle thread, or a new one.

        The thread counts as idle again before the job's `deliver` step, so a caller woken by
        it finds the thread free for its next call.
        """
        with self._lock:
            if self._pid != os.getpid():  # a forked child has none of its parent's threads
                self._jobs, self._idle, self._pid = queue.SimpleQueue(), 0, os.getpid()
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
            jobs = self._jobs
        jobs.put(job)
        if spawn:
            threading.Thread(
                target=self._serve, args=(jobs,), name="legato-tool", daemon=True
            ).start()

    def _serve(self, jobs: queue.SimpleQueue[_Job]) -> None:
        while True:
            try:
                job = jobs.get(timeout=self.IDLE)
            except queue.Empty:
                with self._lock:
                    if jobs is not self._jobs or self._idle > 0:
                        if jobs is self._jobs:
                            self._idle -= 1
                        return  # retire: no job was promised to this thread
                continue  # a job was promised to an idle thread: it is on its way
            run, deliver = job
            outcome = run()
            with self._lock:
                stale = jobs is not self._jobs
                if not stale:
                    self._idle += 1
            deliver(outcome)
            if stale:
                return


_THREADS = _ToolThreads()


async def call_in_thread(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """`function(**kwargs)` on a daemon thread, in a copy of the caller's context.

    Like `asyncio.to_thread`, except that an abandoned call never delays interpreter exit
    and a hung call never holds up another (see `_ToolThreads`).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> tuple[bool, Any]:
        try:
            return (True, context.run(function, **kwargs))
        except BaseException as exc:
            return (False, exc)

    def deliver(outcome: tuple[bool, Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, *outcome)

    _THREADS.submit((work, deliver))
    return await future
