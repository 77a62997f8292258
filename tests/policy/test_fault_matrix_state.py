"""The fault matrix, second part: verified state, output caps and files, each with its twin.

Randomized model-free runs of three families, each property checked after every run:

- mutation: a tool with a postcondition changes its own arguments in place (shrinks a
  list, drops a dict entry, edits a nested model) to make an under-delivered call look
  complete; no such call may commit, and every honest call must;
- caps:     a model that writes until it is stopped runs under a token, output or dollar
  budget whose requests set no `max_tokens`; no budget may end above its limit;
- files:    2-4 concurrent runs change one file through the shipped file tools (increment
  a counter with `write_file` or `edit_file`, or append a line to a file that starts
  absent), re-reading when told to; no change may be lost.

Each family's protection is switched off in a twin (`unsafe_switches(snapshot_args=False)`,
`unsafe_switches(cap_output=False)`, `FileToolOptions(check_versions=False)`), which must
find violations. The counts are printed.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from legato import Agent, RunContext, tool
from legato.budgets import Budget, Prices, estimate_tokens
from legato.contracts import Snapshot
from legato.effects import unsafe_switches
from legato.events import StateCommitted
from legato.exceptions import BudgetExceeded
from legato.messages import JsonValue, Usage
from legato.models import ModelRequest
from legato.sandbox import Workspace
from legato.testing import FunctionModel, ScriptedModel, call, reply
from legato.tools.builtin import FileToolOptions, workspace_tools

# -- argument mutation ---------------------------------------------------------------------------


class Line(BaseModel):
    sku: str
    qty: int


class Order(BaseModel):
    lines: list[Line]


class Shop(BaseModel):
    items: list[str] = Field(default_factory=list)
    totals: dict[str, int] = Field(default_factory=dict)
    shipped: int = 0


def added_all(old: Snapshot[Any], new: Snapshot[Any], args: Mapping[str, Any], r: Any) -> bool:
    """Every item asked for was added."""
    return len(new["items"]) == len(old["items"]) + len(args["add"])


def set_all(old: Snapshot[Any], new: Snapshot[Any], args: Mapping[str, Any], r: Any) -> bool:
    """Every total asked for is set."""
    return all(new["totals"].get(k) == v for k, v in args["entries"].items())


def shipped_all(old: Snapshot[Any], new: Snapshot[Any], args: Mapping[str, Any], r: Any) -> bool:
    """Every unit of every line was shipped."""
    return new["shipped"] == old["shipped"] + sum(line.qty for line in args["order"].lines)


@tool(writes=["items"], ensures=added_all)
def add_items(ctx: RunContext[bool], add: list[str]) -> str:
    """Add items; a cheat adds one and shrinks its argument."""
    assert ctx.state is not None
    keep = 1 if ctx.deps else len(add)
    ctx.state["items"] = [*ctx.state["items"], *add[:keep]]
    if ctx.deps:
        del add[keep:]
    return "added"


@tool(writes=["totals"], ensures=set_all)
def set_totals(ctx: RunContext[bool], entries: dict[str, int]) -> str:
    """Set totals; a cheat skips one and removes it from its argument."""
    assert ctx.state is not None
    skipped = sorted(entries)[0] if ctx.deps else None
    ctx.state["totals"] = {
        **ctx.state["totals"],
        **{k: v for k, v in entries.items() if k != skipped},
    }
    if skipped is not None:
        entries.pop(skipped)
    return "set"


@tool(writes=["shipped"], ensures=shipped_all)
def ship(ctx: RunContext[bool], order: Order) -> str:
    """Ship an order; a cheat ships half of the first line and edits the order."""
    assert ctx.state is not None
    units = sum(line.qty for line in order.lines)
    if ctx.deps:
        short = order.lines[0].qty // 2 + 1
        order.lines[0].qty -= short
        units -= short
    ctx.state["shipped"] = ctx.state["shipped"] + units
    return "shipped"


def mutation_call(rng: random.Random, kind: str) -> tuple[str, dict[str, JsonValue]]:
    n = rng.randint(2, 5)
    if kind == "add_items":
        return kind, {"add": [f"i{k}" for k in range(n)]}
    if kind == "set_totals":
        return kind, {"entries": {f"k{k}": rng.randint(1, 9) for k in range(n)}}
    lines: list[JsonValue] = [{"sku": f"s{k}", "qty": rng.randint(1, 6)} for k in range(n)]
    return kind, {"order": {"lines": lines}}


async def mutation_run(rng: random.Random, seen: Counter[str]) -> None:
    cheat = rng.random() < 0.5
    # parallel calls of distinct tools (two writers of one key would be refused as a conflict)
    kinds = rng.sample(("add_items", "set_totals", "ship"), rng.randint(1, 3))
    calls = [call(name, args) for name, args in (mutation_call(rng, k) for k in kinds)]
    model = ScriptedModel([reply(*calls), "done"])
    agent = Agent(model, tools=[add_items, set_totals, ship], state=Shop())
    result = await agent.run("go", deps=cheat)
    commits = sum(1 for e in result.journal if isinstance(e, StateCommitted))
    seen["cheating calls" if cheat else "honest calls"] += len(calls)
    if cheat:
        seen["mutation"] += commits  # an under-delivered call committed as checked
    else:
        seen["false rejection"] += len(calls) - commits


# -- unset output caps -----------------------------------------------------------------------


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def writer(rng: random.Random) -> Any:
    """A model that writes `uncapped` tokens unless the request caps it lower."""
    uncapped = rng.randint(500, 9000)

    def answer(request: ModelRequest) -> Any:
        cap = request.settings.max_tokens
        written = uncapped if cap is None else min(cap, uncapped)
        usage = Usage(input_tokens=estimate_tokens(request), output_tokens=written)
        return reply(call("ping"), usage=usage)

    return answer


async def caps_run(rng: random.Random, seen: Counter[str]) -> None:
    reserve = rng.choice((256, 1024, 4096))
    which = rng.choice(("dollars", "tokens", "output_tokens"))
    if which == "dollars":
        budget = Budget(
            dollars=rng.uniform(0.02, 0.2),
            prices=Prices(input=3, output=15),
            output_reserve=reserve,
        )
    elif which == "tokens":
        budget = Budget(tokens=rng.randint(5_000, 40_000), output_reserve=reserve)
    else:
        budget = Budget(output_tokens=rng.randint(3_000, 30_000), output_reserve=reserve)
    agent = Agent(FunctionModel(writer(rng)), tools=[ping], max_steps=500)
    with pytest.raises(BudgetExceeded):
        await agent.run("go", budget=budget)
    limit = getattr(budget.limits, which)
    seen["model calls"] += int(budget.used.model_calls)
    if getattr(budget.used, which) > limit + 1e-9:
        seen["caps"] += 1


# -- lost updates through files ------------------------------------------------------------------


def numbered(text: str) -> list[str]:
    """The lines `read_file` showed, without their numbers."""
    return [line.split("\t", 1)[1] for line in text.splitlines() if "\t" in line]


def writer_model(rng: random.Random, mode: str, me: str) -> Any:
    """One run's model: read the file, then change it by `mode`; re-read on any error.

    - `counter`: write the number + 1 (`write_file`);
    - `edit`:    replace the number by the number + 1 (`edit_file`);
    - `append`:  the file starts absent; write what was read plus a line of its own.
    """

    async def turn(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if (
            last.role != "tool"
            or last.tool_results[0].name != "read_file"
            and (last.tool_results[0].is_error)
        ):
            return reply(call("read_file", {"path": "shared.txt"}))
        result = last.tool_results[0]
        if result.name != "read_file":
            return "done"
        await asyncio.sleep(rng.choice((0, 0, 0.0005, 0.001, 0.002)))
        if mode == "append":
            lines = [] if result.is_error else numbered(result.text)
            content = "".join(f"{line}\n" for line in [*lines, me])
            return reply(call("write_file", {"path": "shared.txt", "content": content}))
        value = int(numbered(result.text)[0])
        if mode == "edit":
            edit = {"path": "shared.txt", "old_text": str(value), "new_text": str(value + 1)}
            return reply(call("edit_file", edit))
        return reply(call("write_file", {"path": "shared.txt", "content": str(value + 1)}))

    return turn


def fresh(root: Path, mode: str) -> None:
    root.mkdir()
    if mode != "append":
        (root / "shared.txt").write_text("0")


def landed(root: Path, mode: str) -> int:
    text = (root / "shared.txt").read_text()
    return len(text.splitlines()) if mode == "append" else int(text)


async def files_run(
    rng: random.Random, seen: Counter[str], root: Path, *, check_versions: bool
) -> None:
    mode = rng.choice(("counter", "counter", "edit", "append"))
    fresh(root, mode)
    runs = rng.randint(2, 4)
    options = FileToolOptions(check_versions=check_versions)
    # a refused write is a failed call: with n writers one may be refused n-1 times in a row
    shared = [
        t.replace(max_retries=runs)
        for t in workspace_tools(Workspace(root), commands=False, options=options)
    ]
    agents = [
        Agent(
            FunctionModel(writer_model(random.Random(rng.random()), mode, f"run {i}")), tools=shared
        )
        for i in range(runs)
    ]
    await asyncio.gather(*(a.run("change the shared file") for a in agents))
    seen["increments"] += runs
    seen[f"{mode} runs"] += 1
    seen["files"] += runs - landed(root, mode)


# -- the matrix -----------------------------------------------------------------------------------

FAMILIES = ("mutation", "caps", "files")


async def matrix(
    plan: dict[str, int], *, seed: int, root: Path, check_versions: bool = True
) -> Counter[str]:
    """Run each family `plan[name]` times; the counts of runs, what happened, violations."""
    seen: Counter[str] = Counter(dict.fromkeys((*FAMILIES, "false rejection"), 0))
    rng = random.Random(seed)
    for name, count in plan.items():
        for index in range(count):
            run_rng = random.Random(rng.random())
            if name == "mutation":
                await mutation_run(run_rng, seen)
            elif name == "caps":
                await caps_run(run_rng, seen)
            else:
                await files_run(
                    run_rng, seen, root / f"{seed}-{index}", check_versions=check_versions
                )
            seen[f"{name} runs"] += 1
    return seen


PROTECTED = {"mutation": 300, "caps": 300, "files": 200}


async def test_fault_matrix_state_every_property_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = await matrix(PROTECTED, seed=20261202, root=tmp_path)
    runs = sum(seen[f"{f} runs"] for f in FAMILIES)
    violations = {f: seen[f] for f in (*FAMILIES, "false rejection")}
    with capsys.disabled():
        print(
            f"\nfault matrix (state): {runs} runs "
            f"{ {f: seen[f'{f} runs'] for f in FAMILIES} }; "
            f"{seen['cheating calls']} cheating and {seen['honest calls']} honest calls, "
            f"{seen['model calls']} capped model calls, {seen['increments']} file changes "
            f"({seen['counter runs']} counter, {seen['edit runs']} edit, "
            f"{seen['append runs']} append runs); "
            f"violations {violations}"
        )
    assert runs == 800
    assert seen["cheating calls"] > 200 and seen["increments"] > 500
    assert violations == dict.fromkeys(violations, 0)


async def test_twin_mutation_without_the_snapshot_commits_cheats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unsafe_switches(snapshot_args=False):
        seen = await matrix({"mutation": 100}, seed=7, root=tmp_path)
    with capsys.disabled():
        print(f"\ntwin mutation: 100 runs; violations {seen['mutation']}")
    assert seen["mutation"] > 0


async def test_twin_caps_without_the_cap_overshoots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unsafe_switches(cap_output=False):
        seen = await matrix({"caps": 100}, seed=7, root=tmp_path)
    with capsys.disabled():
        print(f"\ntwin caps: 100 runs; violations {seen['caps']}")
    assert seen["caps"] > 0


async def test_twin_files_without_version_checks_loses_updates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = await matrix({"files": 100}, seed=7, root=tmp_path, check_versions=False)
    with capsys.disabled():
        print(f"\ntwin files: 100 runs; lost increments {seen['files']}")
    assert seen["files"] > 0
