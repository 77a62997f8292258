"""The effect gate's fault matrix: randomized model-free runs, each property with its twin.

A scripted model issues parallel tool calls; in-process tools record every effect they
execute. Over 1,200+ randomized runs these properties must hold:

- hold:    no side effect executes while an approval request of the run is pending;
- reject:  a rejected call never executes;
- dedup:   no effect executes twice under crash-and-replay or re-delivery;
- fence:   no call is admitted after the run was cancelled;
- reap:    no tool task (and no tool process) survives a cancel or a timeout.

Each property has a twin run with its protection switched off (`unsafe_switches`), which
must detect violations, so the checks are shown able to fail. The counts are printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from legato import Agent, Tool, tool
from legato.approvals import (
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    CallbackApprover,
    Decision,
    MemoryApprovalStore,
    Reject,
    Rule,
)
from legato.effects import unsafe_switches
from legato.events import (
    ApprovalDecided,
    CancelRequested,
    Journal,
    JournalEvent,
    RunFinished,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallStarted,
)
from legato.exceptions import RunCancelled, RunParked, ToolRetriesExceeded
from legato.messages import Message, ToolCallPart
from legato.models import ModelRequest
from legato.run._handle import RunHandle
from legato.security import Hook, HookContext
from legato.testing import FunctionModel, ScriptedModel, call, reply
from legato.tools._isolation import close_workers

DELAYS = (0.0, 0.0, 0.0002, 0.0005, 0.001)


@dataclass
class World:
    """What the tools did in one run, and the probes that watch it."""

    store: MemoryApprovalStore = field(default_factory=MemoryApprovalStore)
    executed: Counter[str] = field(default_factory=lambda: Counter[str]())
    tasks: list[asyncio.Task[object]] = field(default_factory=lambda: [])
    pids: list[int] = field(default_factory=lambda: [])
    violations: Counter[str] = field(default_factory=lambda: Counter[str]())
    handle: RunHandle[str] | None = None
    rng: random.Random = field(default_factory=random.Random)

    def effect(self, key: str) -> None:
        if self.store.pending_now() > 0:
            self.violations["hold"] += 1
        self.executed[key] += 1

    def track(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.append(task)

    def tools(self) -> list[Tool]:
        CURRENT.set(self)  # the tools are built once; each run's tasks see their own world
        return TOOLS


CURRENT: ContextVar[World] = ContextVar("fault_matrix_world")


@tool(side_effects="irreversible")
async def ask_write(key: str, delay: float = 0.0) -> str:
    """An effect that needs approval."""
    world = CURRENT.get()
    world.track()
    await asyncio.sleep(delay)
    world.effect(key)
    return f"wrote {key}"


@tool(side_effects="irreversible")
async def write(key: str, delay: float = 0.0) -> str:
    """An effect the policy admits."""
    world = CURRENT.get()
    world.track()
    await asyncio.sleep(delay)
    world.effect(key)
    return f"wrote {key}"


@tool
async def read(key: str, delay: float = 0.0) -> str:
    """Read-only."""
    CURRENT.get().track()
    await asyncio.sleep(delay)
    return f"read {key}"


@tool
async def stop(key: str) -> str:
    """Read-only: the user presses cancel while the calls are in flight."""
    world = CURRENT.get()
    world.track()
    assert world.handle is not None
    world.handle.cancel("stop pressed")
    return "stopping"


@tool(side_effects="irreversible")
async def job(key: str) -> str:
    """Runs a process group; kills the whole group when cancelled."""
    world = CURRENT.get()
    world.track()
    # Popen returns at once with the pid, so a cancellation cannot strike between the
    # process starting and the tool knowing what to kill
    proc = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    world.pids.append(proc.pid)
    try:
        await asyncio.to_thread(proc.wait)
    except asyncio.CancelledError:
        os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
        raise
    world.effect(key)
    return "done"


TOOLS = [ask_write, write, read, stop, job]


def _call(name: str, key: str, rng: random.Random) -> ToolCallPart:
    return call(name, {"key": key, "delay": rng.choice(DELAYS)}, id=f"c_{key}")


def _group_alive(pgid: int) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


async def _settle(world: World) -> None:
    """After a run: count surviving tasks and processes, then clean them up."""
    alive = [t for t in world.tasks if not t.done()]
    world.violations["reap"] += len(alive)
    for pid in world.pids:
        if _group_alive(pid):
            world.violations["process"] += 1
            os.killpg(pid, signal.SIGKILL)
    for task in alive:
        task.cancel()
    if alive:
        await asyncio.wait(alive, timeout=5)


# -- scenarios ---------------------------------------------------------------------------------------


async def approval_run(world: World) -> None:
    """Parallel calls, some needing approval; a human who takes a moment and decides randomly."""
    rng = world.rng
    n = rng.randint(2, 5)
    kinds = ["ask_write"] + [rng.choice(["ask_write", "write", "read"]) for _ in range(n - 1)]
    rng.shuffle(kinds)
    calls = [_call(kind, f"{kind}{i}", rng) for i, kind in enumerate(kinds)]

    async def human(request: ApprovalRequest) -> Decision:
        await asyncio.sleep(rng.choice((0.0002, 0.0005, 0.001)))
        return rng.choice([Approve(), Reject()])

    policy = ApprovalPolicy(
        rules=[Rule("ask_write", "ask")], handler=CallbackApprover(human), store=world.store
    )
    agent = Agent(ScriptedModel([reply(*calls), "done"]), tools=world.tools(), approvals=policy)
    result = await agent.run("go")
    rejected = {
        e.call_id
        for e in result.journal
        if isinstance(e, ApprovalDecided) and e.verdict == "reject"
    }
    world.violations["reject"] += sum(world.executed[c.removeprefix("c_")] for c in rejected)


class Crash(BaseException):
    """The process dies (not an Exception: nothing in the run may catch it)."""


class CrashAt(Hook):
    def __init__(self, at: int) -> None:
        self.at = at
        self.seen = 0

    def on_event(self, event: JournalEvent, ctx: HookContext) -> None:
        self.seen += 1
        if self.seen == self.at:
            raise Crash


def _replay_model(steps: list[list[ToolCallPart]]) -> FunctionModel:
    """Answers by position in the conversation, so a resumed run gets the same calls again."""

    def answer(request: ModelRequest) -> Message:
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done < len(steps):
            return reply(*steps[done]).message
        return Message.assistant("done")

    return FunctionModel(answer)


async def replay_run(world: World) -> None:
    """Run, crash at a random event, resume from the journal as it was; maybe re-deliver a call."""
    rng = world.rng
    first = [_call("write", f"w{i}", rng) for i in range(rng.randint(1, 3))]
    second = [_call("write", f"x{i}", rng) for i in range(rng.randint(0, 2))]
    if rng.random() < 0.4:
        second.append(rng.choice(first))  # the provider re-delivers a call of step 1
    steps = [first, second] if second else [first]
    crash = CrashAt(rng.randint(4, 14))
    agent = Agent(_replay_model(steps), tools=world.tools(), hooks=[crash])
    handle = agent.start("go")
    try:
        await handle.result()
    except Crash:
        pass
    journal = Journal(list(handle.journal))
    if crash.seen >= crash.at and not isinstance(list(journal)[-1], RunFinished):
        # an irreversible call the crash left unfinished is put to a person, who says it ran
        policy = ApprovalPolicy(store=MemoryApprovalStore())
        resumer = Agent(_replay_model(steps), tools=world.tools(), approvals=policy)
        for _ in range(5):
            try:
                await resumer.resume(journal)
                break
            except RunParked as parked:
                for request in parked.parked.requests:
                    await policy.store.decide(request.id, request.token, Reject(message="it ran"))
                journal = parked.parked.journal
    world.violations["dedup"] += sum(count - 1 for count in world.executed.values() if count > 1)


async def cancel_run(world: World) -> None:
    """Parallel calls; the user cancels from inside a sibling call or from outside, any time."""
    rng = world.rng
    n = rng.randint(2, 6)
    kinds = [rng.choice(["write", "write", "read", "ask_write"]) for _ in range(n)]
    calls = [_call(kind, f"{kind}{i}", rng) for i, kind in enumerate(kinds)]
    inside = rng.random() < 0.7
    if inside:
        calls.insert(rng.randrange(len(calls) + 1), call("stop", {"key": "s"}, id="c_stop"))

    async def human(request: ApprovalRequest) -> Decision:
        await asyncio.sleep(rng.choice((0.0, 0.0005)))
        return Approve()

    policy = ApprovalPolicy(
        rules=[Rule("ask_write", "ask")], handler=CallbackApprover(human), store=world.store
    )
    agent = Agent(ScriptedModel([reply(*calls), "done"]), tools=world.tools(), approvals=policy)
    world.handle = agent.start("go")
    if not inside:
        await asyncio.sleep(rng.choice((0.0, 0.0002, 0.0005, 0.001)))
        world.handle.cancel("cancelled from outside")
    try:
        await world.handle.result()
    except RunCancelled:
        pass
    events = list(world.handle.journal)
    fence = next((i for i, e in enumerate(events) if isinstance(e, CancelRequested)), len(events))
    world.violations["fence"] += sum(isinstance(e, ToolCallAdmitted) for e in events[fence:])
    await _settle(world)


async def timeout_run(world: World) -> None:
    """Parallel slow calls under a run timeout or per-tool timeouts; sometimes a process group."""
    rng = world.rng
    calls = [
        call("write", {"key": f"t{i}", "delay": rng.choice((0.0005, 0.002, 0.01))}, id=f"c_t{i}")
        for i in range(rng.randint(1, 4))
    ]
    if rng.random() < 0.12:
        calls.append(call("job", {"key": "job"}, id="c_job"))
    limit = rng.choice((0.0005, 0.001, 0.003))
    per_tool = rng.random() < 0.4
    agent = Agent(
        ScriptedModel([reply(*calls), "done"]),
        tools=world.tools(),
        tool_timeout=limit if per_tool else None,
    )
    try:
        await agent.run("go", timeout=None if per_tool else limit)
    except (RunCancelled, ToolRetriesExceeded):  # parallel tool timeouts count as failures
        pass
    await _settle(world)


SCENARIOS: dict[str, Callable[[World], object]] = {
    "approval": approval_run,
    "replay": replay_run,
    "cancel": cancel_run,
    "timeout": timeout_run,
}


PROPERTIES = ("hold", "reject", "dedup", "fence", "reap", "process")


async def matrix(
    plan: dict[str, int], *, seed: int
) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Run each scenario `plan[name]` times; return (runs, violations, what happened)."""
    runs: Counter[str] = Counter()
    violations: Counter[str] = Counter(dict.fromkeys(PROPERTIES, 0))
    seen: Counter[str] = Counter()
    rng = random.Random(seed)
    for name, count in plan.items():
        for _ in range(count):
            world = World(rng=random.Random(rng.random()))
            await SCENARIOS[name](world)  # type: ignore[misc] # each scenario is a coroutine function
            runs[name] += 1
            violations.update(world.violations)
            seen["effects executed"] += sum(world.executed.values())
            seen["processes started"] += len(world.pids)
    return runs, violations, seen


PROTECTED = {"approval": 400, "replay": 300, "cancel": 350, "timeout": 200}


async def test_fault_matrix_every_property_holds(capsys: pytest.CaptureFixture[str]) -> None:
    runs, violations, seen = await matrix(PROTECTED, seed=20261130)
    with capsys.disabled():
        print(
            f"\nfault matrix: {sum(runs.values())} runs {dict(runs)}, {dict(seen)}; "
            f"violations {dict(violations)}"
        )
    assert sum(runs.values()) >= 1200
    assert seen["effects executed"] > 1000 and seen["processes started"] > 10
    assert +violations == Counter()


TWINS = [
    ("hold", {"hold_run_wide": False}, {"approval": 150}),
    ("reject", {"enforce_decisions": False}, {"approval": 150}),
    ("dedup", {"dedup": False}, {"replay": 200}),
    ("fence", {"fence": False}, {"cancel": 150}),
    ("reap", {"reap_tasks": False}, {"timeout": 100, "cancel": 50}),
]


@pytest.mark.parametrize(("prop", "off", "plan"), TWINS, ids=[t[0] for t in TWINS])
async def test_twin_without_the_protection_detects_violations(
    prop: str, off: dict[str, bool], plan: dict[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    with unsafe_switches(**off):
        runs, violations, _ = await matrix(plan, seed=7)
    with capsys.disabled():
        print(f"\ntwin {prop} {off}: {sum(runs.values())} runs; violations {dict(+violations)}")
    assert violations[prop] > 0


# -- sync tools: no effect after the call was abandoned (issue 13) ------------------------------

SYNC_DELAYS = (0.3, 0.45, 0.6)


@pytest.fixture(autouse=True)
def _no_workers_left() -> Iterator[None]:
    """Warm worker processes are stopped after each test (other tests count children)."""
    yield
    close_workers()


"""Seconds a sync tool works before its effect (always longer than a cancel or timeout takes)."""


@tool(side_effects="irreversible", isolation="process")
def sync_write(ledger: str, key: str, delay: float) -> str:
    """A sync effect: works `delay` seconds, then appends `key` to the ledger file."""
    time.sleep(delay)
    with Path(ledger).open("a", encoding="utf-8") as out:
        out.write(key + "\n")
    return f"wrote {key}"


sync_write_in_thread = sync_write.replace(name="sync_write_in_thread", isolation="thread")


async def _started(handle: RunHandle[str]) -> None:
    while not any(isinstance(e, ToolCallStarted) for e in handle.journal):  # noqa: ASYNC110
        await asyncio.sleep(0.002)


async def sync_run(tool_: Tool, ledger: Path, key: str, rng: random.Random) -> str:
    """Cancel, time out or let finish one sync call; the call's outcome."""
    delay = rng.choice(SYNC_DELAYS)
    mode = rng.choice(["cancel", "cancel", "timeout", "timeout", "finish"])
    args = {"ledger": str(ledger), "key": key, "delay": delay}
    limit = {"timeout": rng.choice((0.05, 0.1, 0.2)), "finish": 60.0}.get(mode)
    agent = Agent(
        ScriptedModel([reply(call(tool_.name, args, id=f"c_{key}")), "done"]),
        tools=[tool_],
        tool_timeout=limit,
    )
    handle = agent.start("go")
    if mode == "cancel":
        await _started(handle)
        await asyncio.sleep(rng.choice((0.0, 0.02, 0.1)))
        handle.cancel("stop pressed")
    with contextlib.suppress(RunCancelled):
        await handle.result()
    finished = [e for e in handle.journal if isinstance(e, ToolCallFinished)]
    return finished[0].outcome if finished else "cancelled"


def _ledger(ledger: Path) -> Counter[str]:
    return Counter(ledger.read_text().split()) if ledger.exists() else Counter[str]()


async def sync_matrix(tool_: Tool, ledger: Path, runs: int, *, seed: int) -> Counter[str]:
    """Abandoned calls whose effect landed anyway ("late"), and legitimate effects ("ok")."""
    rng = random.Random(seed)
    outcomes = {f"k{i}": await sync_run(tool_, ledger, f"k{i}", rng) for i in range(runs)}
    # an abandoned thread lands its effect within its delay: wait that long once, at the end
    await asyncio.sleep(max(SYNC_DELAYS) + 0.5)
    landed = _ledger(ledger)
    counts: Counter[str] = Counter(outcomes.values())
    for key, outcome in outcomes.items():
        if outcome == "ok":
            counts["ok effects"] += landed[key]
        else:
            counts["late effects"] += landed[key]
    counts["runs"] = runs
    return counts


async def test_sync_tools_in_a_process_never_land_after_cancel_or_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    counts = await sync_matrix(sync_write, tmp_path / "ledger", 20, seed=13)
    with capsys.disabled():
        print(f"\nsync tools, isolation=process: {dict(counts)}")
    assert counts["late effects"] == 0
    assert counts["cancelled"] + counts["timeout"] > 10
    assert counts["ok effects"] == counts["ok"] > 0  # legitimate effects still happen, once


async def test_sync_tools_twin_in_threads_land_after_cancel_or_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    counts = await sync_matrix(sync_write_in_thread, tmp_path / "ledger", 20, seed=13)
    with capsys.disabled():
        print(f"\ntwin sync tools, isolation=thread: {dict(counts)}")
    assert counts["late effects"] == counts["cancelled"] + counts["timeout"] > 10
