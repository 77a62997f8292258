"""The one worker process of the kill matrices (tests/run/kill_harness.py starts it).

It runs, or resumes, one scenario's agent against a SQLite or PostgreSQL store and can
SIGKILL itself at a chosen point: after the N-th journal event this process records (a
child's events included), or inside a tool, before its effect or after it (before the tool
returns). Every effect is appended to an effects log, the outside world, with its
idempotency key and fsync'd; the irreversible tools reconcile against that log by key.

Scenarios (the model issues the calls of its first response at once):

- `matrix`: `pay` (irreversible), `put` (idempotent), `read` (read-only), `send`
  (irreversible, asked and approved by a handler) and `delegate` (a child agent whose
  model calls `refund`, irreversible). The answer is `done`.
- the gate's: `wire` (irreversible, the policy asks) beside `charge` and `log`
  (irreversible, admitted by the policy):
  - `rejected`: `wire`, `charge`; a handler rejects `wire`, so `charge` is held back;
  - `approved`: `wire`, `charge`; a handler approves `wire`; `charge` waits, then runs;
  - `child`: `delegate` (a child whose model calls `wire`, `charge`), `log`; the handler
    rejects the child's `wire`;
  - `parked`: `wire`, `charge`, no handler: the run parks; the test decides, then resumes;
  - `child-parked`: the `child` scenario with no handler: the tree parks.

What users do at the edges, on a SQLite file:

- `--two-objects`: the store and the approvals are two legato objects each opened by the
  file's path, and `--peer-at=N` has another process open and close the file (as `legato
  runs list` does) after the N-th event. `--plain-open` is the twin: it opens and closes a
  plain descriptor of the file after opening the stores, as legato's old header check did.
- `--wait-decision`: the asked call waits for a decision made elsewhere (the CLI, through
  the store) instead of asking a handler.

`--saved` gets, after every event, how many events of each run the recorder has committed;
`--stats` (at exit) the events this process recorded, its model requests and tool calls.
Exit codes: 0 the run finished; 3 another process resumed it first (`JournalConflict`); 4 it
could not be resumed (`RunNotResumable`); 5 anything else; 6 the run parked.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from legato import Agent, Tool, tool
from legato._effects_parts import unsafe_switches
from legato.approvals import (
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    Decision,
    PostgresApprovalStore,
    Reject,
    Rule,
    SQLiteApprovalStore,
)
from legato.exceptions import JournalConflict, RunNotResumable, RunParked
from legato.messages import Message
from legato.models import ModelRequest
from legato.run import _recorder
from legato.store import PostgresStore, SQLiteStore
from legato.testing import FunctionModel, call, reply
from legato.tools import Reconciled, RunContext

GATE_SCENARIOS = ("rejected", "approved", "child", "parked", "child-parked")
SCENARIOS = ("matrix", *GATE_SCENARIOS)
REJECTION = "not to eve"
COUNTS = {"events": 0, "requests": 0, "tools": 0}
PEER = (
    "import sqlite3, sys\n"
    "c = sqlite3.connect(sys.argv[1])\n"
    "c.execute('SELECT count(*) FROM runs').fetchone()\n"
    "c.close()\n"
)


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _watch_events(kill_after: int, saved_file: Path | None, peer: tuple[int, str]) -> None:
    """Count the events this process records; after each, write what each run committed
    (`saved_file`); at `peer`'s count run the peer on its file; die at `kill_after`."""
    original = _recorder.Recorder.record
    saved: dict[str, int] = {}
    peer_at, db = peer

    def record(self: _recorder.Recorder, event: Any) -> Any:
        done = original(self, event)
        COUNTS["events"] += 1
        if saved_file is not None:
            saved[self.state.run_id] = self.saved
            saved_file.write_text(json.dumps(saved))
        if COUNTS["events"] == peer_at:  # another process opens and closes the file, and is gone
            subprocess.run([sys.executable, "-c", PEER, db], check=True, timeout=60)
        if COUNTS["events"] == kill_after:
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


class World:
    """The effects log: one line per effect, `tool key`, on disk before the tool returns."""

    def __init__(self, path: Path, kill: str, *, reconcile: bool = True) -> None:
        self.path = path
        self.kill = kill
        self.reconcile = reconcile

    def apply(self, name: str, key: str | None) -> None:
        COUNTS["tools"] += 1
        if self.kill == f"tool:{name}:before":
            _die()
        if self.kill == f"pause:{name}:before":
            time.sleep(1.5)  # a slow effect: the process is alive while another one looks
        with self.path.open("a", encoding="utf-8") as f:
            f.write(f"{name} {key}\n")
            f.flush()
            os.fsync(f.fileno())
        if self.kill == f"tool:{name}:after":
            _die()

    def applied(self, name: str, key: str) -> bool:
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        return f"{name} {key}" in lines

    def reconciler(self, name: str, describe: str) -> Any:
        """A hook answering from the log whether the call ran, and what it returned."""
        if not self.reconcile:
            return None

        def check(key: str, arguments: Mapping[str, Any]) -> Reconciled:
            return Reconciled(ran=self.applied(name, key), result=describe.format(**arguments))

        return check

    def tool(self, name: str, describe: str) -> Tool:
        """An irreversible tool `name(target)` answering `describe`."""
        world = self

        @tool(name=name, side_effects="irreversible", reconcile=self.reconciler(name, describe))
        async def effect(ctx: RunContext[None], target: str) -> str:
            """Do something that cannot be undone.

            Args:
                target: To whom or what.
            """
            world.apply(name, ctx.idempotency_key)
            return describe.format(target=target)

        return effect


def _matrix_tools(world: World) -> list[Tool]:
    @tool(side_effects="irreversible", reconcile=world.reconciler("pay", "pay done"))
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

    @tool(side_effects="irreversible", reconcile=world.reconciler("send", "send done"))
    async def send(ctx: RunContext[None], to: str) -> str:
        """Send a message.

        Args:
            to: Recipient.
        """
        world.apply("send", ctx.idempotency_key)
        return f"sent to {to}"

    return [pay, put, read, send]


def _refunder(world: World) -> Agent[str]:
    @tool(side_effects="irreversible", reconcile=world.reconciler("refund", "refund done"))
    async def refund(ctx: RunContext[None], amount: int) -> str:
        """Refund.

        Args:
            amount: How much.
        """
        world.apply("refund", ctx.idempotency_key)
        return f"refunded {amount}"

    def answer(request: ModelRequest) -> Message:
        COUNTS["requests"] += 1
        if not any(m.role == "assistant" for m in request.messages):
            return reply(call("refund", {"amount": 5}, id="c_refund")).message
        return Message.assistant("refunded")

    return Agent(FunctionModel(answer), tools=[refund], name="refunder")


def _matrix_answer(request: ModelRequest) -> Message:
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


def _gate_answer(calls: list[tuple[str, str]]) -> Any:
    """A model that issues `calls` at once, then answers with every result it got."""

    def answer(request: ModelRequest) -> Message:
        COUNTS["requests"] += 1
        results = [p for m in request.messages if m.role == "tool" for p in m.tool_results]
        if not results:
            return reply(
                *(
                    call(n, {"task" if n == "delegate" else "target": t}, id=f"c_{n}")
                    for n, t in calls
                )
            ).message
        return Message.assistant(" | ".join(f"{p.name}: {p.text}" for p in results))

    return answer


def build(scenario: str, world: World, store: Any, approvals: Any, *, wait: bool) -> Agent[str]:
    """The scenario's agent; `wait`: the asked call waits for a decision made elsewhere."""

    async def handler(request: ApprovalRequest) -> Decision | None:
        if scenario in ("parked", "child-parked"):
            return None  # a person decides, from another process
        return Reject(message=REJECTION) if scenario in ("rejected", "child") else Approve()

    if scenario == "matrix":
        asked = "send"
        delegate = _refunder(world).as_tool(name="delegate", description="Delegate")
        tools: list[Any] = [*_matrix_tools(world), delegate]
        model = FunctionModel(_matrix_answer)
    else:
        asked = "wire"
        wire, charge = (
            world.tool("wire", "wired to {target}"),
            world.tool("charge", "charged {target}"),
        )
        pair = [("wire", "eve"), ("charge", "9")]
        if scenario.startswith("child"):
            child = Agent(FunctionModel(_gate_answer(pair)), tools=[wire, charge], name="payer")
            delegate = child.as_tool(name="delegate", description="Delegate")
            tools = [delegate, world.tool("log", "logged {target}")]
            model = FunctionModel(_gate_answer([("delegate", "pay eve"), ("log", "audit")]))
        else:
            tools, model = [wire, charge], FunctionModel(_gate_answer(pair))
    rules = [Rule(asked, "ask")]
    policy = (
        ApprovalPolicy(rules=rules, store=approvals, wait=60)
        if wait
        else ApprovalPolicy(rules=rules, handler=handler, store=approvals)
    )
    name = "matrix" if scenario == "matrix" else "gate-matrix"
    return Agent(model, tools=tools, approvals=policy, store=store, name=name)


def open_stores(target: str, *, two_objects: bool, plain_open: bool) -> tuple[Any, Any]:
    """The store and the approvals on `target` (one object, or two on the file's path)."""
    if target.startswith("postgresql://"):
        store = PostgresStore(target)
        return store, PostgresApprovalStore(store)
    store = SQLiteStore(target)
    if plain_open:  # the twin: a plain descriptor of the file, opened and closed
        with Path(target).open("rb") as fh:
            fh.read(16)
    return store, SQLiteApprovalStore(target if two_objects else store)


async def main(args: argparse.Namespace) -> int:
    store, approvals = open_stores(
        args.store, two_objects=args.two_objects, plain_open=args.plain_open
    )
    world = World(Path(args.effects), args.kill, reconcile=not args.no_reconcile)
    agent = build(args.scenario, world, store, approvals, wait=args.wait_decision)
    try:
        if args.mode == "run":
            handle = agent.start("go")
            await asyncio.to_thread(Path(args.run_id_file).write_text, handle.run_id)
            await handle.result()
        else:
            run_id = (await asyncio.to_thread(Path(args.run_id_file).read_text)).strip()
            await agent.resume(run_id)
    except RunParked:
        return 6
    except JournalConflict:
        return 3
    except RunNotResumable:
        return 4
    except Exception:
        traceback.print_exc()
        return 5
    finally:
        store.close()
    return 0


def run_worker(argv: list[str]) -> None:
    """The worker's whole life: parse `argv`, run or resume, exit with the code above."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=SCENARIOS, default="matrix")
    parser.add_argument("--store", required=True)
    parser.add_argument("--effects", required=True)
    parser.add_argument("--mode", choices=["run", "resume"], required=True)
    parser.add_argument("--run-id-file", required=True)
    parser.add_argument("--stats", default="")
    parser.add_argument("--saved", default="")
    parser.add_argument("--kill", default="")
    parser.add_argument("--off", default="")
    parser.add_argument("--no-reconcile", action="store_true")
    parser.add_argument("--barrier", type=int, default=0)
    parser.add_argument("--two-objects", action="store_true")
    parser.add_argument("--plain-open", action="store_true")
    parser.add_argument("--peer-at", type=int, default=0)
    parser.add_argument("--wait-decision", action="store_true")
    parsed = parser.parse_args(argv)
    if parsed.barrier:
        _barrier(Path(parsed.run_id_file).parent, parsed.barrier)
    kill = parsed.kill
    _watch_events(
        int(kill.removeprefix("event:")) if kill.startswith("event:") else 0,
        Path(parsed.saved) if parsed.saved else None,
        (parsed.peer_at, parsed.store),
    )
    off = {name: False for name in parsed.off.split(",") if name}
    with unsafe_switches(**off) if off else contextlib.nullcontext():
        code = asyncio.run(main(parsed))
    if parsed.stats:
        Path(parsed.stats).write_text(json.dumps(COUNTS), encoding="utf-8")
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    run_worker(sys.argv[1:])
