"""Ctrl-C from every thread: a real SIGINT cancels the run, and nothing keeps the process alive.

Each scenario runs in a child interpreter that gets a real `SIGINT` once its tool started.
The tool's effect comes 2 seconds later; the protected run must exit without it. Each twin
switches the one protection off in the child and shows the effect landing.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

_HEADER = """
import asyncio, sys, threading, time
from pathlib import Path
from legato import Agent, tool
from legato.testing import ScriptedModel, call, reply
import legato.run._sync as facade
import legato.tools._tool as tool_module

out = Path(sys.argv[1])
EFFECT_DELAY = 2.0


def record(outcome):
    (out / "outcome").write_text(outcome)


@tool(side_effects="irreversible")
async def transfer() -> str:
    \"\"\"Move money after a while.\"\"\"
    (out / "started").touch()
    await asyncio.sleep(EFFECT_DELAY)
    (out / "landed").touch()
    return "moved"


@tool(side_effects="irreversible")
def hang() -> str:
    \"\"\"A sync tool that takes long, then acts.\"\"\"
    (out / "started").touch()
    time.sleep(EFFECT_DELAY)
    (out / "landed").touch()
    return "moved"


def agent(tool_name):
    tools = {"transfer": transfer, "hang": hang}
    return Agent(ScriptedModel([reply(call(tool_name)), "done"]), tools=[tools[tool_name]])


def run(tool_name, stream=False):
    try:
        if stream:
            for _ in agent(tool_name).stream_sync("pay"):
                pass
        else:
            agent(tool_name).run_sync("pay")
    except BaseException as exc:
        record(type(exc).__name__)
        raise
    record("finished")
"""

SCENARIOS = {
    "worker thread": """
if TWIN:
    facade._cancel_in_flight = lambda: None
worker = threading.Thread(target=run, args=("transfer",))
worker.start()
while worker.is_alive():  # (an interrupted join() forgets the thread on Python 3.11)
    time.sleep(0.05)
""",
    "inside asyncio.run": """
import contextlib
if TWIN:
    facade._interruptible = contextlib.nullcontext


async def main():
    run("transfer")
    await asyncio.sleep(0)

asyncio.run(main())
""",
    "stream_sync in a worker thread": """
if TWIN:
    facade._cancel_in_flight = lambda: None
worker = threading.Thread(target=run, args=("transfer", True))
worker.start()
while worker.is_alive():
    time.sleep(0.05)
""",
    "stream_sync inside asyncio.run": """
import contextlib
if TWIN:
    facade._interruptible = contextlib.nullcontext


async def main():
    run("transfer", stream=True)
    await asyncio.sleep(0)

asyncio.run(main())
""",
    "stream_sync on the main thread": """
if TWIN:
    facade._MainStream._on_sigint = lambda self, signum, frame: None
run("transfer", stream=True)
""",
    "hung sync tool on the main thread": """
if TWIN:
    async def pooled(function, kwargs):
        return await asyncio.to_thread(function, **kwargs)

    tool_module.call_in_thread = pooled
run("hang")
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


def _landed(out: Path) -> bool:
    return (out / "landed").exists()


def _outcome(out: Path) -> str | None:
    return (out / "outcome").read_text() if (out / "outcome").exists() else None


def test_ctrl_c_cancels_the_run_and_the_effect_never_lands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results: dict[str, tuple[bool, str | None, str]] = {}
    for index, scenario in enumerate(SCENARIOS):
        out = tmp_path / f"s{index}"
        out.mkdir()
        done = _interrupt(scenario, out, twin=False)
        results[scenario] = (_landed(out), _outcome(out), done.stderr)
    with capsys.disabled():
        stopped = sum(not landed for landed, _, _ in results.values())
        print(f"\nCtrl-C from every thread: {stopped}/{len(results)} effects stopped")
        for scenario, (landed, outcome, _) in results.items():
            print(f"  {'LANDED' if landed else 'stopped':<8} {scenario} (caller saw {outcome})")
    for landed, outcome, stderr in results.values():
        assert "KeyboardInterrupt" in stderr, stderr
        assert not landed, stderr
        assert outcome != "finished", stderr
    # the worker thread's run was cancelled at shutdown, and said so in legato's terms
    assert results["worker thread"][1] == "RunCancelled"
    assert results["stream_sync in a worker thread"][1] == "RunCancelled"


def test_twin_without_the_protection_the_effect_lands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    landed: dict[str, bool] = {}
    for index, scenario in enumerate(SCENARIOS):
        out = tmp_path / f"s{index}"
        out.mkdir()
        _interrupt(scenario, out, twin=True)
        landed[scenario] = _landed(out)
    with capsys.disabled():
        print(f"\nCtrl-C twin: {sum(landed.values())}/{len(landed)} effects landed")
    assert all(landed.values()), landed
