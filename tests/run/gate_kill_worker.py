"""A worker process of the gate's kill matrix (tests/run/test_gate_kill_matrix.py).

It runs, or resumes, one scenario of approvals against a SQLite or PostgreSQL store and can
SIGKILL itself after the N-th journal event this process records (a child's events
included), or inside a tool before or after its effect. Tools: `wire` (irreversible, the
policy asks), `charge` and `log` (irreversible, admitted by the policy). Every effect is
appended to an effects log, the outside world, with its idempotency key and fsync'd; each
tool reconciles against that log by key, answering what the tool would have returned.

Scenarios (the model issues the calls of one response, in this order):

- `rejected`: `wire`, `charge`; a handler rejects `wire`, so `charge` is held back.
- `approved`: `wire`, `charge`; a handler approves `wire`; `charge` waits, then runs.
- `child`: `delegate` (a child agent whose model calls `wire`, `charge`), `log`; the
  handler rejects the child's `wire`.
- `parked`: `wire`, `charge`, no handler: the run parks; the test decides, then resumes.
- `child-parked`: the `child` scenario with no handler: the tree parks.

Exit codes: 0 the run finished; 3 another process resumed it first; 4 it could not be
resumed; 5 anything else; 6 the run parked. `--stats` gets the events recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
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

SCENARIOS = ("rejected", "approved", "child", "parked", "child-parked")
REJECTION = "not to eve"
COUNTS = {"events": 0}


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _count_events(kill_after: int) -> None:
    original = _recorder.Recorder.record

    def record(self: _recorder.Recorder, event: Any) -> Any:
        done = original(self, event)
        COUNTS["events"] += 1
        if COUNTS["events"] == kill_after:
            _die()
        return done

    _recorder.Recorder.record = record


class World:
    """The effects log: one line per effect, `tool key`, on disk before the tool returns."""

    def __init__(self, path: Path, kill: str) -> None:
        self.path = path
        self.kill = kill

    def apply(self, name: str, key: str | None) -> None:
        if self.kill == f"tool:{name}:before":
            _die()
        with self.path.open("a", encoding="utf-8") as f:
            f.write(f"{name} {key}\n")
            f.flush()
            os.fsync(f.fileno())
        if self.kill == f"tool:{name}:after":
            _die()

    def tool(self, name: str, describe: str) -> Tool:
        world = self

        def check(key: str, arguments: Mapping[str, Any]) -> Reconciled:
            lines = world.path.read_text().splitlines() if world.path.exists() else []
            return Reconciled(ran=f"{name} {key}" in lines, result=describe.format(**arguments))

        @tool(name=name, side_effects="irreversible", reconcile=check)
        async def effect(ctx: RunContext[None], target: str) -> str:
            """Do something that cannot be undone.

            Args:
                target: To whom or what.
            """
            world.apply(name, ctx.idempotency_key)
            return describe.format(target=target)

        return effect


def _answer(calls: list[tuple[str, str]]) -> Any:
    """A model that issues `calls` at once, then answers with every result it got."""

    def answer(request: ModelRequest) -> Message:
        results = [p for m in request.messages if m.role == "tool" for p in m.tool_results]
        if not results:
            return reply(
                *(call(n, {t_key: t}, id=f"c_{n}") for n, t_key, t in _args(calls))
            ).message
        return Message.assistant(" | ".join(f"{p.name}: {p.text}" for p in results))

    return answer


def _args(calls: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    return [(n, "task" if n == "delegate" else "target", t) for n, t in calls]


def build(scenario: str, world: World, store: Any, approvals: Any) -> Agent[str]:
    wire = world.tool("wire", "wired to {target}")
    charge = world.tool("charge", "charged {target}")
    log = world.tool("log", "logged {target}")

    async def handler(request: ApprovalRequest) -> Decision | None:
        if scenario in ("parked", "child-parked"):
            return None  # a person decides, from another process
        return Approve() if scenario == "approved" else Reject(message=REJECTION)

    policy = ApprovalPolicy(rules=[Rule("wire", "ask")], handler=handler, store=approvals)
    pair = [("wire", "eve"), ("charge", "9")]
    if scenario.startswith("child"):
        child = Agent(FunctionModel(_answer(pair)), tools=[wire, charge], name="payer")
        tools = [child.as_tool(name="delegate", description="Delegate"), log]
        calls = [("delegate", "pay eve"), ("log", "audit")]
    else:
        tools, calls = [wire, charge], pair
    return Agent(
        FunctionModel(_answer(calls)),
        tools=tools,
        approvals=policy,
        store=store,
        name="gate-matrix",
    )


def open_stores(target: str) -> tuple[Any, Any]:
    if target.startswith("postgresql://"):
        store = PostgresStore(target)
        return store, PostgresApprovalStore(store)
    store = SQLiteStore(target)
    return store, SQLiteApprovalStore(store)


async def main(args: argparse.Namespace) -> int:
    store, approvals = open_stores(args.store)
    agent = build(args.scenario, World(Path(args.effects), args.kill), store, approvals)
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
        if hasattr(store, "close"):
            store.close()
    return 0


def run_worker(argv: list[str]) -> None:
    """The worker's whole life: parse `argv`, run or resume, exit with the code above."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=SCENARIOS, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--effects", required=True)
    parser.add_argument("--mode", choices=["run", "resume"], required=True)
    parser.add_argument("--run-id-file", required=True)
    parser.add_argument("--stats", default="")
    parser.add_argument("--kill", default="")
    parser.add_argument("--off", default="")
    parsed = parser.parse_args(argv)
    kill = parsed.kill
    _count_events(int(kill.removeprefix("event:")) if kill.startswith("event:") else 0)
    off = {name: False for name in parsed.off.split(",") if name}
    with unsafe_switches(**off) if off else contextlib.nullcontext():
        code = asyncio.run(main(parsed))
    if parsed.stats:
        Path(parsed.stats).write_text(json.dumps(COUNTS), encoding="utf-8")
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    run_worker(sys.argv[1:])
