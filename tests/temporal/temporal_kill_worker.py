"""A worker process for the kill test: serves a run whose `ship` tool waits mid-effect.

    python temporal_kill_worker.py ADDRESS QUEUE DIR

DIR holds the store (runs.db), `effects` (one line per effect, with its idempotency key),
`model_calls` (one line per model call; `boss_calls` for the parent agent `boss`, whose
one call runs `shipper` as a sub-agent; `batch` ships two orders in one response), with LEGATO_TEST_NO_DEDUP set the store's
de-duplication is off (the twin), `entered.<pid>` (written when `ship` has done its
effect and waits), `release` (lets `ship` return) and `stop` (the worker shuts down).
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
        agents={"shipper": build(folder), "boss": boss(folder), "batch": build(folder, calls=2)},
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    off = {"dedup": False} if os.environ.get("LEGATO_TEST_NO_DEDUP") else {}
    with unsafe_switches(**off):  # the twin: the store's de-duplication switched off
        async with worker:
            (folder / f"ready.{os.getpid()}").touch()
            await appears(folder / "stop")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
