"""Run coroutines and async iterators from synchronous code, even inside a running loop.

With no running event loop, `asyncio.run` is used. Inside one (Jupyter, a web handler), the
work runs on a private loop in a worker thread and the caller blocks on it. No
`nest_asyncio`, no second code path.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar, cast

__all__ = ["iterate_sync", "run_sync"]

T = TypeVar("T")


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code."""
    if not _loop_running():
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="legato-sync"
    ) as pool:
        return pool.submit(asyncio.run, coro).result()


def iterate_sync(iterator: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code, on a private loop in a thread."""
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
