"""Run coroutines and async iterators from synchronous code, even inside a running loop.

Synchronous calls run on one long-lived event loop in a background thread, started on the
first call (never at import) and shared by every later call of the process: clients bound to
a loop (a provider's HTTP connection pool, an MCP session) are then reused from call to
call instead of being rebuilt each time. Because that loop is never the caller's, this
works the same in a plain script, inside Jupyter or inside a web handler whose loop is
running. No `nest_asyncio`, no second code path.

Code already running on that background loop that calls back into the sync API (an async
tool calling `run_sync`) would wait on itself; it gets a private loop in a worker thread
instead. A forked child process starts its own background loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar, cast

__all__ = ["iterate_sync", "run_sync"]

T = TypeVar("T")


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
        return thread is not None and thread.ident == threading.get_ident()


_BACKGROUND = _BackgroundLoop()


def _wait(future: concurrent.futures.Future[T]) -> T:
    """The future's result; an interrupt of the caller (Ctrl-C) cancels the work first."""
    try:
        return future.result()
    except BaseException:
        if not future.done():
            future.cancel()
            with contextlib.suppress(BaseException):
                future.result(timeout=5)
        raise


def _run_privately(coro: Coroutine[Any, Any, T]) -> T:
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="legato-sync"
    ) as pool:
        return pool.submit(asyncio.run, coro).result()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code."""
    if _BACKGROUND.owns_current_thread():
        return _run_privately(coro)
    return _wait(asyncio.run_coroutine_threadsafe(coro, _BACKGROUND.get()))


def iterate_sync(iterator: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code, on the background loop."""
    if _BACKGROUND.owns_current_thread():
        yield from _iterate_privately(iterator)
        return
    loop = _BACKGROUND.get()
    try:
        while True:
            done, item = _wait(asyncio.run_coroutine_threadsafe(_next(iterator), loop))
            if done:
                return
            yield cast(T, item)
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            _wait(asyncio.run_coroutine_threadsafe(aclose(), loop))


def _iterate_privately(iterator: AsyncIterator[T]) -> Iterator[T]:
    """`iterate_sync` on a loop of its own (for callers on the background loop's thread)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="legato-stream", daemon=True)
    thread.start()
    try:
        while True:
            future = asyncio.run_coroutine_threadsafe(_next(iterator), loop)
            done, item = future.result()
            if done:
                return
            yield cast(T, item)
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            asyncio.run_coroutine_threadsafe(aclose(), loop).result()
        # Finish async generators and the default executor as `asyncio.run` does, so that
        # resources tied to this loop (e.g. a provider's HTTP client) are closed with it.
        asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result()
        asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


async def _next(iterator: AsyncIterator[T]) -> tuple[bool, T | None]:
    try:
        return False, await anext(iterator)
    except StopAsyncIteration:
        return True, None
