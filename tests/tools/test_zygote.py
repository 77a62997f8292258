"""Isolated calls fork from a zygote: they start at once, and a short timeout bounds the work.

Judged by effects: the tool's "started" marker, the ledger it would write, the processes it
left. No assert on a duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from isolated_tools import first_line, transfer, transfer_with_helper

from legato import Agent, RunContext, Tool
from legato.events import ToolCallFinished
from legato.exceptions import RunCancelled
from legato.testing import ScriptedModel, call, reply
from legato.tools import _zygote
from legato.tools._isolation import close_workers


@pytest.fixture(autouse=True)
def _cold_zygote() -> Iterator[None]:
    """Each test starts with no zygote (the first call starts one) and leaves none behind."""
    close_workers()
    yield
    close_workers()


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead and not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _exists(path: Path) -> bool:
    return path.exists()


def _touch(path: Path) -> None:
    path.touch()


def _pid_in(path: Path) -> int:
    return int(path.read_text())


async def _wait_for(path: Path) -> None:
    while not _exists(path):  # noqa: ASYNC110 - polling the file system
        await asyncio.sleep(0.005)


async def _run_with_timeout(tool_: Tool, ledger: Path, seconds: float) -> str:
    model = ScriptedModel([reply(call(tool_.name, {"ledger": str(ledger), "amount": 9})), "ok"])
    result = await Agent(model, tools=[tool_.replace(timeout=seconds)]).run("pay")
    finished = [e for e in result.journal.events if isinstance(e, ToolCallFinished)]
    return finished[0].outcome


async def test_a_100ms_timeout_lets_the_tool_start_and_kills_it_at_its_work(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    # the zygote is cold: its start (an interpreter importing legato) takes longer than 100 ms
    outcome = await _run_with_timeout(transfer, ledger, 0.1)
    assert outcome == "timeout"
    started = Path(f"{ledger}.started")
    assert _exists(started)  # the tool got to its work
    assert not _alive(_pid_in(started))  # and was killed there
    _touch(Path(f"{ledger}.gate"))
    assert not _exists(ledger)


async def test_twin_counting_from_admission_a_cold_start_eats_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def from_admission(clock: object, seconds: float | None) -> None:
        """The clock left as the run set it: running since admission."""

    monkeypatch.setattr(_zygote, "_reschedule", from_admission)
    ledger = tmp_path / "ledger"
    outcome = await _run_with_timeout(transfer, ledger, 0.1)
    assert outcome == "timeout"
    assert not _exists(Path(f"{ledger}.started"))  # the tool never started


async def _cancel_helper_call(ledger: Path) -> int:
    model = ScriptedModel(
        [reply(call("transfer_with_helper", {"ledger": str(ledger), "amount": 4})), "x"]
    )
    handle = Agent(model, tools=[transfer_with_helper]).start("pay")
    await _wait_for(Path(f"{ledger}.started"))
    handle.cancel("stop")
    with pytest.raises(RunCancelled):
        await handle.result()
    return _pid_in(Path(f"{ledger}.helper"))


async def _ended(pid: int) -> bool:
    """Whether `pid` ends within a minute (a SIGKILLed process is gone in milliseconds)."""
    for _ in range(12_000):
        if not _alive(pid):
            return True
        await asyncio.sleep(0.005)
    return False


async def test_cancel_kills_the_whole_process_group(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    helper = await _cancel_helper_call(ledger)
    assert await _ended(helper)  # the helper process the tool started went with it
    _touch(Path(f"{ledger}.gate"))
    assert not _exists(ledger)


async def test_twin_killing_only_the_leader_the_helper_lands_the_effect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def leader_only(pid: int, *, wait: float = 0.0) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    monkeypatch.setattr(_zygote, "_kill_group", leader_only)
    ledger = tmp_path / "ledger"
    helper = await _cancel_helper_call(ledger)
    try:
        assert _alive(helper)
        _touch(Path(f"{ledger}.gate"))
        await _wait_for(ledger)  # the orphaned helper did the work after the cancel
        assert _pid_in(ledger) == 4
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)


async def test_a_crashed_zygote_is_restarted() -> None:
    ctx: RunContext[None] = RunContext(deps=None, run_id="r")
    before = await first_line.invoke({}, ctx)
    zygote = before["parent"]
    os.kill(zygote, signal.SIGKILL)
    assert await _ended(zygote)
    after = await first_line.invoke({}, ctx)
    assert after["parent"] != zygote and after["parent"] != os.getpid()
    info = _zygote.zygote_info()
    assert info is not None and info[0] == after["parent"]


async def test_the_tools_module_is_imported_in_the_zygote_before_it_forks() -> None:
    ctx: RunContext[None] = RunContext(deps=None, run_id="r")
    first = await first_line.invoke({}, ctx)
    second = await first_line.invoke({}, ctx)
    for seen in (first, second):
        assert seen["imported_in"] == seen["parent"] != seen["pid"]  # inherited, not imported
    assert first["pid"] != second["pid"] and first["parent"] == second["parent"]


async def test_the_zygote_ends_its_calls_when_closed(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ctx: RunContext[None] = RunContext(deps=None, run_id="r")
    call_ = asyncio.ensure_future(transfer.invoke({"ledger": str(ledger), "amount": 1}, ctx))
    started = Path(f"{ledger}.started")
    await _wait_for(started)
    await asyncio.to_thread(close_workers)  # as at the run's exit: the zygote's socket ends
    with pytest.raises(Exception, match="died before answering"):
        await call_
    assert not _alive(_pid_in(started))
    _touch(Path(f"{ledger}.gate"))
    assert not _exists(ledger)


async def test_the_calls_of_a_crashed_zygote_die_with_it(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ctx: RunContext[None] = RunContext(deps=None, run_id="r")
    call_ = asyncio.ensure_future(transfer.invoke({"ledger": str(ledger), "amount": 1}, ctx))
    started = Path(f"{ledger}.started")
    await _wait_for(started)
    info = _zygote.zygote_info()
    assert info is not None
    os.kill(info[0], signal.SIGKILL)
    with pytest.raises(Exception, match="died before answering"):
        await call_
    assert await _ended(_pid_in(started))
    _touch(Path(f"{ledger}.gate"))
    assert not _exists(ledger)
    assert (await first_line.invoke({}, ctx))["parent"] != info[0]  # a new zygote


_ORPHAN = """
import asyncio, sys
sys.path.insert(0, sys.argv[2])
from isolated_tools import transfer
from legato import RunContext
asyncio.run(transfer.invoke({"ledger": sys.argv[1], "amount": 2}, RunContext(deps=None, run_id="r")))
"""


async def test_a_killed_run_process_takes_its_calls_with_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    ledger = tmp_path / "ledger"
    here = str(Path(__file__).parent)
    run = subprocess.Popen([sys.executable, "-c", _ORPHAN, str(ledger), here])  # noqa: ASYNC220
    try:
        started = Path(f"{ledger}.started")
        await _wait_for(started)
        run.kill()  # SIGKILL: the run's process cannot clean anything up
    finally:
        await asyncio.to_thread(run.wait)
    assert await _ended(_pid_in(started))  # its zygote saw its socket end and killed the call
    _touch(Path(f"{ledger}.gate"))
    assert not _exists(ledger)
