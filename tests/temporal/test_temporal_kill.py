"""Two worker processes; the one inside a tool is SIGKILLed: the other finishes the run,
the effect happened once, and no model call was repeated. On the regular-activity path
(an irreversible tool) and on the local-activity path (model calls and idempotent tools)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from legato.events import JournalEvent, RunResumed, ToolCallFinished
from legato.exceptions import DurableRunFailed
from legato.store import SQLiteStore
from legato.temporal import ActivitySettings, RunOutcome, TemporalRuns

WORKER = Path(__file__).parent / "temporal_kill_worker.py"
SRC = Path(__file__).parents[2] / "src"


def spawn(
    address: str,
    queue: str,
    folder: Path,
    *,
    dedup: bool = True,
    extra: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, **(extra or {})}
    if not dedup:
        env["LEGATO_TEST_NO_DEDUP"] = "1"
    args = [sys.executable, str(WORKER), address, queue, str(folder)]
    return subprocess.Popen(args, env=env, start_new_session=True)


def wait_for(path_glob: str, folder: Path, proc: subprocess.Popen[bytes]) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = sorted(folder.glob(path_glob))
        if found:
            return found[0]
        assert proc.poll() is None, f"the worker exited with {proc.returncode}"
        time.sleep(0.05)
    raise AssertionError(f"{path_glob} never appeared")


async def kill_mid_tool(
    address: str, folder: Path, *, dedup: bool, agent: str = "shipper", parallel: bool = False
) -> tuple[RunOutcome, list[str], list[str], list[JournalEvent], int, int]:
    """Worker 1 runs the tool and is killed inside it; worker 2 finishes the run."""
    temporal_address, tmp_path = address, folder
    queue = f"q-{uuid.uuid4().hex}"
    first = spawn(temporal_address, queue, tmp_path)
    second: subprocess.Popen[bytes] | None = None
    try:
        wait_for(f"ready.{first.pid}", tmp_path, first)
        client = await Client.connect(temporal_address)
        runs = TemporalRuns(client, task_queue=queue)
        settings = ActivitySettings(heartbeat=2.0, initial_interval=0.2, parallel_tools=parallel)
        run_id = await runs.start(agent, "Ship A1", settings=settings)
        wait_for(f"entered.{first.pid}", tmp_path, first)  # the effect is done; the call waits
        second = spawn(temporal_address, queue, tmp_path, dedup=dedup)
        wait_for(f"ready.{second.pid}", tmp_path, second)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        (tmp_path / "release").touch()
        outcome = await runs.result(run_id)
    finally:
        (tmp_path / "stop").touch()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

    assert second is not None
    effects = (tmp_path / "effects").read_text(encoding="utf-8").split()
    callers = (tmp_path / "model_calls").read_text(encoding="utf-8").split()
    events = list(SQLiteStore(tmp_path / "runs.db").load_run(run_id).events)
    return outcome, effects, callers, events, first.pid, second.pid


async def test_a_worker_killed_mid_tool_the_other_finishes_each_effect_once(
    temporal_address: str, tmp_path: Path
) -> None:
    outcome, effects, callers, events, first, second = await kill_mid_tool(
        temporal_address, tmp_path, dedup=True
    )
    assert outcome.status == "finished"
    assert len(effects) == 1  # the effect ran once, though its activity ran twice
    assert callers == [str(first), str(second)]  # one model call per step: none repeated
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [f.result.text for f in finished] == ["shipped (found)"]  # reconciled, not re-run


async def test_twin_without_the_stores_dedup_the_killed_effect_runs_twice(
    temporal_address: str, tmp_path: Path
) -> None:
    outcome, effects, _, _, _, _ = await kill_mid_tool(temporal_address, tmp_path, dedup=False)
    assert outcome.status == "finished"
    assert len(effects) == 2 and len(set(effects)) == 1  # Temporal alone: at least once


async def kill_mid_local_step(
    address: str, folder: Path, *, trust_temporal: bool
) -> tuple[str, list[str], list[str], list[JournalEvent], int, int, list[str]]:
    """Two workers wait; the one running the run is killed inside its second idempotent
    call. Every unit is a local activity (the default): none of them is in Temporal's
    history yet, so the other worker runs them all again from the workflow's start."""
    queue = f"q-{uuid.uuid4().hex}"
    extra = {"LEGATO_TEST_TRUST_TEMPORAL": "1"} if trust_temporal else {}
    procs = [spawn(address, queue, folder, extra=extra) for _ in range(2)]
    status = "finished"
    try:
        for proc in procs:
            wait_for(f"ready.{proc.pid}", folder, proc)
        client = await Client.connect(address)
        runs = TemporalRuns(client, task_queue=queue)
        settings = ActivitySettings(initial_interval=0.2, max_attempts=3)
        run_id = await runs.start("stamper", "Stamp A1 and A2", settings=settings)
        entered = wait_for("entered.*", folder, procs[0])
        first = next(p for p in procs if entered.name == f"entered.{p.pid}")
        second = next(p for p in procs if p is not first)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        (folder / "release").touch()
        try:
            await runs.result(run_id)
        except DurableRunFailed:
            status = "failed"
        history = await runs.handle(run_id).fetch_history()
        kinds = [EventType.Name(e.event_type) for e in history.events]
    finally:
        (folder / "stop").touch()
        for proc in procs:
            if proc.poll() is None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    effects = (folder / "effects").read_text(encoding="utf-8").split()
    callers = (folder / "model_calls").read_text(encoding="utf-8").split()
    events = list(SQLiteStore(folder / "runs.db").load_run(run_id).events)
    assert status == "finished" or trust_temporal
    return status, effects, callers, events, first.pid, second.pid, kinds


async def test_a_worker_killed_in_a_local_activity_the_other_reruns_none_finished(
    temporal_address: str, tmp_path: Path
) -> None:
    _, effects, callers, events, first, second, kinds = await kill_mid_local_step(
        temporal_address, tmp_path, trust_temporal=False
    )
    assert "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED" not in kinds  # every unit ran locally
    assert "EVENT_TYPE_MARKER_RECORDED" in kinds
    s1, s2 = dict.fromkeys(effects)
    assert effects == [s1, s2, s2]  # the finished call once; the killed one again, same key
    assert callers == [str(first), str(first), str(second)]  # no model call paid twice
    # the first worker's workflow task timed out with none of its local units recorded:
    # the other worker ran the workflow from its start, and `legato.start` planned from the
    # journal's end, so no finished unit was claimed again; only the killed call was
    assert "EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT" in kinds
    claims = [e.owner.rsplit(":", 1)[1] for e in events if isinstance(e, RunResumed)]
    assert claims.count(f"{s1}#1") == 1 and claims.count(f"{s2}#1") == 2
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [f.result.text for f in finished] == ["stamped A1", "stamped A2"]


async def test_twin_trusting_temporal_the_replayed_local_units_run_again(
    temporal_address: str, tmp_path: Path
) -> None:
    _, _, callers, _, _, _, _ = await kill_mid_local_step(
        temporal_address, tmp_path, trust_temporal=True
    )
    # the finished units Temporal replays do their work again: a model call paid twice
    assert len(callers) > 3
