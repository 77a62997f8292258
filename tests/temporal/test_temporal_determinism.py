"""Determinism: workflow code reads no clock, random, uuid, environment, file or store;
a recorded history replays against the workflow, and a reordered workflow does not."""

from __future__ import annotations

import ast
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporal_agents import adder
from temporalio import workflow
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner
from temporalio.workflow import NondeterminismError

import legato.temporal._workflow as workflow_module
from legato.temporal import LegatoRun, RunInput, TemporalRuns, legato_worker
from legato.temporal._types import Plan, StartInput

ALLOWED_IMPORTS = {
    "__future__",
    "dataclasses",
    "datetime",
    "temporalio",
    "temporalio.common",
    "temporalio.exceptions",
    "legato.temporal._types",
}
FORBIDDEN_NAMES = {"time", "random", "uuid", "os", "open", "sqlite3", "socket", "Path", "environ"}
FORBIDDEN_ATTRIBUTES = {"now", "utcnow", "today", "time", "monotonic", "uuid4", "getenv", "environ"}
HISTORY = Path(__file__).parent / "history_adder.json"


def nondeterministic_reads(source: str) -> list[str]:
    """What in `source` reads a clock, randomness, the environment, a file or a store."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found += [f"import {n}" for n in names if n not in ALLOWED_IMPORTS]
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"name {node.id} (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            base = node.value
            # workflow.now() / workflow.uuid4() are Temporal's deterministic versions
            if not (isinstance(base, ast.Name) and base.id == "workflow"):
                found.append(f"attribute .{node.attr} (line {node.lineno})")
    return found


def test_workflow_code_reads_no_clock_random_uuid_environment_or_store() -> None:
    source = Path(workflow_module.__file__).read_text(encoding="utf-8")
    assert nondeterministic_reads(source) == []


def test_the_scan_finds_each_kind_of_read() -> None:  # the twin: the guard does see them
    snippet = (
        "import os\nimport uuid\nfrom legato.store import SQLiteStore\n"
        "def f():\n    open('x')\n    return uuid.uuid4(), datetime.now(), os.environ\n"
    )
    found = nondeterministic_reads(snippet)
    assert "import os" in found and "import legato.store" in found
    assert any(".uuid4" in f for f in found) and any(".now" in f for f in found)
    assert any("open" in f for f in found) and any("environ" in f for f in found)


@workflow.defn(name="legato.run", sandboxed=False)
class Reordered:
    """The workflow with its first two activities swapped (a change without `patched`)."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        timeout = timedelta(seconds=60)
        start = StartInput(run_id=run.run_id, agent=run.agent, prompt=run.prompt)
        plan = await workflow.execute_activity(
            "legato.model", start, start_to_close_timeout=timeout, result_type=Plan
        )
        await workflow.execute_activity(
            "legato.start", plan, start_to_close_timeout=timeout, result_type=Plan
        )


async def record(address: str, db: Path) -> WorkflowHistory:
    client = await Client.connect(address)
    queue = f"q-{uuid.uuid4().hex}"
    async with legato_worker(client, task_queue=queue, agents={"adder": adder(db)}):
        runs = TemporalRuns(client, task_queue=queue)
        run_id = await runs.start("adder", "What is 2 + 3?")
        await runs.result(run_id)
        return await runs.handle(run_id).fetch_history()


async def test_a_recorded_history_replays_and_a_reordered_workflow_does_not(
    temporal_address: str, tmp_path: Path
) -> None:
    history = await record(temporal_address, tmp_path / "runs.db")
    await Replayer(workflows=[LegatoRun]).replay_workflow(history)
    reordered = Replayer(workflows=[Reordered], workflow_runner=UnsandboxedWorkflowRunner())
    with pytest.raises(NondeterminismError):
        await reordered.replay_workflow(history)


async def test_the_checked_in_history_replays_against_todays_workflow() -> None:
    # made by tests/temporal/record_history.py; a change to workflow code that breaks it
    # needs `workflow.patched` (docs/temporal.md)
    history = WorkflowHistory.from_json("checked-in", HISTORY.read_text(encoding="utf-8"))
    await Replayer(workflows=[LegatoRun]).replay_workflow(history)
