"""A worker process of the kill matrix (tests/run/test_kill_matrix.py).

It runs, or resumes, one scripted agent run against a SQLite or PostgreSQL store, and can
SIGKILL itself at a chosen point: after the N-th journal event this process records, or
inside a tool, before its effect or after it (before the tool returns). The agent's model
issues five parallel calls: `pay` (irreversible), `put` (idempotent), `read` (read-only),
`send` (irreversible, asked and approved by a handler) and `delegate` (a child agent
whose own model calls `refund`, irreversible). Each effect is appended to an effects log,
the outside world, with its idempotency key and fsync'd; the irreversible tools reconcile
against that log by key.

Exit codes: 0 the run finished; 3 another process resumed it first (`JournalConflict`);
4 it could not be resumed (`RunNotResumable`); 5 anything else. The last line printed is a
JSON object (`--stats`): events this process recorded, model requests, tool calls run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from legato import Agent, tool
from legato._effects_parts import unsafe_switches
from legato.approvals import (
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    PostgresApprovalStore,
    Rule,
    SQLiteApprovalStore,
)
from legato.effects import UNKNOWN_OUTCOME
from legato.exceptions import JournalConflict, RunNotResumable
from legato.messages import Message
from legato.models import ModelRequest
from legato.run import _recorder
from legato.store import PostgresStore, SQLiteStore
from legato.testing import FunctionModel, call, reply
from legato.tools import Reconciled, RunContext

COUNTS = {"events": 0, "requests": 0, "tools": 0}


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_after_events(n: int) -> None:
    original = _recorder.Recorder.record

    def record(self: _recorder.Recorder, event: Any) -> Any:
        done = original(self, event)
        COUNTS["events"] += 1
        if COUNTS["events"] == n:
            _die()
        return done

    _recorder.Recorder.record = record


def _barrier(directory: Path, parties: int) -> None:
    """Every resumer has read the stored run before any claims it (a deterministic race)."""
    from legato.agent import Agent as _Agent

    original = _Agent._resume_prefix

    def prefix(self: _Agent[Any], run: Any) -> Any:
        found = original(self, run)
        (directory / f"loaded-{os.getpid()}").touch()
        for _ in range(1000):
            if len(list(directory.glob("loaded-*"))) >= parties:
                break
            time.sleep(0.01)
        return found

    _Agent._resume_prefix = prefix


def _count_events() -> None:
    original = _recorder.Recorder.record

    def record(self: _recorder.Recorder, event: Any) -> Any:
        done = original(self, event)
        COUNTS["events"] += 1
        return done

    _recorder.Recorder.record = record


class World:
    """The effects log: one line per effect, `tool key`, flushed to disk before returning."""

    def __init__(self, path: Path, kill: str, reconcile: bool) -> None:
        self.path = path
        self.kill = kill
        self.reconcile = reconcile

    def apply(self, name: str, key: str | None) -> None:
        COUNTS["tools"] += 1
        if self.kill == f"tool:{name}:before":
            _die()
        if self.kill == f"pause:{name}:before":
            time.sleep(1.5)  # a slow effect: the process is alive while another one looks
        with self.path.open("a") as f:
            f.write(f"{name} {key}\n")
            f.flush()
            os.fsync(f.fileno())
        if self.kill == f"tool:{name}:after":
            _die()

    def applied(self, name: str, key: str) -> bool:
        if not self.path.exists():
            return False
        return f"{name} {key}" in self.path.read_text().splitlines()

    def reconciler(self, name: str) -> Any:
        if not self.reconcile:
            return None

        def check(key: str, arguments: Mapping[str, Any]) -> Reconciled:
            return Reconciled(ran=self.applied(name, key), result=f"{name} done")

        return check


def build(world: World, store: Any, approvals: Any) -> Agent:
    @tool(side_effects="irreversible", reconcile=world.reconciler("pay"))
    async def pay(ctx: RunContext[None], amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        world.apply("pay", ctx.idempotency_key)
        return f"paid {amount}"

    @tool(side_effects="idempotent")
    async def put(ctx: RunContext[None], key: str) -> str:
        """Store a value.

        Args:
            key: Where.
        """
        world.apply("put", ctx.idempotency_key)
        return f"put {key}"

    @tool
    async def read(key: str) -> str:
        """Read a value.

        Args:
            key: Where.
        """
        COUNTS["tools"] += 1
        return f"value of {key}"

    @tool(side_effects="irreversible", reconcile=world.reconciler("send"))
    async def send(ctx: RunContext[None], to: str) -> str:
        """Send a message.

        Args:
            to: Recipient.
        """
        world.apply("send", ctx.idempotency_key)
        return f"sent to {to}"

    @tool(side_effects="irreversible", reconcile=world.reconciler("refund"))
    async def refund(ctx: RunContext[None], amount: int) -> str:
        """Refund.

        Args:
            amount: How much.
        """
        world.apply("refund", ctx.idempotency_key)
        return f"refunded {amount}"

    def child_answer(request: ModelRequest) -> Message:
        COUNTS["requests"] += 1
        if not any(m.role == "assistant" for m in request.messages):
            return reply(call("refund", {"amount": 5}, id="c_refund")).message
        return Message.assistant("refunded")

    def answer(request: ModelRequest) -> Message:
        COUNTS["requests"] += 1
        if not any(m.role == "assistant" for m in request.messages):
            return reply(
                call("pay", {"amount": 30}, id="c_pay"),
                call("put", {"key": "k"}, id="c_put"),
                call("read", {"key": "k"}, id="c_read"),
                call("send", {"to": "bob"}, id="c_send"),
                call("delegate", {"task": "refund 5"}, id="c_delegate"),
            ).message
        return Message.assistant("done")

    child = Agent(FunctionModel(child_answer), tools=[refund], name="refunder")

    async def approve(request: ApprovalRequest) -> Approve | None:
        if request.rule == UNKNOWN_OUTCOME:
            return Approve()  # only reached without reconcile hooks: "run it again"
        return Approve()

    policy = ApprovalPolicy(rules=[Rule("send", "ask")], handler=approve, store=approvals)
    return Agent(
        FunctionModel(answer),
        tools=[pay, put, read, send, child.as_tool(name="delegate", description="Delegate")],
        approvals=policy,
        store=store,
        name="matrix",
    )


def open_stores(target: str) -> tuple[Any, Any]:
    if target.startswith("postgresql://"):
        store = PostgresStore(target)
        return store, PostgresApprovalStore(store)
    store = SQLiteStore(target)
    return store, SQLiteApprovalStore(store)


async def main(args: argparse.Namespace) -> int:
    store, approvals = open_stores(args.store)
    world = World(Path(args.effects), args.kill, reconcile=not args.no_reconcile)
    agent = build(world, store, approvals)
    try:
        if args.mode == "run":
            handle = agent.start("go")
            await asyncio.to_thread(Path(args.run_id_file).write_text, handle.run_id)
            await handle.result()
        else:
            run_id = (await asyncio.to_thread(Path(args.run_id_file).read_text)).strip()
            await agent.resume(run_id)
    except JournalConflict:
        return 3
    except RunNotResumable as exc:
        print(f"not resumable: {exc}")
        return 4
    except Exception:
        traceback.print_exc()
        return 5
    return 0


def run_worker(argv: list[str]) -> None:
    """The worker's whole life: parse `argv`, run or resume, exit with the code above."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--effects", required=True)
    parser.add_argument("--mode", choices=["run", "resume"], required=True)
    parser.add_argument("--run-id-file", required=True)
    parser.add_argument("--stats", default="")
    parser.add_argument("--kill", default="")
    parser.add_argument("--off", default="")
    parser.add_argument("--no-reconcile", action="store_true")
    parser.add_argument("--barrier", type=int, default=0)
    parsed = parser.parse_args(argv)
    if parsed.barrier:
        _barrier(Path(parsed.run_id_file).parent, parsed.barrier)
    if parsed.kill.startswith("event:"):
        _kill_after_events(int(parsed.kill.removeprefix("event:")))
    else:
        _count_events()
    off = {name: False for name in parsed.off.split(",") if name}
    with unsafe_switches(**off) if off else contextlib.nullcontext():
        code = asyncio.run(main(parsed))
    if parsed.stats:
        Path(parsed.stats).write_text(json.dumps(COUNTS))
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    run_worker(sys.argv[1:])
