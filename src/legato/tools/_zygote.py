"""Process isolation: each call runs in a child forked from a pre-imported worker parent.

Starting a fresh interpreter and importing legato takes 0.4-1.1 s on two busy cores, longer
than many timeouts. So calls of tools with `isolation="process"` are forked from a *zygote*:
one long-lived worker parent per interpreter, a fresh interpreter (`sys.executable`, never a
`fork` of the threaded run process) that has imported legato and, before its first call of
them, the tools' modules. Each call is one `fork()` of it: the child starts with everything
imported, leads its own process group, runs the function (a coroutine function on an event
loop of its own), writes its answer and exits. A call starts in milliseconds (see
`bench/isolation_start.py`).

- **Killed whole.** A cancelled or timed-out call's process group is killed with `SIGKILL`:
  what the tool had not done yet never happens, in the threads and processes it started as
  well. A group's leader is reaped only after the run is done with it, so its id cannot be
  reused by another process while it may still be killed.
- **Timeouts count the tool's own work.** The child says when the function is about to run;
  a tool's `timeout` starts then (see `timeout_from_first_line`), so the time a worker
  takes to start (the zygote's own start on the first call, a module's first import) never
  eats it. Starting is bounded separately (`START_LIMIT`).
- **Restarted when it dies.** A zygote that crashed or was killed is started again for the
  next call. No call outlives its zygote (`PR_SET_PDEATHSIG`): the calls running from a
  zygote that died fail with `ToolIsolationError`, and a call is never forked twice. When
  the run's process ends, or `close_workers()` is called, the zygote sees the end of its
  control socket, kills the calls still running and exits.
- **Single-threaded.** `fork()` copies only the calling thread: a tool module that starts
  threads when it is imported leaves them behind in the zygote (and its children see their
  locks as they were). Such a module's tools should start their threads on first call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legato.exceptions import ToolIsolationError

__all__ = [
    "START_LIMIT",
    "call_in_process",
    "close_workers",
    "serve_zygote",
    "timeout_from_first_line",
    "zygote_info",
]

START_LIMIT = 60.0
"""Seconds a call may take to reach its tool's first line (the zygote's own start included)."""

_HEADER = struct.Struct(">Q")
"""Each message: its length (8 bytes, big-endian), then a pickle."""
_STARTED = b"S"
"""What a call's child writes on its reply pipe just before the function runs."""


@dataclass(frozen=True, slots=True)
class _FunctionRef:
    """How a worker finds the function: its module and qualified name."""

    module: str
    qualname: str


def _ref(function: Callable[..., Any]) -> _FunctionRef:
    return _FunctionRef(module=function.__module__, qualname=function.__qualname__)


# -- the timeout clock -------------------------------------------------------------------------

_CLOCK: contextvars.ContextVar[tuple[asyncio.Timeout, float] | None] = contextvars.ContextVar(
    "legato_tool_clock", default=None
)


@contextlib.contextmanager
def timeout_from_first_line(clock: asyncio.Timeout, seconds: float | None) -> Generator[None]:
    """Let an isolated call inside the block count `clock`'s `seconds` from its first line.

    `clock` is the `asyncio.timeout` around the call. While the worker starts it is pushed
    out to `START_LIMIT`; when the tool's first line is reached it is set to `seconds` from
    then. Calls that run in this process are not affected.
    """
    if seconds is None:
        yield
        return
    token = _CLOCK.set((clock, seconds))
    try:
        yield
    finally:
        _CLOCK.reset(token)


def _reschedule(clock: tuple[asyncio.Timeout, float] | None, seconds: float | None) -> None:
    if clock is None:
        return
    loop = asyncio.get_running_loop()
    with contextlib.suppress(RuntimeError):  # already expiring: it stands
        clock[0].reschedule(loop.time() + (clock[1] if seconds is None else seconds))


# -- the zygote's side -------------------------------------------------------------------------

_BOOT = """
import os, pickle, socket, struct, sys
control = socket.socket(fileno=int(sys.argv[1]))
def read(n):
    data = b""
    while len(data) < n:
        chunk = control.recv(n - len(data))
        if not chunk:
            raise SystemExit(0)
        data += chunk
    return data
path, main = pickle.loads(read(struct.unpack(">Q", read(8))[0]))
sys.path[:] = path
from legato.tools._zygote import serve_zygote
serve_zygote(control, main)
"""
"""A zygote's first lines: take the run's import path, then serve."""


class _Inbox:
    """Framed messages from the control socket, with the descriptors that came with them."""

    def __init__(self, control: socket.socket) -> None:
        self._control = control
        self._buffer = bytearray()
        self.fds: list[int] = []

    def next(self) -> bytes | None:
        """The next message (blocking); None at the end of the socket."""
        while True:
            if len(self._buffer) >= _HEADER.size:
                size = _HEADER.unpack_from(self._buffer)[0]
                if len(self._buffer) >= _HEADER.size + size:
                    message = bytes(self._buffer[_HEADER.size : _HEADER.size + size])
                    del self._buffer[: _HEADER.size + size]
                    return message
            data, fds, _, _ = socket.recv_fds(self._control, 1 << 16, 4)
            if not data:
                return None
            self._buffer.extend(data)
            self.fds.extend(fds)


def serve_zygote(control: socket.socket, main: tuple[str, str] | None) -> None:
    """A zygote's main loop (its entry point): fork one child per call until the run ends."""
    import gc
    import importlib
    import pickle

    importlib.import_module("legato.tools")  # imported once here, inherited by every call
    prctl = _prctl()

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the run to handle
    inbox = _Inbox(control)
    children: set[int] = set()
    unreaped: set[int] = set()

    def on_child_exit(signum: int, frame: object) -> None:
        _collect(unreaped)

    signal.signal(signal.SIGCHLD, on_child_exit)
    gc.freeze()  # what is imported now stays shared with the children (no copy on collect)
    try:
        while (message := inbox.next()) is not None:
            request = pickle.loads(message)
            if request[0] == "reap":
                children.discard(request[1])
                unreaped.add(request[1])
                _collect(unreaped)
                continue
            _, module, payload = request
            _preload(module, main)
            reply_fd = inbox.fds.pop(0)
            zygote = os.getpid()
            pid = os.fork()
            if pid == 0:
                _die_with(zygote, prctl)
                _child(control, reply_fd, payload, main)
            os.close(reply_fd)
            with contextlib.suppress(OSError):  # the child may be gone already
                os.setpgid(pid, pid)
            children.add(pid)
            _send(control, pickle.dumps(pid))
    finally:
        for pid in children:  # the run is gone: so are its calls
            _kill_group(pid)


def _prctl() -> Callable[..., int] | None:
    """The C library's `prctl`, looked up once in the zygote (None where there is none)."""
    import ctypes

    try:
        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return function


def _die_with(zygote: int, prctl: Callable[..., int] | None) -> None:
    """In a call's child: be killed when the zygote dies (and end now if it already has).

    So no call outlives the zygote it came from: a run never has a call running whose
    process it does not know (a zygote that dies while forking cannot say the child's pid).
    """
    if prctl is not None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != zygote:
        os._exit(1)


def _collect(unreaped: set[int]) -> None:
    """Reap the calls the run is done with that have exited (never wait for one)."""
    for pid in list(unreaped):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            unreaped.discard(pid)


def _preload(module: str, main: tuple[str, str] | None) -> None:
    """Import a tool's module in the zygote once, so its calls start with it imported."""
    import importlib

    if module == "__main__":  # the run's script (the zygote's own `__main__` is its boot)
        loaded = main[1] if main is not None and main[0] == "module" else "__legato_main__"
    else:
        loaded = module
    if loaded in sys.modules:
        return
    with contextlib.suppress(Exception):  # the call reports the error from its own child
        if module == "__main__":
            _main_target(main)
        else:
            importlib.import_module(module)
    import gc

    gc.freeze()


def _child(control: socket.socket, reply_fd: int, payload: bytes, main: Any) -> None:
    """A call's process: run the function, write its answer, exit (never returns)."""
    import pickle

    code = 0
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control.close()
        reply: tuple[str, Any]
        started = False
        try:
            ref, kwargs = pickle.loads(payload)
            function = _resolve(ref, main)
            os.write(reply_fd, _STARTED)
            started = True
            result = function(**kwargs)
            if asyncio.iscoroutine(result):
                result = asyncio.run(result)
            reply = ("ok", result)
        except BaseException as exc:  # the tool's own error goes back to the run
            reply = ("error", exc)
        if not started:  # the answer always follows the mark
            os.write(reply_fd, _STARTED)
        _write_message(reply_fd, _pickle_reply(reply))
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _pickle_reply(reply: tuple[str, Any]) -> bytes:
    import pickle

    try:
        data = pickle.dumps(reply)
        if reply[0] == "error":
            pickle.loads(data)  # some exceptions pickle but cannot be rebuilt
    except Exception as exc:
        what = "result" if reply[0] == "ok" else f"error ({type(reply[1]).__name__})"
        data = pickle.dumps(("unpicklable", f"its {what} cannot be pickled: {exc}"))
    return data


def _main_target(main: tuple[str, str] | None) -> Any:
    import importlib
    import importlib.util

    if main is not None and main[0] == "module":
        return importlib.import_module(main[1])
    if main is not None and "__legato_main__" in sys.modules:
        return sys.modules["__legato_main__"]
    if main is not None:  # the run's script, run again under another name (guarded code)
        spec = importlib.util.spec_from_file_location("__legato_main__", main[1])
        if spec is None or spec.loader is None:
            msg = f"cannot load {main[1]}"
            raise ImportError(msg)
        target = importlib.util.module_from_spec(spec)
        sys.modules["__legato_main__"] = target
        spec.loader.exec_module(target)
        return target
    msg = "the tool is defined in __main__ of an interactive session"
    raise ImportError(msg)


def _resolve(ref: _FunctionRef, main: tuple[str, str] | None) -> Callable[..., Any]:
    import importlib

    from legato.tools._tool import Tool

    target: Any
    if ref.module != "__main__":
        target = importlib.import_module(ref.module)
    else:
        target = _main_target(main)
    for part in ref.qualname.split("."):
        target = getattr(target, part)
    # `@tool` leaves a `Tool` under the function's name; the function is inside it
    return target.function if isinstance(target, Tool) else target


def _write_message(fd: int, data: bytes) -> None:
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _send(control: socket.socket, data: bytes, fd: int | None = None) -> None:
    message = _HEADER.pack(len(data)) + data
    sent = socket.send_fds(control, [message], [fd]) if fd is not None else 0
    control.sendall(message[sent:])


def _kill_group(pid: int, *, wait: float = 0.0) -> None:
    """SIGKILL a call's whole process group (it leads its own); wait up to `wait` s for its end.

    The leader is not reaped until the run says so, so `pid` cannot name another process.
    """
    watch = None
    if wait:
        with contextlib.suppress(OSError):
            watch = os.pidfd_open(pid)
    try:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        if watch is not None:
            import select

            select.select([watch], [], [], wait)  # readable once the process has ended
    finally:
        if watch is not None:
            os.close(watch)


# -- the run's side ----------------------------------------------------------------------------


def _main_module() -> tuple[str, str] | None:
    """How a zygote can load this interpreter's `__main__` (for tools defined in a script)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None):
        return ("module", str(spec.name))
    path = getattr(main, "__file__", None)
    return ("path", str(path)) if path else None


class _Zygote:
    """This interpreter's worker parent: started on first use, restarted when it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None
        self._control: socket.socket | None = None
        self._inbox: _Inbox | None = None
        self._pid = 0
        self._modules: set[str] = set()
        self.starts = 0
        """How many zygotes this interpreter started (a restart counts)."""

    def warm(self, module: str) -> bool:
        """Whether a call of a tool from `module` can be forked at once (no start, no import)."""
        return (
            self._control is not None
            and self._pid == os.getpid()
            and module in self._modules
            and self._process.poll() is None
        )

    def spawn(self, module: str, payload: bytes, reply_fd: int) -> int:
        """Fork a call's child; its pid (blocks while a zygote starts or imports `module`)."""
        import pickle

        request = pickle.dumps(("spawn", module, payload))
        with self._lock:
            control, inbox = self._running()
            try:
                _send(control, request, reply_fd)
            except OSError:  # it was dead: it never saw the call; start another, once
                self._discard()
                control, inbox = self._running()
                _send(control, request, reply_fd)
            try:
                answer = inbox.next()
            except OSError:
                answer = None
            if answer is None:
                # It saw the call and died: a child it forked died with it (never retried,
                # so an irreversible call runs at most once).
                self._discard()
                msg = "the worker parent (zygote) died while forking the call"
                raise ToolIsolationError(msg)
            self._modules.add(module)
            pid: int = pickle.loads(answer)
            return pid

    def reap(self, pid: int) -> None:
        """Let the zygote collect a call's child once the run is done with its group."""
        import pickle

        with self._lock:
            control = self._control
            if control is None or self._pid != os.getpid():
                return
            with contextlib.suppress(OSError):
                _send(control, pickle.dumps(("reap", pid)))

    def close(self) -> None:
        """Stop the zygote (it kills the calls still running) and wait for it."""
        with self._lock:
            self._discard()

    def info(self) -> tuple[int, int] | None:
        """The running zygote's pid and resident memory in KiB (None: none running)."""
        with self._lock:
            process = self._process
            if process is None or self._pid != os.getpid() or process.poll() is not None:
                return None
            pid: int = process.pid
        rss = 0
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return pid, rss

    def _running(self) -> tuple[socket.socket, _Inbox]:
        if self._pid != os.getpid():  # a forked child of the run has no zygote of its own yet
            self._process, self._control, self._inbox, self._modules = None, None, None, set()
        control, inbox = self._control, self._inbox
        if control is None or inbox is None or self._process.poll() is not None:
            self._discard()
            return self._start()
        return control, inbox

    def _start(self) -> tuple[socket.socket, _Inbox]:
        import pickle
        import subprocess

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # its own session: a Ctrl-C at the terminal is the run's
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        inbox = _Inbox(ours)
        self._control, self._inbox, self._pid = ours, inbox, os.getpid()
        self._modules = set()
        self.starts += 1
        _send(ours, pickle.dumps((list(sys.path), _main_module())))
        return ours, inbox

    def _discard(self) -> None:
        control, process = self._control, self._process
        self._control = self._inbox = self._process = None
        self._modules = set()
        if self._pid != os.getpid():
            return
        if control is not None:
            control.close()  # the zygote sees the end, kills its calls and exits
        if process is not None:
            try:
                process.wait(timeout=5)
            except Exception:
                process.kill()
                process.wait()


_ZYGOTE = _Zygote()


_KILL_WAIT = 5.0
"""Seconds an abandoned call waits for its killed process to end (the kernel's teardown)."""


def close_workers() -> None:
    """Stop the worker parent (zygote); calls still running are killed; new calls start one."""
    _ZYGOTE.close()


def zygote_info() -> tuple[int, int] | None:
    """The zygote's pid and resident memory in KiB, or None when none is running."""
    return _ZYGOTE.info()


async def call_in_process(name: str, function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Run `function(**kwargs)` in a child forked from the zygote; kill its group if abandoned.

    A coroutine function runs on an event loop of the child's own.

    Raises:
        ToolIsolationError: the arguments or the result cannot cross by value, or the call's
            process died (killed by the OOM killer, `os._exit`, a crash).
    """
    import pickle

    clock = _CLOCK.get()
    _reschedule(clock, START_LIMIT)  # starting the worker is not the tool's work
    ref = _ref(function)
    try:
        payload = pickle.dumps((ref, kwargs))
    except Exception as exc:
        msg = f'tool {name!r} (isolation="process"): its arguments cannot be pickled: {exc}'
        raise ToolIsolationError(msg) from exc
    replies, theirs = os.pipe()
    try:
        pid = await _fork(ref.module, payload, theirs)
        finished = False
        try:
            reader = _Reader(replies)
            await reader.started()
            _reschedule(clock, None)  # from the tool's first line: its own timeout
            reply = await reader.reply()
            finished = True
        finally:
            if not finished:  # cancelled, timed out, or it died: nothing more may happen
                _kill_group(pid, wait=_KILL_WAIT)
            _ZYGOTE.reap(pid)
    finally:
        os.close(replies)
    kind, value = reply
    if kind == "ok":
        return value
    if kind == "error":
        raise value
    msg = f'tool {name!r} (isolation="process"): {value}'
    raise ToolIsolationError(msg)


async def _fork(module: str, payload: bytes, reply_fd: int) -> int:
    """Fork the call's child: at once when the zygote is warm, else off the loop."""
    if _ZYGOTE.warm(module):
        try:
            return _ZYGOTE.spawn(module, payload, reply_fd)
        finally:
            os.close(reply_fd)
    forking = asyncio.ensure_future(asyncio.to_thread(_ZYGOTE.spawn, module, payload, reply_fd))
    forking.add_done_callback(lambda _: os.close(reply_fd))
    try:
        return await asyncio.shield(forking)
    except asyncio.CancelledError:

        def abandon(done: asyncio.Future[int]) -> None:  # forked after all: never let it run on
            if not done.cancelled() and done.exception() is None:
                _kill_group(done.result())
                _ZYGOTE.reap(done.result())

        forking.add_done_callback(abandon)
        raise


class _Reader:
    """A call's reply pipe, read on the loop: the started mark, then the framed answer."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        os.set_blocking(fd, False)

    async def started(self) -> None:
        await self._until(lambda: len(self._buffer) >= 1)
        del self._buffer[:1]

    async def reply(self) -> tuple[str, Any]:
        import pickle

        def complete() -> bool:
            if len(self._buffer) < _HEADER.size:
                return False
            return len(self._buffer) >= _HEADER.size + _HEADER.unpack_from(self._buffer)[0]

        await self._until(complete)
        reply: tuple[str, Any] = pickle.loads(bytes(self._buffer[_HEADER.size :]))
        return reply

    async def _until(self, ready: Callable[[], bool]) -> None:
        loop = asyncio.get_running_loop()
        while not ready():
            if self._ended:
                msg = "the worker process died before answering"
                raise ToolIsolationError(msg)
            self._waiter = waiter = loop.create_future()
            loop.add_reader(self._fd, self._readable)
            try:
                await waiter
            finally:
                loop.remove_reader(self._fd)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self._buffer.extend(chunk)
        else:
            self._ended = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
