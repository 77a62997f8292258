"""Process isolation: each call runs in a child forked from a pre-imported worker parent.

Starting a fresh interpreter and importing legato takes 0.4-1.1 s on two busy cores, longer
than many timeouts. So calls of tools with `isolation="process"` are forked from a *zygote*:
one long-lived worker parent per interpreter, a fresh interpreter (`sys.executable`, never a
`fork` of the threaded run process) that has imported legato and, before its first call of
them, the tools' modules. Each call is one `fork()` of it: the child starts with everything
imported, leads its own process group, runs the function (a coroutine function on an event
loop of its own), writes its answer and exits. The zygote keeps one child forked ahead (a
spare waiting for its call's arguments), so a call usually only hands its arguments over.
A call starts in milliseconds (see `bench/isolation_start.py`). What runs in the worker
processes is `legato.tools._worker`.

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
import socket
import sys
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legato.exceptions import ToolIsolationError
from legato.tools._worker import (
    BOOT,
    HEADER,
    Inbox,
    function_ref,
    send,
    write_message,
)
from legato.tools._worker import kill_group as _kill_group

__all__ = [
    "START_LIMIT",
    "call_in_process",
    "close_workers",
    "timeout_from_first_line",
    "zygote_info",
]

START_LIMIT = 60.0
"""Seconds a call may take to reach its tool's first line (the zygote's own start included)."""

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


# -- the run's side ----------------------------------------------------------------------------


def _main_module() -> tuple[str, str] | None:
    """How a zygote can load this interpreter's `__main__` (for tools defined in a script)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None):
        return ("module", str(spec.name))
    path = getattr(main, "__file__", None)
    return ("path", str(path)) if path else None


@dataclass(frozen=True, slots=True)
class _Spare:
    """A child forked ahead of its call, waiting on its request pipe."""

    pid: int
    requests: int
    """The write end of its request pipe (the call's arguments go there)."""
    replies: int
    """The read end of its reply pipe."""
    modules: frozenset[str]
    """The tool modules the zygote had imported when it forked this child."""


class _Zygote:
    """This interpreter's worker parent: started on first use, restarted when it died.

    It keeps one spare child forked ahead, so that a call only has to hand its arguments
    to a process that is already there (one wake-up, no fork on the way to the tool).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None
        self._control: socket.socket | None = None
        self._inbox: Inbox | None = None
        self._pid = 0
        self._modules: set[str] = set()
        self._spare: _Spare | None = None
        self._refilling = False
        self._to_reap: list[int] = []
        self.starts = 0
        """How many zygotes this interpreter started (a restart counts)."""

    def take_spare(self, module: str) -> _Spare | None:
        """The spare child, if there is one that has `module` imported (it is then no spare).

        Never waits: while another thread holds the zygote (starting it, forking), None.
        """
        if not self._lock.acquire(blocking=False):
            return None
        try:
            spare, self._spare = self._spare, None
            if spare is None or self._pid != os.getpid():
                return None
            alive = self._process is not None and self._process.poll() is None
        finally:
            self._lock.release()
        if alive and module in spare.modules:
            return spare
        self.drop(spare)  # forked before `module` was imported: the next spare will have it
        return None

    def refill(self) -> None:
        """Fork the next spare, on a thread of its own (never on the caller's way)."""
        if not self._lock.acquire(blocking=False):
            return  # busy: a later call refills
        try:
            if (
                self._spare is not None
                or self._refilling
                or self._control is None
                or self._pid != os.getpid()
            ):
                return
            self._refilling = True
        finally:
            self._lock.release()
        threading.Thread(target=self._make_spare, name="legato-zygote-spare", daemon=True).start()

    def _make_spare(self) -> None:
        try:
            # a spare is an optimisation: if it cannot be made, the next call forks its own
            with contextlib.suppress(Exception):
                spare = self.fork(None, start=False)
                with self._lock:
                    if self._spare is None and self._pid == os.getpid():
                        self._spare = spare
                        return
                self.drop(spare)
        finally:
            with self._lock:
                self._refilling = False

    def drop(self, spare: _Spare) -> None:
        """End a spare that will not be used (closing its request pipe ends it)."""
        os.close(spare.requests)
        os.close(spare.replies)
        self.reap(spare.pid)

    def warm(self, module: str) -> bool:
        """Whether a call of a tool from `module` can be forked at once (no start, no import)."""
        process = self._process  # read once: another thread may discard it meanwhile
        return (
            process is not None
            and self._pid == os.getpid()
            and module in self._modules
            and process.poll() is None
        )

    def fork(self, module: str | None, *, start: bool = True) -> _Spare:
        """A child waiting for its call (blocks while a zygote starts or imports `module`).

        With a `module`, the zygote imports it first; the child has every module the zygote
        had imported by then. `start=False`: only from a zygote already running.
        """
        import pickle

        request = pickle.dumps(("fork", module))
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        made = False
        try:
            with self._lock:
                if not start and (self._control is None or self._pid != os.getpid()):
                    msg = "no worker parent (zygote) is running"
                    raise ToolIsolationError(msg)
                control, inbox = self._running()
                try:
                    send(control, request, (requests_r, replies_w))
                except OSError:  # it was dead: it never saw the request; start another, once
                    self._discard()
                    control, inbox = self._running()
                    send(control, request, (requests_r, replies_w))
                try:
                    answer = inbox.next()
                except OSError:
                    answer = None
                if answer is None:  # it died while forking: a child it made died with it
                    self._discard()
                    msg = "the worker parent (zygote) died while forking the call"
                    raise ToolIsolationError(msg)
                if module is not None:
                    self._modules.add(module)
                self._send_reaps()
                child = _Spare(
                    pid=pickle.loads(answer),
                    requests=requests_w,
                    replies=replies_r,
                    modules=frozenset(self._modules),
                )
                made = True
                return child
        finally:
            os.close(requests_r)
            os.close(replies_w)
            if not made:
                os.close(requests_w)
                os.close(replies_r)

    def reap(self, pid: int) -> None:
        """Let the zygote collect a call's child once the run is done with its group.

        Never waits for the zygote: while another thread holds it, the pid is queued and
        sent by the next holder.
        """
        self._to_reap.append(pid)
        if self._lock.acquire(blocking=False):
            try:
                self._send_reaps()
            finally:
                self._lock.release()

    def _send_reaps(self) -> None:
        """Send the queued reaps (the caller holds the lock)."""
        import pickle

        control = self._control
        while self._to_reap:
            pid = self._to_reap.pop()
            if control is not None and self._pid == os.getpid():
                with contextlib.suppress(OSError):
                    send(control, pickle.dumps(("reap", pid)))

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

    def _running(self) -> tuple[socket.socket, Inbox]:
        if self._pid != os.getpid():  # a forked child of the run has no zygote of its own yet
            self._process, self._control, self._inbox, self._modules = None, None, None, set()
            self._spare = None
        control, inbox = self._control, self._inbox
        if control is None or inbox is None or self._process.poll() is not None:
            self._discard()
            return self._start()
        return control, inbox

    def _start(self) -> tuple[socket.socket, Inbox]:
        import pickle
        import subprocess

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", BOOT, str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # its own session: a Ctrl-C at the terminal is the run's
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        inbox = Inbox(ours)
        self._control, self._inbox, self._pid = ours, inbox, os.getpid()
        self._modules = set()
        self.starts += 1
        send(ours, pickle.dumps((list(sys.path), _main_module())))
        return ours, inbox

    def _discard(self) -> None:
        control, process, spare = self._control, self._process, self._spare
        self._control = self._inbox = self._process = self._spare = None
        self._modules = set()
        if self._pid != os.getpid():
            return
        if spare is not None:  # it ends with the zygote
            os.close(spare.requests)
            os.close(spare.replies)
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
    ref = function_ref(function)
    try:
        payload = pickle.dumps((ref, kwargs))
    except Exception as exc:
        msg = f'tool {name!r} (isolation="process"): its arguments cannot be pickled: {exc}'
        raise ToolIsolationError(msg) from exc
    try:
        reply = None
        spare = _ZYGOTE.take_spare(ref.module)
        if spare is not None:
            reply = await _on_spare(spare, payload, clock)
        if reply is None:  # no spare, or it died before the function started: fork one
            reply = await _on_new_child(ref.module, payload, clock)
    finally:
        _ZYGOTE.refill()
    kind, value = reply
    if kind == "ok":
        return value
    if kind == "error":
        raise value
    msg = f'tool {name!r} (isolation="process"): {value}'
    raise ToolIsolationError(msg)


async def _on_spare(
    spare: _Spare, payload: bytes, clock: tuple[asyncio.Timeout, float] | None
) -> tuple[str, Any] | None:
    """Hand the call to a waiting child; None when it died before the function started."""
    try:
        write_message(spare.requests, payload)
    except OSError:
        pass  # it is gone: the reply pipe ends at once
    finally:
        os.close(spare.requests)
    return await _answer(spare.pid, spare.replies, clock)


async def _on_new_child(
    module: str, payload: bytes, clock: tuple[asyncio.Timeout, float] | None
) -> tuple[str, Any]:
    """Fork a child for the call (the zygote imports `module` first) and hand it the call."""
    reply = await _on_spare(await _fork(module), payload, clock)
    if reply is None:
        msg = "the worker process died before answering"
        raise ToolIsolationError(msg)
    return reply


async def _answer(
    pid: int, replies: int, clock: tuple[asyncio.Timeout, float] | None
) -> tuple[str, Any] | None:
    """The child's answer; its group killed if the call is abandoned or the child died.

    None when the child died before the function started: the call never ran.
    """
    finished = False
    try:
        reader = _Reader(replies)
        try:
            await reader.started()
        except ToolIsolationError:
            return None
        _reschedule(clock, None)  # from the tool's first line: its own timeout
        reply = await reader.reply()
        finished = True
    finally:
        if not finished:  # cancelled, timed out, or it died: nothing more may happen
            _kill_group(pid, wait=_KILL_WAIT)
        _ZYGOTE.reap(pid)
        os.close(replies)
    return reply


async def _fork(module: str) -> _Spare:
    """A child waiting for the call: at once when the zygote is warm, else off the loop.

    A call abandoned meanwhile never hands its arguments over: the child ends unused.
    """
    if _ZYGOTE.warm(module):
        return _ZYGOTE.fork(module)
    forking = asyncio.ensure_future(asyncio.to_thread(_ZYGOTE.fork, module))
    try:
        return await asyncio.shield(forking)
    except asyncio.CancelledError:

        def abandon(done: asyncio.Future[_Spare]) -> None:
            if not done.cancelled() and done.exception() is None:
                _ZYGOTE.drop(done.result())

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
            if len(self._buffer) < HEADER.size:
                return False
            return len(self._buffer) >= HEADER.size + HEADER.unpack_from(self._buffer)[0]

        await self._until(complete)
        reply: tuple[str, Any] = pickle.loads(bytes(self._buffer[HEADER.size :]))
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
