"""A worker process for the kill test: serves a run whose `ship` tool waits mid-effect.

    python temporal_kill_worker.py ADDRESS QUEUE DIR

DIR holds the store (runs.db), `effects` (one line per effect, with its idempotency key),
`model_calls` (one line per model call; `boss_calls` for the parent agent `boss`, whose
one call runs `shipper` as a sub-agent; `batch` ships two orders in one response; `stamper`
calls the idempotent `stamp` in two steps, each a local activity), with LEGATO_TEST_NO_DEDUP
set the store's de-duplication is off (the twin), with LEGATO_TEST_TRUST_TEMPORAL set a
unit runs whatever the store shows done (the local-activity twin), `entered.<pid>` (written
when `ship` has done its effect and waits, or `stamp` its second one), `release` (lets it
return) and `stop` (the worker shuts down).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client

from legato import Agent, RunContext, tool
from legato.effects import unsafe_switches
from legato.models import ModelRequest
from legato.store import SQLiteStore
from legato.temporal import legato_worker
from legato.testing import FunctionModel, call, reply
from legato.tools import Reconciled


async def appears(path: Path) -> None:
    """Wait for another process to create `path`."""
    while True:
        if await asyncio.to_thread(path.exists):
            return
        await asyncio.sleep(0.05)


def build(folder: Path, *, calls: int = 1) -> Agent[str]:
    """The shipper: one response of `calls` calls of `ship` (orders A1, A2, ...), then done."""
    effects = folder / "effects"

    def find(key: str, arguments: Mapping[str, Any]) -> Reconciled:
        done = effects.exists() and key in effects.read_text(encoding="utf-8").split()
        return Reconciled(ran=True, result="shipped (found)") if done else Reconciled(ran=False)

    @tool(side_effects="irreversible", reconcile=find)
    async def ship(ctx: RunContext[None], order: str) -> str:
        """Ship an order.

        Args:
            order: Which order.
        """
        with effects.open("a", encoding="utf-8") as out:
            out.write(f"{ctx.idempotency_key}\n")
        (folder / f"entered.{os.getpid()}").touch()
        await appears(folder / "release")
        return f"shipped {order}"

    def answer(request: ModelRequest) -> Any:
        with (folder / "model_calls").open("a", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")
        if any(m.role == "tool" for m in request.messages):
            return "Shipped."
        return reply(*(call("ship", {"order": f"A{k}"}, id=f"c{k}") for k in range(1, calls + 1)))

    return Agent(FunctionModel(answer), tools=[ship], store=SQLiteStore(folder / "runs.db"))


def stamper(folder: Path) -> Agent[str]:
    """Two steps of one idempotent `stamp` call each (local activities), then the answer.

    The second call waits mid-effect (after writing its key) for `release`.
    """
    effects = folder / "effects"

    @tool(side_effects="idempotent")
    async def stamp(ctx: RunContext[None], order: str) -> str:
        """Stamp an order (safe to repeat with the same key).

        Args:
            order: Which order.
        """
        with effects.open("a", encoding="utf-8") as out:
            out.write(f"{ctx.idempotency_key}\n")
        if order == "A2":
            (folder / f"entered.{os.getpid()}").touch()
            await appears(folder / "release")
        return f"stamped {order}"

    def answer(request: ModelRequest) -> Any:
        with (folder / "model_calls").open("a", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")
        done = sum(1 for m in request.messages if m.role == "tool")
        if done >= 2:
            return "Stamped."
        return reply(call("stamp", {"order": f"A{done + 1}"}, id=f"s{done + 1}"))

    return Agent(FunctionModel(answer), tools=[stamp], store=SQLiteStore(folder / "runs.db"))


def trust_temporal() -> None:
    """The twin: what Temporal's history says is done counts, not what the store shows.

    Two protections are switched off. The `legato.start` activity, run again on a fresh
    worker, plans from what the start itself stored (not from the journal's end), and
    `RunDriver` runs the unit asked for even when the journal shows it done.
    """
    from legato.events import Journal
    from legato.run import _plan
    from legato.run._loop import RunDriver
    from legato.temporal import LegatoActivities

    advance = RunDriver.advance
    planner = _plan.next_unit
    asked: dict[int, list[Any]] = {}

    def trusting(self: Any, unit: Any) -> Any:
        asked[id(self._run)] = [unit]  # the unit's "is it still the plan?" check sees itself
        return advance(self, unit)

    def next_unit(run: Any) -> Any:
        waiting = asked.get(id(run))
        return waiting.pop() if waiting else planner(run)

    def first_plan(self: Any, agent: Any, name: str, run_id: str) -> Any:
        events = list(self._store(agent).load_run(run_id).events)
        claimed = next((k for k, e in enumerate(events) if e.kind == "run_resumed"), len(events))
        started = events[:claimed]  # what the start stored, before any unit claimed the run
        driver = RunDriver(agent.run_config(), journal=Journal(started), saved=len(started))
        return self._plan(driver, agent=name)

    RunDriver.advance = trusting
    _plan.next_unit = next_unit
    LegatoActivities._stored_plan = first_plan


def boss(folder: Path) -> Agent[str]:
    """A parent whose one call delegates the shipping to `build`'s agent (a child workflow)."""

    def answer(request: ModelRequest) -> Any:
        with (folder / "boss_calls").open("a", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")
        if any(m.role == "tool" for m in request.messages):
            return "All shipped."
        return reply(call("shipping", {"task": "ship A1"}, id="p1"))

    shipping = build(folder).as_tool(name="shipping", description="Ships orders.")
    return Agent(FunctionModel(answer), tools=[shipping], store=SQLiteStore(folder / "runs.db"))


async def main(address: str, queue: str, folder: Path) -> None:
    client = await Client.connect(address)
    worker = legato_worker(
        client,
        task_queue=queue,
        agents={
            "shipper": build(folder),
            "boss": boss(folder),
            "batch": build(folder, calls=2),
            "stamper": stamper(folder),
        },
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    if os.environ.get("LEGATO_TEST_TRUST_TEMPORAL"):
        trust_temporal()
    off = {"dedup": False} if os.environ.get("LEGATO_TEST_NO_DEDUP") else {}
    with unsafe_switches(**off):  # the twin: the store's de-duplication switched off
        async with worker:
            (folder / f"ready.{os.getpid()}").touch()
            await appears(folder / "stop")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
