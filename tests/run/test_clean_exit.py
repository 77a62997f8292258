"""A script that calls `run_sync` exits cleanly: nothing printed by the exit hook.

On Python 3.12+ the interpreter refuses new threads once it is shutting down, and
`asyncio.Runner.close()` joins the loop's default executor from a new thread: the main
loop's exit hook then printed "Exception ignored in atexit callback ... can't create new
thread at interpreter shutdown". The mechanism test reproduces that refusal on any Python
(a hook that runs just before legato's makes `Thread.start` refuse); the version tests run
the plain script under python3.12 / python3.13 when such an interpreter with legato's
dependencies is found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_SRC = str(Path(__file__).resolve().parents[2] / "src")

_SCRIPT = """
import asyncio, atexit, threading
import legato.run._sync as facade
from legato import Agent, tool
from legato.models._provider import ProviderSettings
from legato.models.openai_chat import OpenAIChatModel
from legato.models.retry import RetryPolicy
from legato.simulator import SimCall, SimTurn, WireSimulator


@tool
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.

    Args:
        a: The first.
        b: The second.
    \"\"\"
    return a + b


async def uses_the_default_executor() -> int:
    return await asyncio.get_running_loop().run_in_executor(None, int, "7")


if {twin}:  # the twin: close the main loop the old way (Runner.close)
    facade._MainLoop.close = lambda self: self._runner.close()
sim = WireSimulator().__enter__()
sim.enqueue(SimTurn(calls=(SimCall(name="add", arguments={{"a": 1, "b": 2}}),)))
sim.enqueue(SimTurn(text="three"))
settings = ProviderSettings(retry=RetryPolicy(max_attempts=1))
model = OpenAIChatModel("gpt-4o", base_url=sim.url + "/v1", api_key="k", settings=settings)
print(Agent(model, tools=[add]).run_sync("1 + 2?").output)
print(facade.run_sync(uses_the_default_executor()))


if {refuse_threads}:
    def refuse(self, *args, **kwargs):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    # registered after legato's hook, so it runs just before it (atexit is last in, first out)
    atexit.register(lambda: setattr(threading.Thread, "start", refuse))
"""


def _run(python: str, *, twin: bool, refuse_threads: bool) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(_SCRIPT.format(twin=twin, refuse_threads=refuse_threads))
    env = {**os.environ, "PYTHONPATH": _SRC}
    return subprocess.run(
        [python, "-X", "dev", "-c", script],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        check=False,
    )


def test_the_exit_hook_starts_no_thread() -> None:
    done = _run(sys.executable, twin=False, refuse_threads=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["three", "7"]
    assert "Exception ignored" not in done.stderr, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr


def test_twin_closing_with_the_runner_fails_when_threads_are_refused() -> None:
    done = _run(sys.executable, twin=True, refuse_threads=True)
    assert done.stdout.splitlines() == ["three", "7"]
    assert "can't create new thread at interpreter shutdown" in done.stderr, done.stderr


def _interpreter(version: str) -> str | None:
    """A python`version` that can import legato's dependencies (and the OpenAI SDK)."""
    candidates = [
        os.environ.get(f"LEGATO_PYTHON{version.replace('.', '')}"),
        shutil.which(f"python{version}"),
    ]
    for python in filter(None, candidates):
        probe = subprocess.run(
            [python, "-c", "import pydantic, httpx, docstring_parser, jsonschema_rs, openai"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        if probe.returncode == 0:
            return python
    return None


@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_a_plain_script_exits_cleanly_on(version: str) -> None:
    python = _interpreter(version)
    if python is None:
        pytest.skip(
            f"no python{version} with legato's dependencies and openai installed "
            f"(set LEGATO_PYTHON{version.replace('.', '')} to one)"
        )
    done = _run(python, twin=False, refuse_threads=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["three", "7"]
    assert "Exception ignored" not in done.stderr, done.stderr


_DROPPED = """
import atexit, gc
import openai
import legato.run._sync as facade
from legato import Agent
from legato.models.openai_chat import OpenAIChatModel
from legato.simulator import SimTurn, WireSimulator

if {twin}:  # the twin: the exit hook closes the loop without letting the closings finish
    facade._finish_closings = lambda loop: None
started, ended = [], []
closing = openai.AsyncOpenAI.close


async def watched(self):
    started.append(self)
    await closing(self)
    ended.append(self)  # this closing ran to its end (not cancelled, not left pending)


openai.AsyncOpenAI.close = watched
# registered before legato's exit hook, so it runs after it
atexit.register(lambda: print("closings left unfinished:", len(started) - len(ended)))


def once(sim):
    sim.enqueue(SimTurn(text="hello"))
    agent = Agent(OpenAIChatModel("gpt-4o", base_url=sim.url + "/v1", api_key="k"))
    print(agent.run_sync("hi").output)


with WireSimulator() as sim:
    once(sim)
    gc.collect()  # the first model is dropped: its client's closing goes to the idle loop
    once(sim)
    gc.collect()  # the second too, after its last run: it closes when the loop does
"""


def _run_dropped(*, twin: bool) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(_DROPPED.format(twin=twin))
    env = {**os.environ, "PYTHONPATH": _SRC}
    return subprocess.run(
        [sys.executable, "-X", "dev", "-c", script],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        check=False,
    )


def test_models_dropped_between_sync_runs_have_their_clients_closed_before_exit() -> None:
    # A script making an agent per call: each model dropped while the main loop is idle has
    # its HTTP client's closing scheduled there; the exit hook lets those closings finish.
    done = _run_dropped(twin=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hello", "hello", "closings left unfinished: 0"]
    assert "Task was destroyed but it is pending" not in done.stderr, done.stderr
    assert "never awaited" not in done.stderr, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr


def test_twin_without_finishing_the_closings_the_exit_leaves_them_pending() -> None:
    done = _run_dropped(twin=True)
    lines = done.stdout.splitlines()
    assert lines[:2] == ["hello", "hello"]
    # a closing is cancelled half-way, or left pending when the loop closes
    left = "Task was destroyed but it is pending" in done.stderr
    assert lines[2] != "closings left unfinished: 0" or left, (lines, done.stderr)
