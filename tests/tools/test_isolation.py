"""`@tool(isolation="process")`: a cancelled or timed-out sync call's effect never lands.

Each test on cancellation and timeouts has its twin in thread mode, where the effect lands
after the run gave up on the call (Python cannot stop a thread).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import isolated_tools
import pytest
from isolated_tools import (
    async_transfer,
    async_transfer_in_loop,
    die,
    echo_pid,
    refuse,
    transfer,
    transfer_by_default,
    transfer_in_thread,
    unpicklable_result,
)

from legato import Agent, RunContext, Tool, Toolset, tool
from legato.events import ToolCallFinished
from legato.exceptions import (
    RunCancelled,
    ToolDefinitionError,
    ToolError,
    ToolIsolationError,
)
from legato.testing import ScriptedModel, call, reply
from legato.tools._isolation import call_in_process, close_workers

TRIALS = 3


@pytest.fixture(autouse=True)
def _no_workers_left() -> Iterator[None]:
    """Warm worker processes are stopped after each test (other tests count children)."""
    yield
    close_workers()


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead and not yet reaped by its parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _exists(path: Path) -> bool:
    return path.exists()


def _read(path: str | Path) -> str:
    return Path(path).read_text()


def _open_gate(ledger: Path) -> None:
    Path(f"{ledger}.gate").touch()


async def _wait_for(path: Path) -> None:
    while not _exists(path):  # noqa: ASYNC110 - polling the file system
        await asyncio.sleep(0.005)


async def _cancel_mid_call(tool_: Tool, ledger: Path, *, isolate_irreversible: bool = False) -> int:
    """Start a run that calls `tool_`, cancel it once the call started; the worker's pid."""
    model = ScriptedModel([reply(call(tool_.name, {"ledger": str(ledger), "amount": 5})), "x"])
    agent = Agent(model, tools=[tool_], isolate_irreversible=isolate_irreversible)
    handle = agent.start("pay")
    started = Path(f"{ledger}.started")
    await _wait_for(started)
    handle.cancel("stop")
    with pytest.raises(RunCancelled):
        await handle.result()
    return int(_read(started))


async def test_cancel_kills_the_worker_and_the_effect_never_lands(tmp_path: Path) -> None:
    for trial in range(TRIALS):
        ledger = tmp_path / f"ledger{trial}"
        pid = await _cancel_mid_call(transfer, ledger)
        assert pid != os.getpid()
        assert not _alive(pid)  # killed: nothing it had not done yet can happen
        _open_gate(ledger)
        assert not _exists(ledger)


async def test_cancel_twin_in_thread_mode_the_effect_lands(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    pid = await _cancel_mid_call(transfer_in_thread, ledger)
    assert pid == os.getpid()
    _open_gate(ledger)
    await _wait_for(ledger)  # the abandoned thread goes on and moves the money
    assert _read(ledger) == "5"


async def _time_out(tool_: Tool, ledger: Path) -> tuple[str, int]:
    # no warm-up: an isolated tool's timeout counts from its first line, not the worker's start
    impatient = tool_.replace(timeout=1.0)
    model = ScriptedModel([reply(call(tool_.name, {"ledger": str(ledger), "amount": 7})), "ok"])
    result = await Agent(model, tools=[impatient]).run("pay")
    finished = [e for e in result.journal.events if isinstance(e, ToolCallFinished)]
    return finished[0].outcome, int(_read(f"{ledger}.started"))


async def test_timeout_kills_the_worker_and_the_effect_never_lands(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    outcome, pid = await _time_out(transfer, ledger)
    assert outcome == "timeout"
    assert not _alive(pid)
    _open_gate(ledger)
    assert not _exists(ledger)


async def test_timeout_twin_in_thread_mode_the_effect_lands(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    outcome, _ = await _time_out(transfer_in_thread, ledger)
    assert outcome == "timeout"
    _open_gate(ledger)
    await _wait_for(ledger)
    assert _read(ledger) == "7"


# -- async def tools: a coroutine whose effect comes from a thread it started ------------------


async def test_async_tool_cancelled_in_a_process_its_thread_dies_with_it(tmp_path: Path) -> None:
    for trial in range(TRIALS):
        ledger = tmp_path / f"ledger{trial}"
        pid = await _cancel_mid_call(async_transfer, ledger)
        assert pid != os.getpid() and not _alive(pid)
        _open_gate(ledger)
        assert not _exists(ledger)


async def test_async_tool_cancel_twin_on_the_loop_its_thread_lands_the_effect(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    pid = await _cancel_mid_call(async_transfer_in_loop, ledger)
    assert pid == os.getpid()  # the coroutine was cancelled; the thread it started was not
    _open_gate(ledger)
    await _wait_for(ledger)
    assert _read(ledger) == "5"


async def test_async_tool_timed_out_in_a_process_never_lands(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    outcome, pid = await _time_out(async_transfer, ledger)
    assert outcome == "timeout" and not _alive(pid)
    _open_gate(ledger)
    assert not _exists(ledger)


async def test_async_tool_timeout_twin_on_the_loop_lands(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    outcome, _ = await _time_out(async_transfer_in_loop, ledger)
    assert outcome == "timeout"
    _open_gate(ledger)
    await _wait_for(ledger)
    assert _read(ledger) == "7"


async def test_a_finished_call_returns_by_value_each_in_a_fork_of_one_zygote(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    _open_gate(ledger)
    ctx: RunContext[None] = RunContext(deps=None, run_id="r")
    assert await transfer.invoke({"ledger": str(ledger), "amount": 3}, ctx) == "moved 3"
    assert _read(ledger) == "3"
    first = await echo_pid.invoke({"value": [1, 2]}, ctx)
    second = await echo_pid.invoke({"value": [3]}, ctx)
    assert first["value"] == [2, 4] and second["value"] == [6]
    assert first["pid"] != second["pid"]  # a process per call: nothing left from the last
    assert first["parent"] == second["parent"] != os.getpid()  # forked from one zygote


async def test_errors_cross_back_typed() -> None:
    ctx: RunContext[None] = RunContext(deps=None, run_id="r")
    with pytest.raises(ToolError, match="no funds"):
        await refuse.invoke({"reason": "no funds"}, ctx)
    with pytest.raises(ToolIsolationError, match="result cannot be pickled"):
        await unpicklable_result.invoke({}, ctx)
    with pytest.raises(ToolIsolationError, match="worker process died"):
        await die.invoke({}, ctx)


async def test_arguments_that_cannot_cross_are_a_typed_error(tmp_path: Path) -> None:
    with (tmp_path / "f").open("w") as handle:
        with pytest.raises(ToolIsolationError, match="arguments cannot be pickled"):
            await call_in_process("plain", isolated_tools.plain, {"value": handle})
    with pytest.raises(ToolIsolationError, match="arguments cannot be pickled"):
        await call_in_process("plain", isolated_tools.plain, {"value": lambda: 1})


def test_functions_that_cannot_cross_are_refused_when_the_tool_is_made() -> None:
    def local(x: int) -> int:
        """A local function."""
        return x

    async def coroutine(x: int) -> int:
        """Async."""
        return x

    def with_context(ctx: RunContext[None], x: int) -> int:
        """Takes the context."""
        return x

    with pytest.raises(ToolDefinitionError, match="lambda or a function defined inside"):
        tool(isolation="process")(local)
    with pytest.raises(ToolDefinitionError, match="lambda"):
        Tool.from_function(lambda x: x, name="anon", isolation="process")  # pyright: ignore[reportUnknownLambdaType, reportUnknownArgumentType]
    with pytest.raises(ToolDefinitionError, match="defined inside"):
        tool(isolation="process")(coroutine)  # async is fine; a local function is not
    with pytest.raises(ToolDefinitionError, match="RunContext"):
        tool(isolation="process")(with_context)
    with pytest.raises(ToolDefinitionError, match="isolation must be"):
        transfer.replace(isolation="fork")


async def test_agent_default_isolates_irreversible_sync_tools(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    pid = await _cancel_mid_call(transfer_by_default, ledger, isolate_irreversible=True)
    assert pid != os.getpid() and not _alive(pid)
    _open_gate(ledger)
    assert not _exists(ledger)


async def test_agent_default_twin_leaves_them_on_a_thread(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    pid = await _cancel_mid_call(transfer_by_default, ledger)
    assert pid == os.getpid()
    _open_gate(ledger)
    await _wait_for(ledger)


def test_agent_default_refuses_an_irreversible_tool_that_cannot_cross() -> None:
    @tool(side_effects="irreversible")
    def local_transfer(amount: int) -> str:
        """Defined inside a function: no worker can import it."""
        return str(amount)

    @tool(side_effects="irreversible", isolation="thread")
    def explicitly_threaded(amount: int) -> str:
        """Opted out of process isolation."""
        return str(amount)

    with pytest.raises(ToolDefinitionError, match="local_transfer"):
        Agent(ScriptedModel(["x"]), tools=[local_transfer], isolate_irreversible=True)
    agent = Agent(ScriptedModel(["x"]), tools=[explicitly_threaded], isolate_irreversible=True)
    kept = agent.toolset.get("explicitly_threaded")
    assert kept is not None and kept.isolation == "thread"
    grouped = Agent(
        ScriptedModel(["x"]), tools=[Toolset([transfer_by_default])], isolate_irreversible=True
    )
    isolated = [t for s in grouped.tool_sources if isinstance(s, Toolset) for t in s]
    assert [t.isolation for t in isolated if t.name == "transfer_by_default"] == ["process"]


_SCRIPT = """
import asyncio, os
from legato import RunContext, tool


@tool(isolation="process")
def where() -> int:
    \"\"\"The worker's pid.\"\"\"
    return os.getpid()


if __name__ == "__main__":
    pid = asyncio.run(where.invoke({}, RunContext(deps=None, run_id="script")))
    print("worker", pid != os.getpid())
"""


def test_a_tool_defined_in_the_script_being_run(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "agent_script.py"
    script.write_text(_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=110, check=False
    )
    assert done.stdout.strip() == "worker True", done.stderr


def test_the_worker_finds_the_function_inside_the_tool_by_its_protocol() -> None:
    # the worker names no `Tool` (it sits below tools/_tool.py): a wrapper that keeps the
    # function it wraps under `function` is unwrapped, anything else is called as it is
    from legato.tools._worker import FunctionRef, WrapsFunction, _resolve

    found = _resolve(FunctionRef(module=isolated_tools.__name__, qualname="transfer"), None)
    assert isinstance(isolated_tools.transfer, WrapsFunction)
    assert found is isolated_tools.transfer.function
    plain = _resolve(FunctionRef(module="os.path", qualname="join"), None)
    assert plain is os.path.join


def test_the_worker_twin_a_wrapper_of_another_function_is_not_unwrapped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys
    import types

    from legato.tools._worker import FunctionRef, _resolve

    class Other:
        function = staticmethod(os.getcwd)  # wraps a function of another name

    holder = types.ModuleType("legato_test_holder")
    holder.__dict__["odd"] = Other()
    monkeypatch.setitem(sys.modules, "legato_test_holder", holder)
    found = _resolve(FunctionRef(module="legato_test_holder", qualname="odd"), None)
    assert isinstance(found, Other)
