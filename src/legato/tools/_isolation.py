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
- Workers are fresh interpreters (`sys.executable`, never a `fork` of a threaded process)
  given this interpreter's import path, and kept warm: a worker that finished a call is
  reused by the next one; only a killed one is replaced. Each worker leads its own process
  group. A tool defined in the script being run (`__main__`) is found by loading that
  script again under another name, so its top level must be guarded by
  `if __name__ == "__main__":`, as for `multiprocessing`.
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
import queue
import signal
import struct
import sys
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from legato._values import value_class
from legato.exceptions import ToolDefinitionError, ToolIsolationError

__all__ = [
    "Isolation",
    "call_in_process",
    "call_in_thread",
    "check_isolatable",
    "close_workers",
    "serve_worker",
]

Isolation: TypeAlias = Literal["thread", "process"]
"""`thread`: a sync function runs on a daemon thread (cannot be stopped; a cancelled call's
effect may still land). `process`: it runs in a worker process that is killed on
cancellation or timeout."""

_IDLE_WORKERS = 4
"""Warm workers kept for reuse per interpreter."""


# -- definition-time checks --------------------------------------------------------------------


@value_class(kw_only=False)
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

_BOOT = """
import os, pickle, struct, sys
r, w = int(sys.argv[1]), int(sys.argv[2])
def read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(r, n - len(data))
        if not chunk:
            raise SystemExit(0)
        data += chunk
    return data
path, main = pickle.loads(read(struct.unpack(">Q", read(8))[0]))
sys.path[:] = path
from legato.tools._isolation import serve_worker
serve_worker(r, w, main)
"""
"""A worker's first lines: take the parent's import path, then serve calls."""

_HEADER = struct.Struct(">Q")
"""Each message on the pipes: its length (8 bytes, big-endian), then a pickle."""


def _main_module() -> tuple[str, str] | None:
    """How a worker can load this interpreter's `__main__` (for tools defined in a script)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None):
        return ("module", str(spec.name))
    path = getattr(main, "__file__", None)
    return ("path", str(path)) if path else None


def _resolve(ref: _FunctionRef, main: tuple[str, str] | None) -> Callable[..., Any]:
    import importlib
    import importlib.util

    from legato.tools._tool import Tool

    target: Any
    if ref.module != "__main__":
        target = importlib.import_module(ref.module)
    elif main is not None and main[0] == "module":
        target = importlib.import_module(main[1])
    elif main is not None and "__legato_main__" in sys.modules:
        target = sys.modules["__legato_main__"]
    elif main is not None:  # the parent's script, run again under another name (guarded code)
        spec = importlib.util.spec_from_file_location("__legato_main__", main[1])
        if spec is None or spec.loader is None:
            msg = f"cannot load {main[1]}"
            raise ImportError(msg)
        target = importlib.util.module_from_spec(spec)
        sys.modules["__legato_main__"] = target
        spec.loader.exec_module(target)
    else:
        msg = "the tool is defined in __main__ of an interactive session"
        raise ImportError(msg)
    for part in ref.qualname.split("."):
        target = getattr(target, part)
    # `@tool` leaves a `Tool` under the function's name; the function is inside it
    return target.function if isinstance(target, Tool) else target


def _read_message(fd: int) -> bytes | None:
    """One message from a blocking pipe; None at its end."""
    data = b""
    need = _HEADER.size
    size = None
    while True:
        while len(data) < need:
            chunk = os.read(fd, need - len(data))
            if not chunk:
                return None
            data += chunk
        if size is not None:
            return data[_HEADER.size :]
        size = _HEADER.unpack(data)[0]
        need = _HEADER.size + size


def _write_message(fd: int, data: bytes) -> None:
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def serve_worker(requests: int, replies: int, main: tuple[str, str] | None) -> None:
    """A worker's main loop (its entry point): one call at a time until the parent closes its pipe."""
    import pickle

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the run to handle
    while (payload := _read_message(requests)) is not None:
        try:
            ref, kwargs = pickle.loads(payload)
            reply = ("ok", _resolve(ref, main)(**kwargs))
        except BaseException as exc:  # the tool's own error goes back to the run
            reply = ("error", exc)
        try:
            data = pickle.dumps(reply)
            if reply[0] == "error":
                pickle.loads(data)  # some exceptions pickle but cannot be rebuilt
        except Exception as exc:
            what = "result" if reply[0] == "ok" else f"error ({type(reply[1]).__name__})"
            data = pickle.dumps(("unpicklable", f"its {what} cannot be pickled: {exc}"))
        _write_message(replies, data)


class _Worker:
    """A worker process leading its own process group, with a request and a reply pipe."""

    __slots__ = ("process", "replies", "requests")

    def __init__(self) -> None:
        import pickle
        import subprocess

        their_requests, self.requests = os.pipe()
        self.replies, their_replies = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(their_requests), str(their_replies)],
                stdin=subprocess.DEVNULL,
                pass_fds=(their_requests, their_replies),
                start_new_session=True,  # its own group, killed with it
            )
        finally:
            os.close(their_requests)
            os.close(their_replies)
        _write_message(self.requests, pickle.dumps((list(sys.path), _main_module())))

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            self.process.kill()
        self.process.wait()
        for fd in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                os.close(fd)


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
                if worker.alive():
                    return worker
                worker.kill()
        return None

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            mine = self._pid == os.getpid()
        if mine:
            for worker in idle:
                worker.kill()

    def give_back(self, worker: _Worker) -> None:
        with self._lock:
            if self._pid == os.getpid() and len(self._idle) < _IDLE_WORKERS:
                self._idle.append(worker)
                return
        worker.kill()


_POOL = _Pool()


def close_workers() -> None:
    """Stop the idle worker processes (busy ones end with their calls; new calls start more).

    Idle workers also end on their own when this interpreter exits.
    """
    _POOL.close()


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
        _write_message(worker.requests, payload)
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
    """The worker's answer, read without blocking the loop; its end means it died."""
    import pickle

    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes | None] = loop.create_future()
    buffer = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(worker.replies, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            if not done.done():
                done.set_result(None)
            return
        buffer.extend(chunk)
        if len(buffer) >= _HEADER.size:
            size = _HEADER.unpack_from(buffer)[0]
            if len(buffer) >= _HEADER.size + size and not done.done():
                done.set_result(bytes(buffer[_HEADER.size : _HEADER.size + size]))

    os.set_blocking(worker.replies, False)
    loop.add_reader(worker.replies, readable)
    try:
        data = await done
    finally:
        loop.remove_reader(worker.replies)
    if data is not None:
        reply: tuple[str, Any] = pickle.loads(data)
        return reply
    code = worker.process.wait()
    msg = f"the worker process died (exit code {code}) before answering"
    raise ToolIsolationError(msg)


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
