"""Plain `def` tools run on reusable daemon threads: no thread started per call, none shared
by a hung call."""

from __future__ import annotations

import asyncio
import contextvars
import threading

from legato.tools._isolation import call_in_thread

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def _tool_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "legato-tool"}


async def test_sequential_calls_reuse_a_thread() -> None:
    await call_in_thread(lambda: None, {})
    before = _tool_threads()
    seen: set[int] = set()
    for _ in range(20):
        seen.add(await call_in_thread(threading.get_ident, {}))
    assert _tool_threads() == before  # no thread started for the 20 calls
    assert seen <= {t.ident for t in before}


async def test_a_hung_call_does_not_hold_up_another() -> None:
    release = threading.Event()
    hung = asyncio.ensure_future(call_in_thread(release.wait, {"timeout": 30}))
    await asyncio.sleep(0.05)
    assert await asyncio.wait_for(call_in_thread(lambda: "done", {}), 10) == "done"
    assert not hung.done()
    release.set()
    assert await hung is True


async def test_a_call_sees_the_callers_context_and_raises_its_errors() -> None:
    WHO.set("caller")
    assert await call_in_thread(WHO.get, {}) == "caller"

    def broken() -> None:
        raise ValueError("nope")

    try:
        await call_in_thread(broken, {})
    except ValueError as exc:
        assert str(exc) == "nope"
    else:
        raise AssertionError("the error was lost")


async def test_concurrent_calls_run_at_once() -> None:
    barrier = threading.Barrier(4, timeout=10)
    results = await asyncio.gather(*(call_in_thread(barrier.wait, {}) for _ in range(4)))
    assert sorted(results) == [0, 1, 2, 3]  # all four were waiting together
