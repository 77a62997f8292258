"""Versioned resources, snapshot isolation with invariants, leases, the tool registry, and
children that share resources through the coherence tools."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from legato import Agent, RunContext, tool
from legato.coherence import (
    CommitSequencer,
    Invariant,
    LeaseTable,
    ResourceStore,
    ToolRegistry,
    resource_tools,
)
from legato.events import ToolCallFinished
from legato.exceptions import CommitConflict, LeaseRefused, ToolDefinitionError, WriteSkew
from legato.models import ModelRequest
from legato.spawn import spawn_tools
from legato.testing import FunctionModel, ScriptedModel, call, reply

ON_CALL = Invariant(
    name="someone is on call",
    keys=frozenset({"state:alice", "state:bob"}),
    check=lambda s: s["state:alice"] == "on" or s["state:bob"] == "on",
)


def go_off_duty(store: ResourceStore, me: str, other: str) -> Any:
    txn = store.begin(author=me, isolation="snapshot")
    if txn.read(f"state:{other}") == "on":
        txn.write(f"state:{me}", "off")
    return txn


def test_snapshot_isolation_alone_allows_write_skew() -> None:
    store = ResourceStore({"state:alice": "on", "state:bob": "on"})
    a, b = go_off_duty(store, "alice", "bob"), go_off_duty(store, "bob", "alice")
    a.commit()
    b.commit()  # disjoint writes: snapshot isolation lets both through
    assert store.values() == {"state:alice": "off", "state:bob": "off"}


def test_a_declared_invariant_catches_write_skew() -> None:
    store = ResourceStore({"state:alice": "on", "state:bob": "on"}, invariants=[ON_CALL])
    a, b = go_off_duty(store, "alice", "bob"), go_off_duty(store, "bob", "alice")
    a.commit()
    with pytest.raises(WriteSkew, match="someone is on call"):
        b.commit()
    assert store.values() == {"state:alice": "off", "state:bob": "on"}


def test_a_stale_read_is_refused_with_a_retry_message_and_nothing_is_written() -> None:
    store = ResourceStore({"file:a.py": "v0"})
    slow = store.begin(author="slow")
    slow.read("file:a.py")
    fast = store.begin(author="fast")
    fast.read("file:a.py")
    fast.write("file:a.py", "fast edit")
    fast.commit()
    slow.write("file:a.py", "slow edit")
    with pytest.raises(CommitConflict, match="read it again and retry"):
        slow.commit()
    assert store.read("file:a.py").value == "fast edit"
    # switched off, the slow writer silently overwrites the fast one's work
    blind = ResourceStore({"file:a.py": "v0"}, enforce=False)
    s, f = blind.begin(), blind.begin()
    s.read("file:a.py")
    f.read("file:a.py")
    f.write("file:a.py", "fast edit")
    f.commit()
    s.write("file:a.py", "slow edit")
    s.commit()
    assert blind.read("file:a.py").value == "slow edit"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_leases_fence_out_expired_and_superseded_holders() -> None:
    clock = Clock()
    leases = LeaseTable(clock=clock)
    store = ResourceStore({"file:big.py": "v0"}, leases=leases)
    first = leases.acquire("file:big.py", "child-1", ttl=10)
    with pytest.raises(LeaseRefused, match="leased by child-1"):
        leases.acquire("file:big.py", "child-2", ttl=10)
    clock.now = 11  # child-1 stalls past its lease
    expired = store.begin(author="child-1")
    expired.write("file:big.py", "late", token=first.token)
    with pytest.raises(LeaseRefused, match="expired"):
        expired.commit()
    second = leases.acquire("file:big.py", "child-2", ttl=10)
    assert second.token > first.token
    no_token = store.begin(author="someone")
    no_token.write("file:big.py", "sneaky")
    with pytest.raises(LeaseRefused, match="needs that lease's fencing token"):
        no_token.commit()
    stale = store.begin(author="child-1")
    stale.write("file:big.py", "late again", token=first.token)
    with pytest.raises(LeaseRefused, match="superseded"):
        stale.commit()
    ok = store.begin(author="child-2")
    ok.write("file:big.py", "child-2 edit", token=second.token)
    ok.commit()
    assert store.read("file:big.py").value == "child-2 edit"
    # without fencing, the stalled holder's late write lands over child-2's edit
    off = LeaseTable(clock=clock, enforce=False)
    loose = ResourceStore({"file:big.py": "child-2 edit"}, leases=off)
    late = loose.begin()
    late.write("file:big.py", "late", token=first.token)
    late.commit()
    assert loose.read("file:big.py").value == "late"


def test_retraction_cascades_to_what_was_derived() -> None:
    store = ResourceStore({"state:x": 1, "state:y": 0, "state:z": 0})
    a = store.begin(author="a")
    a.write("state:x", 99)
    bad = a.commit()
    b = store.begin(author="b")
    b.write("state:y", b.read("state:x") + 1)
    b.commit()
    c = store.begin(author="c")
    c.write("state:z", c.read("state:y") * 2)
    c.commit()
    undone = store.retract(bad.id)
    assert len(undone) == 3
    assert store.values() == {"state:x": 1, "state:y": 0, "state:z": 0}
    assert not store.derived_from(bad.id)


async def test_the_sequencer_commits_in_order_and_skips_failed_ordinals() -> None:
    sequencer = CommitSequencer()
    applied: list[int] = []

    async def effect(i: int, delay_turns: int) -> None:
        for _ in range(delay_turns):
            await asyncio.sleep(0)
        await sequencer.commit(i, lambda: applied.append(i))

    async def failed() -> None:
        await sequencer.skip(1)

    await asyncio.gather(effect(0, 3), failed(), effect(2, 0), effect(3, 1))
    assert applied == [0, 2, 3]


def test_registry_changes_are_versioned() -> None:
    @tool
    def a() -> str:
        """A."""
        return "a"

    registry = ToolRegistry([a])
    assert registry.version == 1
    with pytest.raises(ToolDefinitionError, match="already has"):
        registry.add(a)
    registry.remove("a")
    with pytest.raises(ToolDefinitionError, match="no tool named 'a'"):
        registry.remove("a")
    assert registry.version == 2


async def test_a_tool_removed_mid_run_is_a_phantom_tool_error_not_a_silent_call() -> None:
    ran: list[str] = []

    @tool
    def deploy() -> str:
        """Deploy."""
        ran.append("deploy")
        return "deployed"

    registry = ToolRegistry([deploy])

    def decide(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return reply("stopped")
        assert [t.name for t in request.tools] == ["deploy"]  # the model is shown it ...
        registry.remove("deploy")  # ... and an operator retires it while the model decides
        return reply(call("deploy"))

    result = await Agent(FunctionModel(decide), tools=[registry]).run("go")
    (deploy_call,) = [e for e in result.journal if isinstance(e, ToolCallFinished)]
    assert deploy_call.result.is_error
    assert "was removed after you were shown it" in deploy_call.result.text
    assert ran == []


async def test_children_sharing_a_resource_see_a_conflict_and_retry() -> None:
    async def run(enforce: bool) -> tuple[Any, list[str]]:
        store = ResourceStore({"state:count": 0}, enforce=enforce)
        both_read = asyncio.Barrier(2)
        errors: list[str] = []

        async def child_turn(request: ModelRequest) -> Any:
            last = request.messages[-1]
            if last.role != "tool":
                return reply(call("read_resource", {"key": "state:count"}))
            result = last.tool_results[0]
            if result.name == "read_resource":
                value = int(result.text.split('"value": ')[1].rstrip("}"))
                if not any(
                    m.role == "tool" and m.tool_results[0].is_error for m in request.messages
                ):
                    async with asyncio.timeout(5):
                        await both_read.wait()  # both children read before either writes
                return reply(call("write_resource", {"key": "state:count", "value": value + 1}))
            if result.is_error:
                errors.append(result.text)
                return reply(call("read_resource", {"key": "state:count"}))
            return "incremented"

        parent = ScriptedModel(
            [
                reply(
                    call(
                        "spawn", {"task": "increment", "tools": ["read_resource", "write_resource"]}
                    ),
                    call(
                        "spawn", {"task": "increment", "tools": ["read_resource", "write_resource"]}
                    ),
                ),
                "done",
            ]
        )
        spawner = spawn_tools([resource_tools(store)], model=FunctionModel(child_turn))
        await Agent(parent, tools=[spawner]).run("increment twice")
        return store.read("state:count").value, errors

    count, errors = await run(enforce=True)
    assert count == 2
    assert len(errors) == 1 and "stale" in errors[0] and "retry" in errors[0]
    lost, silent = await run(enforce=False)
    assert lost == 1  # one increment silently overwrote the other
    assert silent == []


async def test_resource_tools_refuse_a_blind_write_and_claims_issue_tokens() -> None:
    leases = LeaseTable()
    store = ResourceStore({"state:plan": "draft"}, leases=leases)
    tools = {t.name: t for t in resource_tools(store)}
    ctx: RunContext[None] = RunContext(deps=None, run_id="r1")
    with pytest.raises(CommitConflict, match="have not read"):
        await tools["write_resource"].invoke({"key": "state:plan", "value": "x"}, ctx)
    claimed = await tools["claim_resource"].invoke({"key": "state:plan", "seconds": 30}, ctx)
    assert "fencing token 1" in claimed
    await tools["read_resource"].invoke({"key": "state:plan"}, ctx)
    with pytest.raises(LeaseRefused):
        await tools["write_resource"].invoke({"key": "state:plan", "value": "x"}, ctx)
    done = await tools["write_resource"].invoke(
        {"key": "state:plan", "value": "x", "token": 1}, ctx
    )
    assert done == "wrote state:plan (version 1)"
