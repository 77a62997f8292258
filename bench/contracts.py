"""Fault injection over verified state: contracts on versus off.

A scripted "model" proposes transfers between five accounts; some proposals break the
preconditions (overdraft, unknown account, non-positive amount, self-transfer, nobody
logged in). The transfer tool returns wrong results at a set rate: a wrong amount, the
wrong recipient, a stale balance, or a malformed (non-integer) value.

For every call the benchmark asks an oracle what may follow: the state as it was (nothing
committed), or — only when the preconditions held — the correct transfer. Anything else is
a *corrupting* call. A correct call (preconditions hold, no fault) that is not committed is a
*false rejection*.

- `on`:  the call goes through `legato.contracts` (preconditions, draft, postconditions,
  commit), exactly as the agent loop drives it, minus the asyncio scheduling.
- `off`: the same tool function writes a plain dict, as tools in most frameworks do.

Overhead per checked call = time(on) - time(off), on a fault-free stream of valid calls,
in CPU time of this process (wall time on a shared machine measures the neighbours).
A second measurement runs whole agent runs (ScriptedModel, the real loop) to show the
contract cost next to the per-call cost of the loop itself.

    python bench/contracts.py [--calls 10000] [--fault-rate 0.2] [--invalid-rate 0.2] [--seed 7]
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from legato import Agent, RunContext, Tool
from legato.contracts import (
    State,
    StateOptions,
    StateSession,
    arg,
    at_least,
    check,
    contract,
    decreased_by,
    has,
    increased_by,
    unchanged_except,
)
from legato.contracts._session import Pending
from legato.testing import ScriptedModel, call, reply

ACCOUNTS = ("ann", "bob", "cat", "dan", "eve")
FAULTS = ("wrong_amount", "wrong_id", "stale", "malformed")
INVALID = ("overdraft", "unknown", "non_positive", "self", "logged_out")


class Bank(BaseModel):
    user: str | None = "ann"
    balances: dict[str, int]


CONTRACT = contract(
    requires=[
        has("user"),
        check(lambda state, args: args["amount"] > 0, name="positive amount"),
        check(lambda state, args: args["source"] != args["target"], name="two accounts"),
        has(("balances", arg("target"))),
        at_least(("balances", arg("source")), arg("amount")),
    ],
    ensures=[
        decreased_by(("balances", arg("source")), arg("amount")),
        increased_by(("balances", arg("target")), arg("amount")),
        unchanged_except(("balances", arg("source")), ("balances", arg("target"))),
    ],
    reads=["user", "balances"],
    writes=["balances"],
)


@dataclass(kw_only=True)
class Call:
    source: str
    target: str
    amount: int
    fault: str | None
    """The way the tool will get it wrong (None: it works)."""


class Tool_:
    """The transfer tool's body; `stale` remembers balances from earlier calls."""

    def __init__(self) -> None:
        self.stale: dict[str, int] = {}

    def __call__(self, state: MutableMapping[str, Any], c: Call) -> str:
        balances = state["balances"]
        remembered = self.stale.get(c.source)
        self.stale = dict(balances)
        if c.fault == "stale" and remembered is not None and remembered != balances[c.source]:
            balances[c.source] = remembered - c.amount
        elif c.fault == "wrong_amount":
            balances[c.source] -= c.amount + 1
        else:
            balances[c.source] -= c.amount
        recipient = c.target
        if c.fault == "wrong_id":
            recipient = next(a for a in ACCOUNTS if a not in (c.source, c.target))
        if c.fault == "malformed":  # a fractional amount where whole units are required
            balances[recipient] = balances.get(recipient, 0) + c.amount + 0.5
        else:
            balances[recipient] = balances.get(recipient, 0) + c.amount
        state["balances"] = balances
        return "ok"


def proposals(
    count: int, *, fault_rate: float, invalid_rate: float, seed: int
) -> list[tuple[Call, bool]]:
    """Calls and whether the caller should log out first (for `logged_out`)."""
    rng = random.Random(seed)
    out: list[tuple[Call, bool]] = []
    for _ in range(count):
        source, target = rng.sample(ACCOUNTS, 2)
        amount = rng.randint(1, 20)
        logout = False
        if rng.random() < invalid_rate:
            match rng.choice(INVALID):
                case "overdraft":
                    amount = 10_000
                case "unknown":
                    target = "zed"
                case "non_positive":
                    amount = rng.choice((0, -5))
                case "self":
                    target = source
                case _:
                    logout = True
        fault = rng.choice(FAULTS) if rng.random() < fault_rate else None
        out.append((Call(source=source, target=target, amount=amount, fault=fault), logout))
    return out


def precondition(user: str | None, balances: dict[str, Any], c: Call) -> bool:
    source_balance = balances.get(c.source)
    return (
        user is not None
        and c.amount > 0
        and c.source != c.target
        and isinstance(balances.get(c.target), int | float)
        and isinstance(source_balance, int | float)
        and source_balance >= c.amount
    )


def correct(balances: dict[str, Any], c: Call) -> dict[str, Any]:
    after = dict(balances)
    after[c.source] -= c.amount
    after[c.target] += c.amount
    return after


@dataclass(kw_only=True)
class Tally:
    calls: int = 0
    corrupting: int = 0
    false_rejections: int = 0
    committed: int = 0
    sound_calls: int = 0
    invalid_final: bool = False

    def judge(
        self, before: dict[str, Any], user: str | None, c: Call, after: dict[str, Any]
    ) -> None:
        self.calls += 1
        allowed = precondition(user, before, c)
        acceptable = [before] + ([correct(before, c)] if allowed else [])
        if after not in acceptable:
            self.corrupting += 1
        if after != before:
            self.committed += 1
        if allowed and c.fault is None:
            self.sound_calls += 1
            if after == before:
                self.false_rejections += 1


def initial() -> dict[str, int]:
    return dict.fromkeys(ACCOUNTS, 1_000)


def run_off(calls: list[tuple[Call, bool]]) -> Tally:
    tally = Tally()
    body = Tool_()
    state: dict[str, Any] = {"user": "ann", "balances": initial()}
    for c, logout in calls:
        state["user"] = None if logout else "ann"
        before = dict(state["balances"])
        view = {"user": state["user"], "balances": dict(state["balances"])}
        try:
            body(view, c)
            state["balances"] = view["balances"]
        except Exception:  # a malformed value broke the arithmetic: the call fails
            state["balances"] = view["balances"]
        tally.judge(before, state["user"], c, state["balances"])
    tally.invalid_final = any(not isinstance(v, int) or v < 0 for v in state["balances"].values())
    return tally


def _tool() -> Tool:
    def transfer(source: str, target: str, amount: int) -> str:
        """Transfer money."""
        return "ok"

    return Tool.from_function(transfer, contract=CONTRACT)


def run_on(calls: list[tuple[Call, bool]]) -> Tally:
    tally = Tally()
    body = Tool_()
    tool = _tool()
    session = StateSession(State(Bank(balances=initial())))
    state = session.state
    for index, (c, logout) in enumerate(calls):
        wanted_user = None if logout else "ann"
        if state["user"] != wanted_user:
            state.commit(user=wanted_user)
        before = state.snapshot()["balances"]
        args = {"source": c.source, "target": c.target, "amount": c.amount}
        checked = session.begin(tool, f"c{index}", args)
        if isinstance(checked, Pending):
            try:
                result = body(checked.draft, c)
                session.settle(checked, result=result)
            except Exception as exc:
                session.settle(checked, error=exc)
        tally.judge(before, wanted_user, c, state.snapshot()["balances"])
    tally.invalid_final = any(not isinstance(v, int) or v < 0 for v in state["balances"].values())
    return tally


# -- overhead ----------------------------------------------------------------------------------


def per_call(step: Callable[[int], None], count: int, batch: int = 250) -> float:
    """Median seconds per call over batches of `batch` calls (robust on a busy machine)."""
    samples: list[float] = []
    for first in range(0, count, batch):
        started = time.process_time()
        for index in range(first, min(first + batch, count)):
            step(index)
        samples.append((time.process_time() - started) / (min(first + batch, count) - first))
    return statistics.median(samples)


def overhead(count: int) -> dict[str, float]:
    c = Call(source="ann", target="bob", amount=1, fault=None)
    args = {"source": c.source, "target": c.target, "amount": c.amount}
    body = Tool_()
    plain: dict[str, Any] = {"user": "ann", "balances": dict.fromkeys(ACCOUNTS, 10**9)}

    def off(index: int) -> None:
        body(plain, c)

    def engine(made: Tool) -> Callable[[int], None]:
        session = StateSession(State(Bank(balances=dict.fromkeys(ACCOUNTS, 10**9))))

        def step(index: int) -> None:
            pending = session.begin(made, f"c{index}", args)
            assert isinstance(pending, Pending)
            session.settle(pending, result=body(pending.draft, c))

        return step

    bare = _tool().replace(contract=contract(writes=["balances"], unchecked_writes=True))
    t_off = per_call(off, count)
    t_bare = per_call(engine(bare), count)
    t_on = per_call(engine(_tool()), count)
    return {
        "off_us": t_off * 1e6,
        "state_only_us": t_bare * 1e6,
        "on_us": t_on * 1e6,
        "overhead_us": (t_on - t_off) * 1e6,
        "predicates_us": (t_on - t_bare) * 1e6,
    }


def timed(fn: Callable[[], None], repeat: int) -> float:
    samples: list[float] = []
    for _ in range(repeat):
        started = time.process_time()
        fn()
        samples.append(time.process_time() - started)
    return statistics.median(samples)


def loop_overhead(steps: int, repeat: int) -> dict[str, float]:
    """Agent runs of `steps` steps (one async transfer each): contracts on versus checks off.

    Short runs, repeated, so the scripted model's growing history does not dominate.
    """

    def make(made: Tool | None) -> Callable[[], None]:
        plain: dict[str, int] = dict.fromkeys(ACCOUNTS, 10**9)

        async def body(ctx: RunContext[Any], source: str, target: str, amount: int) -> str:
            balances = ctx.state["balances"] if ctx.state is not None else plain
            balances[source] -= amount
            balances[target] += amount
            if ctx.state is not None:
                ctx.state["balances"] = balances
            return "ok"

        contract_ = made.contract if made is not None else None
        tool = Tool.from_function(body, name="transfer", contract=contract_)
        turn = reply(call("transfer", {"source": "ann", "target": "bob", "amount": 1}))

        def run() -> None:
            agent = Agent(
                ScriptedModel([*([turn] * steps), "done"], chunk_size=4096),
                tools=[tool],
                state=Bank(balances=dict.fromkeys(ACCOUNTS, 10**9)) if made else None,
                state_options=StateOptions(show="none"),
                max_steps=steps + 1,
            )
            agent.run_sync("go")

        return run

    bare = _tool().replace(contract=contract(writes=["balances"], unchecked_writes=True))
    t_none = timed(make(None), repeat) / steps
    t_bare = timed(make(bare), repeat) / steps
    t_on = timed(make(_tool()), repeat) / steps
    return {"loop_none_us": t_none * 1e6, "loop_off_us": t_bare * 1e6, "loop_on_us": t_on * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--invalid-rate", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--loop-steps", type=int, default=10)
    parser.add_argument("--loop-runs", type=int, default=41)
    options = parser.parse_args()

    calls = proposals(
        options.calls,
        fault_rate=options.fault_rate,
        invalid_rate=options.invalid_rate,
        seed=options.seed,
    )
    faulty = sum(1 for c, _ in calls if c.fault)
    print(
        f"legato contracts benchmark — {platform.python_implementation()} "
        f"{platform.python_version()} on {platform.machine()}, {time.strftime('%Y-%m-%d')}"
    )
    print(
        f"{len(calls)} proposed calls: {faulty} with a faulty tool result "
        f"(rate {options.fault_rate}), invalid proposals at rate {options.invalid_rate}, "
        f"seed {options.seed}"
    )
    print()
    print(
        f"{'':10}{'corrupting calls':>22}{'false rejections':>24}{'commits':>10}{'bad final state':>17}"
    )
    for name, tally in (("off", run_off(calls)), ("on", run_on(calls))):
        rate = tally.corrupting / tally.calls
        false_rate = tally.false_rejections / max(tally.sound_calls, 1)
        print(
            f"{name:10}{tally.corrupting:>8} ({rate:7.2%})      "
            f"{tally.false_rejections:>6} of {tally.sound_calls:<6}({false_rate:6.2%})"
            f"{tally.committed:>10}{tally.invalid_final!s:>17}"
        )
    print()
    figures = overhead(options.calls)
    print(f"per call, {options.calls} valid calls, median of batches of 250, CPU time:")
    print(f"  off (plain dict, no checks)          {figures['off_us']:8.2f} µs")
    print(f"  state only (draft + commit, no checks){figures['state_only_us']:7.2f} µs")
    print(f"  on (5 pre + 3 post predicates)       {figures['on_us']:8.2f} µs")
    print(f"  overhead per checked call (on - off) {figures['overhead_us']:8.2f} µs (target < 50)")
    print(f"    of which the 8 predicates          {figures['predicates_us']:8.2f} µs")
    loop = loop_overhead(options.loop_steps, options.loop_runs)
    print(
        f"whole agent runs (ScriptedModel, {options.loop_steps} steps of one async call each, "
        f"median of {options.loop_runs} runs, CPU time):"
    )
    print(f"  no verified state (plain dict)       {loop['loop_none_us']:8.1f} µs per step")
    print(f"  draft + commit, no checks            {loop['loop_off_us']:8.1f} µs per step")
    print(f"  contract checked                     {loop['loop_on_us']:8.1f} µs per step")
    extra = loop["loop_on_us"] - loop["loop_none_us"]
    print(f"  state + contract, all costs included {extra:8.1f} µs per step")


if __name__ == "__main__":
    main()
