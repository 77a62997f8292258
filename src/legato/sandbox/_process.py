"""Running one child process with a timeout, an output cap and a process-group kill.

The child starts in its own session (`start_new_session=True`), so its process group id is
its pid. Whatever happens — normal exit, timeout, too much output, cancellation of the
awaiting task — the group is sent `SIGKILL` before `execute` returns or raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

__all__ = ["CommandResult", "execute"]

_DRAIN_GRACE = 1.0
"""Seconds to keep reading after the command exited, for output still in the pipes."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandResult:
    """How a command ended and what it printed."""

    exit_code: int | None
    """The exit status; a negative number is the signal that killed it; None when legato
    killed it (timeout or output cap)."""
    stdout: str
    stderr: str
    timed_out: bool = False
    """The command ran past its timeout and was killed."""
    output_truncated: bool = False
    """The command printed more than the output cap and was killed."""
    duration: float = 0.0
    """Wall-clock seconds."""
    sandbox: str = "bwrap"
    """The sandbox it ran in: `bwrap` or `none`."""
    notes: tuple[str, ...] = ()
    """What the sandbox did about the command's changes (protected paths not applied...)."""
    refused_paths: tuple[str, ...] = ()
    """Protected paths the command changed in its layer; they were not applied."""

    @property
    def ok(self) -> bool:
        """Exited with status 0 on its own."""
        return self.exit_code == 0 and not self.timed_out and not self.output_truncated

    def render(self) -> str:
        """A compact text for a model: status line, then stdout and stderr."""
        if self.timed_out:
            status = f"killed: timed out after {self.duration:.1f}s"
        elif self.output_truncated:
            status = "killed: output limit reached (output truncated)"
        elif self.exit_code is not None and self.exit_code < 0:
            status = f"killed by signal {signal.Signals(-self.exit_code).name}"
        else:
            status = f"exit code {self.exit_code}"
        lines = [status]
        if self.stdout:
            lines += ["--- stdout ---", self.stdout.rstrip("\n")]
        if self.stderr:
            lines += ["--- stderr ---", self.stderr.rstrip("\n")]
        if self.notes:
            lines += ["--- sandbox ---", *self.notes]
        return "\n".join(lines)


class _Capture:
    """Reads both pipes without blocking, keeping at most `budget` bytes in total."""

    __slots__ = ("budget", "exceeded", "loop", "open")

    def __init__(self, loop: asyncio.AbstractEventLoop, budget: int) -> None:
        self.loop = loop
        self.budget = budget
        self.exceeded = loop.create_future()
        self.open: dict[int, tuple[bytearray, asyncio.Future[None]]] = {}

    def watch(self, fd: int) -> bytearray:
        buf = bytearray()
        os.set_blocking(fd, False)
        self.open[fd] = (buf, self.loop.create_future())
        self.loop.add_reader(fd, self._readable, fd)
        return buf

    def _readable(self, fd: int) -> None:
        buf, done = self.open[fd]
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.loop.remove_reader(fd)
            if not done.done():
                done.set_result(None)
            return
        take = min(len(chunk), self.budget)
        buf += chunk[:take]
        self.budget -= take
        if take < len(chunk) and not self.exceeded.done():
            self.exceeded.set_result(None)

    async def drained(self, grace: float) -> None:
        pending = [done for _, done in self.open.values() if not done.done()]
        if pending:
            await asyncio.wait(pending, timeout=grace)

    def close(self) -> None:
        for fd, (_, done) in self.open.items():
            self.loop.remove_reader(fd)
            done.cancel()
        self.exceeded.cancel()


def kill_group(pgid: int) -> None:
    """SIGKILL a process group; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


_STOP_GRACE = 5.0
"""Seconds a child sent its stop signal has to end its descendants before the group kill."""


async def _stop(proc: subprocess.Popen[bytes], stop_signal: int | None) -> None:
    """Ask the child to stop (when it takes a signal for that), then kill its group."""
    try:
        if stop_signal is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, stop_signal)
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.shield(asyncio.to_thread(proc.wait, _STOP_GRACE))
    finally:
        kill_group(proc.pid)


async def _exited(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the child without blocking the loop (a pidfd where the OS has one)."""
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return await asyncio.to_thread(proc.wait)
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(pidfd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    return proc.wait()


async def execute(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes | None,
    time_limit: float,
    output_bytes: int,
    preexec_fn: Callable[[], None] | None = None,
    sandbox: str = "bwrap",
    pass_fds: Sequence[int] = (),
    stop_signal: int | None = None,
) -> CommandResult:
    """Run `argv`, capture capped output, kill its process group on every way out.

    With `stop_signal`, the child is first sent that signal and given a moment to end its
    own descendants (the subreaper of `sandbox="none"` does), then the group is killed.
    """
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    proc = subprocess.Popen(  # noqa: ASYNC220 - fork+exec is brief; the wait is async
        list(argv),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
        preexec_fn=preexec_fn,  # only setrlimit calls and a cgroup write
        pass_fds=tuple(pass_fds),
    )
    capture = _Capture(loop, output_bytes)
    pipes = [p for p in (proc.stdin, proc.stdout, proc.stderr) if p is not None]
    timed_out = False
    try:
        out = capture.watch(_fileno(proc.stdout))
        err = capture.watch(_fileno(proc.stderr))
        feeder = _Feeder(loop, proc.stdin, stdin) if proc.stdin is not None else None
        exit_task = asyncio.create_task(_exited(proc))
        try:
            done, _ = await asyncio.wait(
                {exit_task, capture.exceeded},
                timeout=time_limit,
                return_when=asyncio.FIRST_COMPLETED,
            )
            timed_out = not done
            await _stop(proc, stop_signal)
            await exit_task
            await capture.drained(_DRAIN_GRACE)
        finally:
            if feeder is not None:
                feeder.close()
            exit_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await exit_task
    finally:
        await _stop(proc, stop_signal)
        capture.close()
        for pipe in pipes:
            pipe.close()
        if proc.returncode is None:
            await asyncio.to_thread(proc.wait)
    truncated = capture.exceeded.done() and not capture.exceeded.cancelled()
    return CommandResult(
        exit_code=None if (timed_out or truncated) else proc.returncode,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        timed_out=timed_out,
        output_truncated=truncated,
        duration=time.monotonic() - started,
        sandbox=sandbox,
    )


def _fileno(pipe: IO[bytes] | None) -> int:
    if pipe is None:  # pragma: no cover - PIPE always creates it
        msg = "the child process has no output pipe"
        raise RuntimeError(msg)
    return pipe.fileno()


class _Feeder:
    """Writes stdin without blocking; gives up quietly when the child stops reading."""

    __slots__ = ("_data", "_fd", "_loop", "_pipe")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, pipe: IO[bytes], data: bytes | None
    ) -> None:
        self._loop = loop
        self._pipe = pipe
        self._fd = pipe.fileno()
        self._data = memoryview(data or b"")
        os.set_blocking(self._fd, False)
        if self._data:
            loop.add_writer(self._fd, self._writable)
        else:
            pipe.close()

    def _writable(self) -> None:
        try:
            n = os.write(self._fd, self._data[:65536])
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        self._data = self._data[n:]
        if not self._data:
            self.close()

    def close(self) -> None:
        if not self._pipe.closed:
            self._loop.remove_writer(self._fd)
            self._pipe.close()
