"""The sync facade: where `run_sync` / `stream_sync` run, and what they keep from the caller."""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable

import pytest

from legato import Agent, tool
from legato.events import RunFinished
from legato.messages import Message, ToolResultPart
from legato.testing import ScriptedModel, call, reply

Where = tuple[str, int]
"""(thread name, id of the running loop) seen by a tool."""


def _probe(seen: list[Where]) -> Agent:
    @tool
    async def where() -> str:
        """Report the thread and loop the run is on."""
        seen.append((threading.current_thread().name, id(asyncio.get_running_loop())))
        return "ok"

    return Agent(ScriptedModel([reply(call("where")), "x"]), tools=[where])


def _in_thread(fn: Callable[[], object]) -> None:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=target, name="worker")
    thread.start()
    thread.join(30)
    assert not errors, errors


def _results(message: Message) -> list[ToolResultPart]:
    return [p for p in message.parts if isinstance(p, ToolResultPart)]


def test_sync_runs_on_the_main_thread_run_there_on_one_loop() -> None:
    seen: list[Where] = []
    for _ in range(2):
        _probe(seen).run_sync("go")
    events = list(_probe(seen).stream_sync("go"))
    assert isinstance(events[-1], RunFinished)
    # no hop to another thread, and one loop for all three (clients and sessions are reused)
    assert [name for name, _ in seen] == ["MainThread"] * 3
    assert len({loop for _, loop in seen}) == 1


@pytest.mark.parametrize("kept_out_of_the_task", [True, False])
def test_run_sync_never_formats_the_result(
    monkeypatch: pytest.MonkeyPatch, kept_out_of_the_task: bool
) -> None:
    # On the main thread the runner restores SIGINT after each call, and `signal` formats
    # the handler it gets back, the task and its result with it: a whole `RunResult` (journal
    # included) was turned into text at every `run_sync`, a cost that grew with the run.
    from legato.run._result import RunResult
    from legato.run._sync import _default_sigint_over, _owned_elsewhere

    formatted: list[int] = []

    def counted(self: object) -> str:
        formatted.append(1)
        return "RunResult(...)"

    monkeypatch.setattr(RunResult, "__repr__", counted)
    history = [Message.user(f"question {i}") for i in range(50)]
    agent = Agent(ScriptedModel(["an answer"] * 2))
    if kept_out_of_the_task:  # as `run_sync` runs it
        result = agent.run_sync("go", message_history=history)
    else:  # the twin: the run's coroutine handed to the runner as it is
        with asyncio.Runner() as runner, _default_sigint_over(_owned_elsewhere):
            result = runner.run(agent.run("go", message_history=history))
    assert result.output == "an answer"
    assert bool(formatted) is not kept_out_of_the_task


def test_sync_runs_from_worker_threads_share_the_background_loop() -> None:
    seen: list[Where] = []
    _in_thread(lambda: _probe(seen).run_sync("go"))
    _in_thread(lambda: [*_probe(seen).stream_sync("go")])
    assert [name for name, _ in seen] == ["legato-sync-loop"] * 2
    assert len({loop for _, loop in seen}) == 1


@pytest.mark.parametrize("outer", ["main thread", "worker thread"])
def test_an_async_tool_may_call_run_sync_without_deadlocking(outer: str) -> None:
    # From the main thread's loop the inner call goes to the background loop; from the
    # background loop (outer call in a worker thread) it gets a private loop. Neither waits
    # on the loop it runs on.
    seen: list[Where] = []
    inner = _probe(seen)

    @tool
    async def ask_inner() -> str:
        """Ask another agent, synchronously."""
        return inner.run_sync("question").output

    def outer_run() -> None:
        model = ScriptedModel([reply(call("ask_inner")), "done"])
        result = Agent(model, tools=[ask_inner]).run_sync("go")
        assert result.output == "done"
        assert _results(result.messages[2])[0].text == "x"

    if outer == "main thread":
        outer_run()
        assert seen[0][0] == "legato-sync-loop"
    else:
        _in_thread(outer_run)
        assert seen[0][0].startswith("legato-sync_")  # the private loop's worker thread


_REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


@pytest.mark.parametrize("where", ["main thread", "worker thread"])
def test_the_callers_context_variables_reach_the_run_and_nothing_leaks_back(where: str) -> None:
    seen: list[str] = []

    @tool
    async def read_context() -> str:
        """Read and change a context variable."""
        seen.append(_REQUEST_ID.get())
        _REQUEST_ID.set("changed inside the run")
        return "ok"

    def run(request_id: str) -> None:
        _REQUEST_ID.set(request_id)
        agent = Agent(ScriptedModel([reply(call("read_context")), "x"]), tools=[read_context])
        agent.run_sync("go")
        assert _REQUEST_ID.get() == request_id

    if where == "main thread":
        token = _REQUEST_ID.set("-")
        try:
            run("req-1")
            run("req-2")
        finally:
            _REQUEST_ID.reset(token)
    else:
        _in_thread(lambda: run("req-1"))
        _in_thread(lambda: run("req-2"))
    assert seen == ["req-1", "req-2"]


def test_ctrl_c_cancels_the_run_and_the_loop_stays_usable() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finished: list[bool] = []

    @tool
    async def slow() -> str:
        """Get interrupted."""
        signal.raise_signal(signal.SIGINT)  # what Ctrl-C does
        await asyncio.sleep(10)
        finished.append(True)
        return "too late"

    agent = Agent(ScriptedModel([reply(call("slow")), "x"]), tools=[slow])
    with pytest.raises(KeyboardInterrupt):
        agent.run_sync("go")
    assert finished == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert Agent(ScriptedModel(["still fine"])).run_sync("hi").output == "still fine"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork with threads (3.12+)
def test_a_forked_child_makes_its_own_loops() -> None:
    seen: list[Where] = []
    _probe(seen).run_sync("go")  # the parent's main loop exists before the fork
    _in_thread(lambda: _probe(seen).run_sync("go"))  # and so does its background loop
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        status = 1
        try:
            child: list[Where] = []
            _probe(child).run_sync("go")
            _in_thread(lambda: _probe(child).run_sync("go"))
            os.write(write, repr([name for name, _ in child]).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert report == repr(["MainThread", "legato-sync-loop"])
    _probe(seen).run_sync("go")  # the parent's loops are untouched
    assert len({loop for _, loop in seen}) == 2


_EXIT_SCRIPT = """
import legato.run._sync as facade
from legato import Agent
from legato.models._provider import LoopClients, ProviderSettings
from legato.models.openai_chat import OpenAIChatModel
from legato.models.retry import RetryPolicy
from legato.simulator import SimTurn, WireSimulator

if {skip_close}:
    facade._MAIN.close = lambda: None  # the twin: leave the main loop to the collector
sim = WireSimulator().__enter__()
sim.enqueue(SimTurn(text="one"))
settings = ProviderSettings(retry=RetryPolicy(max_attempts=1))
model = OpenAIChatModel("gpt-4o", base_url=sim.url + "/v1", api_key="k", settings=settings)
print(Agent(model).run_sync("hi").output)


async def close(client):
    print("closed", client)


clients = LoopClients(lambda: "client-1", close)
facade.run_sync(clients.get())
"""


@pytest.mark.parametrize("close_at_exit", [True, False])
def test_the_main_loop_closes_its_clients_at_exit(close_at_exit: bool) -> None:
    script = textwrap.dedent(_EXIT_SCRIPT.format(skip_close=not close_at_exit))
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr
    closed = "closed client-1" in done.stdout.splitlines()
    assert done.stdout.startswith("one\n")
    assert closed is close_at_exit
