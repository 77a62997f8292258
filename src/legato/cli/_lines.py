"""Reading lines and Ctrl-C on the event loop, so a prompt never blocks a run or a cancel.

A line is read with the loop watching standard input (no thread stuck in `input()`), so a
Ctrl-C while a prompt waits reaches the loop at once: the prompt ends with `Interrupted`.
Ctrl-C while no prompt waits calls whatever the chat registered (cancelling the turn).
Standard input that the loop cannot watch (a regular file, a test's buffer) is read on a
worker thread instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Generator
from typing import TextIO

__all__ = ["Interrupted", "LineReader"]


class Interrupted(Exception):
    """Ctrl-C arrived while a prompt was waiting for its line."""

    def __init__(self, typed: str = "") -> None:
        super().__init__("interrupted")
        self.typed = typed
        """What was on the line when Ctrl-C came ("" when unknown: the terminal dropped it)."""


class LineReader:
    """Async lines from standard input; `None` means end of input (Ctrl-D)."""

    def __init__(self, stdin: TextIO | None = None, *, show: Callable[[str], None]) -> None:
        self._stdin = stdin if stdin is not None else sys.stdin
        self._show = show
        self._buffer = b""
        self._eof = False
        self._waiting: asyncio.Future[str | None] | None = None
        self._on_interrupt: Callable[[], None] | None = None
        self.interrupts = 0
        """Ctrl-C presses seen so far."""

    def _fd(self) -> int | None:
        try:
            fd = self._stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return None
        return fd

    @contextlib.contextmanager
    def catching_interrupts(self) -> Generator[None]:
        """Route SIGINT to this reader (and the registered callback) while inside."""
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self.interrupt)
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
            yield
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    @contextlib.contextmanager
    def on_interrupt(self, callback: Callable[[], None]) -> Generator[None]:
        """Call `callback` on Ctrl-C while inside (unless a prompt is waiting)."""
        previous, self._on_interrupt = self._on_interrupt, callback
        try:
            yield
        finally:
            self._on_interrupt = previous

    def interrupt(self) -> None:
        """What Ctrl-C does: end the waiting prompt with `Interrupted`, else call the callback."""
        self.interrupts += 1
        waiting = self._waiting
        if waiting is not None and not waiting.done():
            waiting.set_exception(Interrupted())
        elif self._on_interrupt is not None:
            self._on_interrupt()

    def _take_line(self) -> str | None:
        if b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            return line.decode("utf-8", errors="replace")
        return None

    async def read(self, prompt: str) -> str | None:
        """Show `prompt` and return the next line (without its newline); None at end of input.

        Raises `Interrupted` when Ctrl-C is pressed meanwhile. When standard input is not a
        terminal, the line read is shown after the prompt (a terminal echoes it itself).
        """
        self._show(prompt)
        line = await self._read()
        if not self._is_tty():
            self._show("\n" if line is None else line + "\n")
        return line

    def _is_tty(self) -> bool:
        try:
            return self._stdin.isatty()
        except (AttributeError, ValueError, OSError):
            return False

    async def _read(self) -> str | None:
        line = self._take_line()
        if line is not None:
            return line
        if self._eof:
            rest, self._buffer = self._buffer, b""
            return rest.decode("utf-8", errors="replace") if rest else None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()
        self._waiting = future
        fd = self._fd()
        watching = False
        if fd is not None:
            try:
                loop.add_reader(fd, self._readable, fd)
                watching = True
            except (PermissionError, OSError, ValueError, NotImplementedError):
                watching = False
        try:
            if not watching:
                reading = asyncio.ensure_future(asyncio.to_thread(self._stdin.readline))
                done, _ = await asyncio.wait([reading, future], return_when=asyncio.FIRST_COMPLETED)
                if future in done:
                    return future.result()  # raises Interrupted
                text = reading.result()
                if not text:
                    self._eof = not self._is_tty()
                    return None
                return text.rstrip("\n")
            return await future
        finally:
            self._waiting = None
            if watching and fd is not None:
                loop.remove_reader(fd)

    def _readable(self, fd: int) -> None:
        future = self._waiting
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if future is None or future.done():
            self._buffer += chunk
            return
        if not chunk:
            self._eof = not self._is_tty()  # a terminal reads on after Ctrl-D; a pipe ends
            rest, self._buffer = self._buffer, b""
            future.set_result(rest.decode("utf-8", errors="replace") if rest else None)
            return
        self._buffer += chunk
        line = self._take_line()
        if line is not None:
            future.set_result(line)
