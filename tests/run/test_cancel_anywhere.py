"""Cancelling runs on any thread: `cancel_all_runs()`, legato's SIGINT handler, `cancel()`.

The programs here catch `KeyboardInterrupt` on the main thread and go on (a GUI, a server,
a notebook), while a worker thread drives a run whose tool lands its effect (a file) 2
seconds after it started. Each child gets a real `SIGINT` once the tool started. With the
call (or the handler) the effect never lands and the worker's caller gets `RunCancelled`;
each twin leaves the call out and shows the effect landing.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from legato import Agent, RunHandle, cancel_all_runs, install_sigint_handler, tool
from legato.exceptions import ConfigurationError, RunCancelled
from legato.testing import ScriptedModel, call, reply

_HEADER = """
import asyncio, sys, threading, time
from pathlib import Path
import legato
from legato import Agent, tool
from legato.testing import ScriptedModel, call, reply

out = Path(sys.argv[1])


@tool(side_effects="irreversible")
async def transfer() -> str:
    \"\"\"Move money after a while.\"\"\"
    (out / "started").touch()
    await asyncio.sleep(2.0)
    (out / "landed").touch()
    return "moved"


def run(stream):
    agent = Agent(ScriptedModel([reply(call("transfer")), "done"]), tools=[transfer])
    try:
        if stream:
            for _ in agent.stream_sync("pay"):
                pass
        else:
            agent.run_sync("pay")
    except BaseException as exc:
        (out / "outcome").write_text(type(exc).__name__)
        raise
    (out / "outcome").write_text("finished")


def drive_and_go_on(stream=False, on_interrupt=lambda: None):
    worker = threading.Thread(target=run, args=(stream,))
    worker.start()
    try:
        while worker.is_alive():
            time.sleep(0.05)
    except KeyboardInterrupt:  # the program goes on: a GUI, a server, a notebook
        on_interrupt()
        (out / "interrupted").touch()
    worker.join()  # the run ends: cancelled, or finished with its effect
"""

SCENARIOS = {
    "cancel_all_runs() after Ctrl-C": """
drive_and_go_on(on_interrupt=lambda: None if TWIN else legato.cancel_all_runs("Ctrl-C"))
""",
    "cancel_all_runs(wait=) after Ctrl-C, a stream": """
def stop():
    if not TWIN:
        assert legato.cancel_all_runs("Ctrl-C", wait=60) == 1  # one run, stopped on return
        assert legato.cancel_all_runs("again") == 0

drive_and_go_on(stream=True, on_interrupt=stop)
""",
    "install_sigint_handler()": """
if not TWIN:
    legato.install_sigint_handler()
drive_and_go_on()
""",
    "install_sigint_handler(), a run on the main thread too": """
if not TWIN:
    legato.install_sigint_handler()
worker = threading.Thread(target=run, args=(False,))
worker.start()
try:  # the main thread's own run: asyncio's handler cancels it, legato's reaches the worker
    Agent(ScriptedModel([reply(call("transfer")), "done"]), tools=[transfer]).run_sync("pay")
except KeyboardInterrupt:
    (out / "interrupted").touch()
worker.join()
""",
}


def _interrupt(scenario: str, out: Path, *, twin: bool) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(_HEADER) + f"TWIN = {twin}\n" + textwrap.dedent(SCENARIOS[scenario])
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not (out / "started").exists() and child.poll() is None:
            time.sleep(0.01)
        assert child.poll() is None, child.communicate()
        child.send_signal(signal.SIGINT)  # what Ctrl-C does
        stdout, stderr = child.communicate(timeout=110)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def test_a_run_on_another_thread_is_cancelled_when_the_program_asks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results: dict[str, tuple[bool, str | None]] = {}
    for index, scenario in enumerate(SCENARIOS):
        out = tmp_path / f"s{index}"
        out.mkdir()
        done = _interrupt(scenario, out, twin=False)
        assert done.returncode == 0, done.stderr
        assert (out / "interrupted").exists(), done.stderr  # the program went on
        results[scenario] = ((out / "landed").exists(), _read(out / "outcome"))
    with capsys.disabled():
        stopped = sum(not landed for landed, _ in results.values())
        print(f"\ncancel on any thread: {stopped}/{len(results)} effects stopped")
    for scenario, (landed, outcome) in results.items():
        assert not landed, scenario
        assert outcome == "RunCancelled", scenario


def test_twin_without_the_call_the_run_goes_on_and_its_effect_lands(tmp_path: Path) -> None:
    for index, scenario in enumerate(SCENARIOS):
        out = tmp_path / f"s{index}"
        out.mkdir()
        done = _interrupt(scenario, out, twin=True)
        assert (out / "interrupted").exists(), done.stderr
        assert (out / "landed").exists(), scenario
        assert _read(out / "outcome") == "finished", scenario


# -- in process: a handle cancelled from another thread ----------------------------------------


def _touch(path: Path) -> None:
    path.touch()


def _start_on_a_loop_thread(
    marker: Path,
) -> tuple[RunHandle[str], asyncio.AbstractEventLoop, threading.Thread]:
    @tool(side_effects="irreversible")
    async def slow_write() -> str:
        """Write the marker once the test opens the gate."""
        _touch(marker.parent / "started")
        while not (marker.parent / "gate").exists():  # noqa: ASYNC110 - polling the file system
            await asyncio.sleep(0.005)
        _touch(marker)
        return "written"

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    agent = Agent(ScriptedModel([reply(call("slow_write")), "done"]), tools=[slow_write])

    async def start() -> RunHandle[str]:
        return agent.start("write")

    handle = asyncio.run_coroutine_threadsafe(start(), loop).result()
    while not (marker.parent / "started").exists():
        time.sleep(0.005)
    return handle, loop, thread


def _finish(
    handle: RunHandle[str], loop: asyncio.AbstractEventLoop, thread: threading.Thread
) -> BaseException | None:
    async def outcome() -> BaseException | None:
        try:
            await handle.result()
        except RunCancelled as exc:
            return exc
        return None

    try:
        return asyncio.run_coroutine_threadsafe(outcome(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_handle_cancel_from_another_thread(tmp_path: Path) -> None:
    marker = tmp_path / "written"
    handle, loop, thread = _start_on_a_loop_thread(marker)
    assert handle.cancel("from the test's thread")  # not the run's loop thread
    assert handle.wait_stopped(60)
    (tmp_path / "gate").touch()
    error = _finish(handle, loop, thread)
    assert isinstance(error, RunCancelled) and "from the test's thread" in str(error)
    assert not marker.exists()
    assert not handle.cancel("again")  # ended: nothing to cancel


def test_handle_cancel_twin_left_alone_the_effect_lands(tmp_path: Path) -> None:
    marker = tmp_path / "written"
    handle, loop, thread = _start_on_a_loop_thread(marker)
    (tmp_path / "gate").touch()
    assert _finish(handle, loop, thread) is None
    assert marker.exists()


def test_cancel_all_runs_with_nothing_in_flight_and_the_handler_on_another_thread() -> None:
    assert cancel_all_runs() == 0
    failure: list[BaseException] = []

    def install() -> None:
        try:
            install_sigint_handler()
        except ConfigurationError as exc:
            failure.append(exc)

    worker = threading.Thread(target=install)
    worker.start()
    worker.join()
    assert len(failure) == 1 and "main thread" in str(failure[0])
