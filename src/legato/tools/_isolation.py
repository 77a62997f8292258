"""Where a sync tool's function runs: a daemon thread, or a worker process that can be killed.

Python cannot stop a thread. A plain `def` tool that is cancelled or times out has its
result discarded, but the thread runs on and its side effect lands anyway. With
`@tool(isolation="process")` the call runs in a worker process instead, and on cancellation
or timeout that process (and its process group) is killed with `SIGKILL`: whatever the
function had not done yet never happens.

- Arguments and results cross by value (pickle). An argument or result that cannot be
  pickled (an open file, a lambda, a lock) fails the call with `ToolIsolationError`; the
  function itself must be importable by name (a module-level `def`, not a lambda, a local
  function or a method), which `@tool` checks when the tool is made.
- Workers are started with the `spawn` method (a fresh interpreter, never a `fork` of a
  threaded process) and kept warm: a worker that finished a call is reused by the next one;
  only a killed one is replaced. Each worker leads its own process group.
- The function sees a copy of its arguments; it cannot take the `RunContext` (the run's
  state, scope and journal stay in the run's process).

Thread mode runs each call on a fresh *daemon* thread rather than the event loop's default
executor, so a hung sync tool never keeps the interpreter alive at exit (the executor's
threads are joined at shutdown; daemon threads are not).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from legato.exceptions import ToolDefinitionError, ToolIsolationError

if TYPE_CHECKING:  # multiprocessing and pickle load only when a worker is needed
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__ = [
    "Isolation",
    "call_in_process",
    "call_in_thread",
    "check_isolatable",
]

Isolation: TypeAlias = Literal["thread", "process"]
"""`thread`: a sync function runs on a daemon thread (cannot be stopped; a cancelled call's
effect may still land). `process`: it runs in a worker process that is killed on
cancellation or timeout."""

_IDLE_WORKERS = 4
"""Warm workers kept for reuse per interpreter."""


# -- definition-time checks --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FunctionRef:
    """How a worker finds the function: its module and qualified name."""

    module: str
    qualname: str


def check_isolatable(
    name: str, function: Callable[..., Any], *, context_parameter: str | None, is_async: bool
) -> None:
    """Raise `ToolDefinitionError` unless `function` can run in a worker process."""
    problem = None
    qualname = getattr(function, "__qualname__", "")
    if is_async:
        problem = "it is async (async tools are cancelled in the event loop; use thread mode)"
    elif context_parameter is not None:
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


def _ref(function: Callable[..., Any]) -> _FunctionRef:
    return _FunctionRef(module=function.__module__, qualname=function.__qualname__)


# -- the worker --------------------------------------------------------------------------------


def _resolve(ref: _FunctionRef) -> Callable[..., Any]:
    import importlib

    from legato.tools._tool import Tool

    target: Any = importlib.import_module(ref.module)
    for part in ref.qualname.split("."):
        target = getattr(target, part)
    # `@tool` leaves a `Tool` under the function's name; the function is inside it
    return target.function if isinstance(target, Tool) else target


def _serve(conn: Connection) -> None:
    """A worker's main loop: one call at a time until the parent closes the pipe."""
    import pickle

    os.setsid()  # its own process group, killed with it
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the run to handle
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            ref, kwargs = pickle.loads(payload)
            reply = ("ok", _resolve(ref)(**kwargs))
        except BaseException as exc:  # the tool's own error goes back to the run
            reply = ("error", exc)
        try:
            data = pickle.dumps(reply)
            if reply[0] == "error":
                pickle.loads(data)  # some exceptions pickle but cannot be rebuilt
        except Exception as exc:
            what = "result" if reply[0] == "ok" else f"error ({type(reply[1]).__name__})"
            data = pickle.dumps(("unpicklable", f"its {what} cannot be pickled: {exc}"))
        conn.send_bytes(data)


class _Worker:
    __slots__ = ("conn", "process")

    def __init__(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe(duplex=True)
        self.process: BaseProcess = context.Process(
            target=_serve, args=(child,), name="legato-tool-worker", daemon=True
        )
        self.process.start()
        child.close()
        self.conn: Connection = parent

    def kill(self) -> None:
        pid = self.process.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.process.join(5)
        self.conn.close()
        with contextlib.suppress(ValueError):
            self.process.close()


class _Pool:
    """Warm workers of this interpreter (a forked child starts its own)."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def take(self) -> _Worker | None:
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                worker = self._idle.pop()
                if worker.process.is_alive():
                    return worker
                worker.kill()
        return None

    def give_back(self, worker: _Worker) -> None:
        with self._lock:
            if self._pid == os.getpid() and len(self._idle) < _IDLE_WORKERS:
                self._idle.append(worker)
                return
        worker.kill()


_POOL = _Pool()


async def call_in_process(name: str, function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Run `function(**kwargs)` in a worker process; kill the worker if the call is abandoned.

    Raises:
        ToolIsolationError: the arguments or the result cannot cross by value, or the worker
            died (killed by the OOM killer, `os._exit`, a crash).
    """
    import pickle

    try:
        payload = pickle.dumps((_ref(function), kwargs))
    except Exception as exc:
        msg = f'tool {name!r} (isolation="process"): its arguments cannot be pickled: {exc}'
        raise ToolIsolationError(msg) from exc
    worker = _POOL.take() or await _spawn()
    finished = False
    try:
        worker.conn.send_bytes(payload)
        reply = await _reply(worker)
        finished = True
    finally:
        if not finished:
            worker.kill()  # cancelled, timed out, or the worker died: nothing more may happen
    _POOL.give_back(worker)
    kind, value = reply
    if kind == "ok":
        return value
    if kind == "error":
        raise value
    msg = f'tool {name!r} (isolation="process"): {value}'
    raise ToolIsolationError(msg)


async def _spawn() -> _Worker:
    """A new worker; one still starting when the call is abandoned goes to the pool."""
    starting = asyncio.ensure_future(asyncio.to_thread(_Worker))
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:

        def keep(done: asyncio.Future[_Worker]) -> None:
            if not done.cancelled() and done.exception() is None:
                _POOL.give_back(done.result())

        starting.add_done_callback(keep)
        raise


async def _reply(worker: _Worker) -> tuple[str, Any]:
    import pickle

    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    fds = [worker.conn.fileno(), worker.process.sentinel]
    for fd in fds:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        for fd in fds:
            loop.remove_reader(fd)
    if worker.conn.poll():
        with contextlib.suppress(EOFError, OSError):
            reply: tuple[str, Any] = pickle.loads(worker.conn.recv_bytes())
            return reply
    worker.process.join(5)
    msg = f"the worker process died (exit code {worker.process.exitcode}) before answering"
    raise ToolIsolationError(msg)


# -- thread mode ---------------------------------------------------------------------------------


async def call_in_thread(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """`function(**kwargs)` on a fresh daemon thread, in a copy of the caller's context.

    Like `asyncio.to_thread`, except that an abandoned call never delays interpreter exit.
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

    def work() -> None:
        try:
            result = context.run(function, **kwargs)
        except BaseException as exc:
            outcome: tuple[bool, Any] = (False, exc)
        else:
            outcome = (True, result)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, name="legato-tool", daemon=True).start()
    return await future
