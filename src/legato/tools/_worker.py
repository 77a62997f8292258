"""What runs in isolation's worker processes: the zygote's loop and each call's child.

The run's side (starting the zygote, handing it calls, killing them) is
`legato.tools._zygote`; this module is what the zygote imports to serve, and the framing
both sides share. A message on a pipe or on the control socket is its length (8 bytes,
big-endian) followed by a pickle.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

__all__ = [
    "BOOT",
    "HEADER",
    "STARTED",
    "FunctionRef",
    "Inbox",
    "WrapsFunction",
    "function_ref",
    "kill_group",
    "send",
    "serve_zygote",
    "write_message",
]

HEADER = struct.Struct(">Q")
"""Each message: its length (8 bytes, big-endian), then a pickle."""
STARTED = b"S"
"""What a call's child writes on its reply pipe just before the function runs."""


@dataclass(frozen=True, slots=True)
class FunctionRef:
    """How a worker finds the function: its module and qualified name."""

    module: str
    qualname: str


@runtime_checkable
class WrapsFunction(Protocol):
    """What `@tool` leaves under a function's name (a `Tool`): the function is inside it.

    The worker finds a function by its module and qualified name; when that name holds a
    wrapper of the same function, it calls the function inside. Declared here, on the
    lower side, so that the worker need not import the tools that wrap.
    """

    @property
    def function(self) -> Callable[..., Any]:
        """The wrapped function."""
        ...


def function_ref(function: Callable[..., Any]) -> FunctionRef:
    return FunctionRef(module=function.__module__, qualname=function.__qualname__)


BOOT = """
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
from legato.tools._worker import serve_zygote
serve_zygote(control, main)
"""
"""A zygote's first lines: take the run's import path, then serve."""


class Inbox:
    """Framed messages from the control socket, with the descriptors that came with them."""

    def __init__(self, control: socket.socket) -> None:
        self._control = control
        self._buffer = bytearray()
        self.fds: list[int] = []

    def next(self) -> bytes | None:
        """The next message (blocking); None at the end of the socket."""
        while True:
            if len(self._buffer) >= HEADER.size:
                size = HEADER.unpack_from(self._buffer)[0]
                if len(self._buffer) >= HEADER.size + size:
                    message = bytes(self._buffer[HEADER.size : HEADER.size + size])
                    del self._buffer[: HEADER.size + size]
                    return message
            data, fds, _, _ = socket.recv_fds(self._control, 1 << 16, 4)
            if not data:
                return None
            self._buffer.extend(data)
            self.fds.extend(fds)


def serve_zygote(control: socket.socket, main: tuple[str, str] | None) -> None:
    """A zygote's main loop (its entry point): fork one child per call until the run ends.

    Each child is forked waiting for its call's arguments on a pipe of its own, which the
    run writes once it still wants the call (or closes, and the child ends unused).
    """
    import gc
    import importlib
    import pickle

    importlib.import_module("legato.tools")  # imported once here, inherited by every call
    prctl = _prctl()

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the run to handle
    inbox = Inbox(control)
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
            _, module = request  # ("fork", module or None): a child waiting for its call
            if module is not None:
                _preload(module, main)
            request_fd, reply_fd = inbox.fds.pop(0), inbox.fds.pop(0)
            zygote = os.getpid()
            pid = os.fork()
            if pid == 0:
                _die_with(zygote, prctl)
                _child(control, (request_fd, reply_fd), main)
            os.close(request_fd)
            os.close(reply_fd)
            with contextlib.suppress(OSError):  # the child may be gone already
                os.setpgid(pid, pid)
            children.add(pid)
            send(control, pickle.dumps(pid))
    finally:
        for pid in children:  # the run is gone: so are its calls
            kill_group(pid)


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


def _child(control: socket.socket, fds: tuple[int, int], main: Any) -> None:
    """A call's process: wait for the call, run the function, answer, exit (never returns).

    It ends quietly when the run closes its request pipe without a call (an abandoned
    call, an unused spare): nothing runs that the run did not hand over.
    """
    import pickle

    request_fd, reply_fd = fds
    code = 0
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control.close()
        payload = _read_message(request_fd)
        os.close(request_fd)
        if payload is None:
            return
        reply: tuple[str, Any]
        started = False
        try:
            ref, kwargs = pickle.loads(payload)
            function = _resolve(ref, main)
            os.write(reply_fd, STARTED)
            started = True
            result = function(**kwargs)
            if asyncio.iscoroutine(result):
                result = asyncio.run(result)
            reply = ("ok", result)
        except BaseException as exc:  # the tool's own error goes back to the run
            reply = ("error", exc)
        if not started:  # the answer always follows the mark
            os.write(reply_fd, STARTED)
        write_message(reply_fd, _pickle_reply(reply))
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


def _resolve(ref: FunctionRef, main: tuple[str, str] | None) -> Callable[..., Any]:
    import importlib

    target: Any
    if ref.module != "__main__":
        target = importlib.import_module(ref.module)
    else:
        target = _main_target(main)
    for part in ref.qualname.split("."):
        target = getattr(target, part)
    # `@tool` leaves a `Tool` under the function's name; the function is inside it
    if isinstance(target, WrapsFunction) and target.function.__qualname__ == ref.qualname:
        return target.function
    return cast("Callable[..., Any]", target)


def _read_message(fd: int) -> bytes | None:
    """One framed message from a blocking pipe; None at its end."""
    data = b""
    need = HEADER.size
    size = None
    while True:
        while len(data) < need:
            chunk = os.read(fd, need - len(data))
            if not chunk:
                return None
            data += chunk
        if size is not None:
            return data[HEADER.size :]
        size = HEADER.unpack(data)[0]
        need = HEADER.size + size


def write_message(fd: int, data: bytes) -> None:
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def send(control: socket.socket, data: bytes, fds: tuple[int, ...] = ()) -> None:
    message = HEADER.pack(len(data)) + data
    sent = socket.send_fds(control, [message], list(fds)) if fds else 0
    control.sendall(message[sent:])


def kill_group(pid: int, *, wait: float = 0.0) -> None:
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
