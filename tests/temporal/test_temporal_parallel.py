"""`ActivitySettings(parallel_tools=True)`: a response's calls run concurrently in one
`legato.tools` activity, under the gate as in `agent.run` (an ask still holds the rest)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporal_agents import activity_types, open_request
from temporalio.client import Client, WorkflowHistory

from legato import Agent, tool
from legato.approvals import ApprovalPolicy, Rule, SQLiteApprovalStore
from legato.events import JournalEvent, RunFinished, ToolCallFinished
from legato.store import SQLiteStore
from legato.temporal import ActivitySettings, TemporalRuns, legato_worker
from legato.testing import ScriptedModel, call, reply


class Probe:
    """Counts the calls in flight at once (their peak) and the calls that ran."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.ran: list[str] = []

    async def enter(self, name: str) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.2)  # long enough for calls run together to overlap
        self.ran.append(name)
        self.now -= 1


def probing(db: Path, probe: Probe, *, ask: bool = False) -> Agent[str]:
    """One response of four calls of `look` (or three and one `send` that asks first)."""

    @tool
    async def look(n: int) -> str:
        """Look at one thing.

        Args:
            n: Which.
        """
        await probe.enter(f"look{n}")
        return f"saw {n}"

    @tool(side_effects="irreversible")
    async def send(n: int) -> str:
        """Send one thing.

        Args:
            n: Which.
        """
        await probe.enter(f"send{n}")
        return f"sent {n}"

    calls = [call("look", {"n": i}, id=f"c{i}") for i in range(3)]
    calls.append(call("send", {"n": 3}, id="c3") if ask else call("look", {"n": 3}, id="c3"))
    model = ScriptedModel([reply(*calls), "Seen."])
    policy = ApprovalPolicy(rules=[Rule("send", "ask")], store=SQLiteApprovalStore(db))
    return Agent(model, tools=[look, send], store=SQLiteStore(db), approvals=policy, name="prober")


def activities(history: WorkflowHistory) -> list[str]:
    return activity_types(history)  # regular and local


async def probe_run(
    address: str, db: Path, probe: Probe, *, parallel: bool
) -> tuple[list[JournalEvent], list[str]]:
    client = await Client.connect(address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"prober": probing(db, probe)}):
        runs = TemporalRuns(client, task_queue=queue)
        settings = ActivitySettings(parallel_tools=parallel)
        run_id = await runs.start("prober", "Look at four things.", settings=settings)
        outcome = await runs.result(run_id)
        history = await runs.handle(run_id).fetch_history()
    assert outcome.status == "finished"
    return list(SQLiteStore(db).load_run(run_id).events), activities(history)


async def test_a_responses_calls_run_concurrently_in_one_tools_activity(
    temporal_address: str, tmp_path: Path
) -> None:
    probe = Probe()
    events, scheduled = await probe_run(
        temporal_address, tmp_path / "runs.db", probe, parallel=True
    )
    assert probe.peak == 4 and sorted(probe.ran) == [f"look{i}" for i in range(4)]
    assert scheduled.count("legato.tools") == 1 and "legato.tool" not in scheduled
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert sorted(f.call.id for f in finished) == ["c0", "c1", "c2", "c3"]
    assert isinstance(events[-1], RunFinished) and events[-1].output == "Seen."


async def test_twin_by_default_the_calls_run_one_activity_after_another(
    temporal_address: str, tmp_path: Path
) -> None:
    probe = Probe()
    _, scheduled = await probe_run(temporal_address, tmp_path / "runs.db", probe, parallel=False)
    assert probe.peak == 1 and len(probe.ran) == 4
    assert scheduled.count("legato.tool") == 4 and "legato.tools" not in scheduled


async def test_an_ask_among_parallel_calls_parks_the_run_and_the_decision_resumes_it(
    temporal_address: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    probe = Probe()
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex}"
    agent = probing(db, probe, ask=True)
    async with legato_worker(client, task_queue=queue, agents={"prober": agent}):
        runs = TemporalRuns(client, task_queue=queue)
        settings = ActivitySettings(parallel_tools=True)
        run_id = await runs.start("prober", "Look, then send.", settings=settings)
        request_id = await open_request(runs, run_id)
        assert "send3" not in probe.ran  # the irreversible call waits for its decision
        await runs.decide(run_id, request_id, "approve")
        outcome = await runs.result(run_id)
    assert outcome.status == "finished"
    assert sorted(probe.ran) == ["look0", "look1", "look2", "send3"]  # each call once
    events = list(SQLiteStore(db).load_run(run_id).events)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert sorted(f.call.id for f in finished) == ["c0", "c1", "c2", "c3"]


async def test_a_worker_killed_inside_a_tools_activity_each_effect_happens_once(
    temporal_address: str, tmp_path: Path
) -> None:
    from test_temporal_kill import kill_mid_tool

    outcome, effects, callers, events, first, second = await kill_mid_tool(
        temporal_address, tmp_path, dedup=True, agent="batch", parallel=True
    )
    assert outcome.status == "finished"
    assert len(effects) == len(set(effects)) == 2  # two calls, each effect once
    assert callers == [str(first), str(second)]  # no model call repeated
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert sorted(f.call.id for f in finished) == ["c1", "c2"]
