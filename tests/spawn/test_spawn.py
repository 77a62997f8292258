"""Spawning children: results, lineage in the stream, least privilege, limits, failures."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from legato import Agent, RunContext, tool
from legato.events import (
    ChildEvent,
    ContextSliced,
    RunEvent,
    SpawnFinished,
    SpawnStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from legato.models import ModelRequest
from legato.spawn import BudgetShare, ChildLimits, NeverSpawn, SpawnLimits, spawn_tools
from legato.testing import FunctionModel, ScriptedModel, call, reply

FILES = {
    "auth.py": "SESSION_TTL = 900  # seconds",
    "billing.py": "CURRENCY = 'EUR'",
}
deleted: list[str] = []


@tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The file's path.
    """
    return FILES.get(path, f"no file {path}")


@tool
def delete_all() -> str:
    """Delete everything."""
    deleted.append("all")
    return "deleted"


def tool_names(request: ModelRequest) -> list[str]:
    return sorted(t.name for t in request.tools)


def finished(events: Sequence[RunEvent]) -> list[ToolCallFinished]:
    return [e for e in events if isinstance(e, ToolCallFinished)]


async def collect(agent: Agent[Any], prompt: str) -> list[RunEvent]:
    return [e async for e in agent.stream(prompt)]


async def test_a_waited_child_answers_through_the_spawn_call() -> None:
    child = ScriptedModel([reply(call("read_file", {"path": "auth.py"})), "TTL is 900 s"])
    parent = ScriptedModel(
        [
            reply(
                call("spawn", {"task": "Find the session TTL in auth.py", "tools": ["read_file"]})
            ),
            "The TTL is 900 s.",
        ]
    )
    agent = Agent(parent, tools=[spawn_tools([read_file, delete_all], model=child)])
    result = await agent.run("What is the TTL?")
    assert result.output == "The TTL is 900 s."
    spawn_result = finished(list(result.journal))[0]
    assert spawn_result.result.text == "TTL is 900 s"
    assert not spawn_result.result.is_error
    started = next(e for e in result.journal if isinstance(e, SpawnStarted))
    ended = next(e for e in result.journal if isinstance(e, SpawnFinished))
    assert started.lineage.parent_run_id == result.run_id
    assert started.lineage.parent_step == 1
    assert started.lineage.parent_call_id == spawn_result.call.id
    assert started.lineage.depth == 1
    assert started.tools == ("read_file",)
    assert ended.outcome == "ok" and ended.output == "TTL is 900 s"
    assert ended.lineage == started.lineage
    assert any(isinstance(e, ContextSliced) for e in result.journal)
    # least privilege: the child was shown only what it was granted (and its todo list)
    assert tool_names(child.requests[0]) == ["read_file", "todo"]
    assert "spawn" in tool_names(parent.requests[0])
    spawn_definition = next(t for t in parent.requests[0].tools if t.name == "spawn")
    assert (
        "Tools you can grant: read_file, delete_all, spawn, todo." in spawn_definition.description
    )
    child.assert_complete()


async def test_a_child_cannot_call_a_tool_it_was_not_granted() -> None:
    deleted.clear()
    child = ScriptedModel([reply(call("delete_all")), "could not"])
    parent = ScriptedModel(
        [reply(call("spawn", {"task": "clean up", "tools": ["read_file"]})), "ok"]
    )
    spawner = spawn_tools([read_file, delete_all], model=child)
    result = await Agent(parent, tools=[spawner]).run("go")
    assert deleted == []
    child_journal = await spawner.store.load(
        next(e for e in result.journal if isinstance(e, SpawnStarted)).lineage.run_id
    )
    assert child_journal is not None
    outcomes = [e.outcome for e in child_journal if isinstance(e, ToolCallFinished)]
    assert outcomes == ["unknown_tool"]
    # without the grant check (granting everything), the same script deletes
    child2 = ScriptedModel([reply(call("delete_all")), "done"])
    parent2 = ScriptedModel(
        [reply(call("spawn", {"task": "clean up", "tools": ["read_file", "delete_all"]})), "ok"]
    )
    await Agent(parent2, tools=[spawn_tools([read_file, delete_all], model=child2)]).run("go")
    assert deleted == ["all"]


async def test_granting_a_tool_or_skill_the_parent_lacks_is_an_error_the_model_sees() -> None:
    parent = ScriptedModel(
        [
            reply(call("spawn", {"task": "t", "tools": ["read_file", "rm_rf"]})),
            reply(call("spawn", {"task": "t", "skills": ["hacking"]})),
            "gave up",
        ]
    )
    child = ScriptedModel([])
    agent = Agent(parent, tools=[spawn_tools([read_file], model=child)])
    result = await agent.run("go")
    results = finished(list(result.journal))
    assert all(r.result.is_error for r in results)
    assert "cannot grant ['rm_rf']" in results[0].result.text
    assert "read_file" in results[0].result.text
    assert "unknown skills ['hacking']" in results[1].result.text
    assert result.output == "gave up"
    assert child.requests == []


async def test_children_events_stream_through_the_parent_with_lineage_nested_too() -> None:
    def child_turns(request: ModelRequest) -> Any:
        instructions = request.instructions or ""
        done = any(m.role == "tool" for m in request.messages[-1:])
        if "depth 2" in instructions:
            return "grandchild done"
        if done:
            return "child done"
        return reply(call("spawn", {"task": "go deeper"}))

    parent = ScriptedModel([reply(call("spawn", {"task": "go", "tools": ["spawn"]})), "all done"])
    agent = Agent(
        parent,
        tools=[
            spawn_tools(
                [read_file], model=FunctionModel(child_turns), limits=SpawnLimits(max_depth=2)
            )
        ],
    )
    events = await collect(agent, "go")
    nested = [e for e in events if isinstance(e, ChildEvent)]
    depths = {e.lineage.depth for e in nested}
    assert depths == {1, 2}
    grandchild = next(e for e in nested if e.lineage.depth == 2)
    child = next(e for e in nested if e.lineage.depth == 1)
    assert grandchild.lineage.parent_run_id == child.lineage.run_id
    # a grandchild's events are not wrapped twice
    assert not any(isinstance(e.event, ChildEvent) for e in nested)
    # the grandchild's start is journaled by the child (seen in the stream as a child event)
    assert any(isinstance(e.event, SpawnStarted) and e.lineage.depth == 1 for e in nested)
    kinds = [e.kind for e in events]
    first_child = kinds.index("child_event")
    spawn_started = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStarted))
    spawn_finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    assert spawn_started < first_child < spawn_finished
    assert events[-1].kind == "run_finished"


async def test_depth_limit_hides_spawn_from_children_at_the_limit() -> None:
    child = ScriptedModel(["leaf"])
    parent = ScriptedModel([reply(call("spawn", {"task": "t", "tools": ["spawn"]})), "ok"])
    agent = Agent(parent, tools=[spawn_tools([], model=child, limits=SpawnLimits(max_depth=1))])
    await agent.run("go")
    assert "spawn" not in tool_names(child.requests[0])


async def test_a_failing_child_is_a_tool_error_with_its_reason_and_the_parent_ends() -> None:
    child = ScriptedModel(
        [reply(call("read_file", {"path": "x"})), reply(call("read_file", {"path": "y"}))]
    )
    parent = ScriptedModel(
        [reply(call("spawn", {"task": "loop", "tools": ["read_file"], "max_steps": 2})), "sorry"]
    )
    agent = Agent(parent, tools=[spawn_tools([read_file], model=child)])
    result = await agent.run("go")
    spawn_result = finished(list(result.journal))[0]
    assert spawn_result.result.is_error
    assert "MaxStepsExceeded" in spawn_result.result.text
    ended = next(e for e in result.journal if isinstance(e, SpawnFinished))
    assert ended.outcome == "error"
    assert result.output == "sorry"


async def test_a_child_that_never_finishes_times_out() -> None:
    @tool
    async def hang() -> str:
        """Never return."""
        await asyncio.Event().wait()
        return "never"

    child = ScriptedModel([reply(call("hang"))])
    parent = ScriptedModel([reply(call("spawn", {"task": "t", "tools": ["hang"]})), "moved on"])
    limits = SpawnLimits(child=ChildLimits(max_steps=5, timeout=0.05))
    agent = Agent(parent, tools=[spawn_tools([hang], model=child, limits=limits)])
    result = await agent.run("go")
    text = finished(list(result.journal))[0].result.text
    assert "did not finish within 0.05 seconds" in text
    assert next(e for e in result.journal if isinstance(e, SpawnFinished)).outcome == "timeout"
    assert result.output == "moved on"


async def test_budget_share_larger_than_what_remains_is_refused() -> None:
    limits = SpawnLimits(budget=BudgetShare(steps=6))
    child = ScriptedModel(["one", "two"])
    parent = ScriptedModel(
        [
            reply(call("spawn", {"task": "a", "max_steps": 4})),
            reply(call("spawn", {"task": "b", "max_steps": 4})),
            reply(call("spawn", {"task": "c", "max_steps": 5})),
            "ok",
        ]
    )
    agent = Agent(parent, tools=[spawn_tools([], model=child, limits=limits)])
    result = await agent.run("go")
    texts = [r.result.text for r in finished(list(result.journal))]
    # each child used 1 of its 4 steps and the other 3 came back: 4 remain, 5 do not fit
    assert texts[0] == "one"
    assert texts[1] == "two"
    assert "larger than what remains" in texts[2]
    assert "steps 5 > 4 remaining" in texts[2]


async def test_token_share_is_enforced() -> None:
    child = ScriptedModel([reply(call("read_file", {"path": "auth.py"})), "done"])
    parent = ScriptedModel(
        [reply(call("spawn", {"task": "t", "tools": ["read_file"], "max_tokens": 3})), "ok"]
    )
    result = await Agent(parent, tools=[spawn_tools([read_file], model=child)]).run("go")
    ended = next(e for e in result.journal if isinstance(e, SpawnFinished))
    assert ended.outcome == "budget"
    assert "budget for tokens exceeded: limit 3, used 0" in (ended.error or "")
    assert (
        child.requests == []
    )  # refused before the call, not after it (tests/spawn/test_shares.py)


async def test_children_run_concurrently() -> None:
    barrier = asyncio.Barrier(2)

    @tool
    async def meet() -> str:
        """Wait until the sibling arrives too."""
        async with asyncio.timeout(5):
            await barrier.wait()
        return "met"

    def child_turns(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return request.messages[-1].tool_results[0].text
        return reply(call("meet"))

    parent = ScriptedModel(
        [
            reply(
                call("spawn", {"task": "a", "tools": ["meet"]}),
                call("spawn", {"task": "b", "tools": ["meet"]}),
            ),
            "both met",
        ]
    )
    agent = Agent(parent, tools=[spawn_tools([meet], model=FunctionModel(child_turns))])
    result = await agent.run("go")
    assert [r.result.text for r in finished(list(result.journal))] == ["met", "met"]


async def test_background_children_and_wait_modes() -> None:
    gate = asyncio.Event()

    @tool
    async def slow(name: str) -> str:
        """Finish when allowed (name 'fast' finishes at once).

        Args:
            name: Which one.
        """
        if name != "fast":
            await gate.wait()
        return f"{name} finished"

    def child_turns(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return request.messages[-1].tool_results[0].text
        return reply(call("slow", {"name": request.messages[-1].text}))

    def parent_turns(request: ModelRequest) -> Any:
        step = sum(1 for m in request.messages if m.role == "assistant")
        if step == 0:
            return reply(
                call("spawn", {"task": "fast", "tools": ["slow"], "wait": False}),
                call("spawn", {"task": "slowpoke", "tools": ["slow"], "wait": False}),
            )
        if step == 1:
            return reply(call("wait_children", {"mode": "first"}))
        if step == 2:
            gate.set()
            return reply(call("wait_children", {"mode": "all"}))
        return "done"

    agent = Agent(
        FunctionModel(parent_turns), tools=[spawn_tools([slow], model=FunctionModel(child_turns))]
    )
    result = await agent.run("go")
    texts = [r.result.text for r in finished(list(result.journal))]
    assert "in the background" in texts[0] and "in the background" in texts[1]
    assert texts[2].endswith(": fast finished")
    assert "fast finished" in texts[3] and "slowpoke finished" in texts[3]
    assert sum(isinstance(e, SpawnFinished) for e in result.journal) == 2


async def test_wait_any_returns_the_first_success_and_all_failed_is_an_error() -> None:
    def child_turns(request: ModelRequest) -> Any:
        task = next(m.text for m in reversed(request.messages) if m.role == "user")
        if task.startswith("bad"):
            raise RuntimeError(f"{task} broke")
        return f"{task} ok"

    parent = ScriptedModel(
        [
            reply(
                call("spawn", {"task": "bad-1", "wait": False}),
                call("spawn", {"task": "good", "wait": False}),
            ),
            reply(call("wait_children", {"mode": "any"})),
            reply(call("spawn", {"task": "bad-2", "wait": False})),
            reply(call("wait_children", {"ids": ["nope"]})),
            "end",
        ]
    )
    agent = Agent(parent, tools=[spawn_tools([], model=FunctionModel(child_turns))])
    result = await agent.run("go")
    texts = [r.result for r in finished(list(result.journal))]
    assert texts[2].text.endswith("good ok")
    assert texts[4].is_error and "no child 'nope'" in texts[4].text


async def test_background_children_are_cancelled_when_the_parent_ends() -> None:
    cancelled = asyncio.Event()
    entered = asyncio.Event()

    @tool
    async def forever() -> str:
        """Run until cancelled."""
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async def parent_turn(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            return reply(call("spawn", {"task": "t", "tools": ["forever"], "wait": False}))
        await entered.wait()
        return "leaving"

    child = ScriptedModel([reply(call("forever"))])
    agent = Agent(FunctionModel(parent_turn), tools=[spawn_tools([forever], model=child)])
    result = await agent.run("go")
    assert result.output == "leaving"
    assert cancelled.is_set()


async def test_the_static_policy_offers_no_spawn_tool() -> None:
    parent = ScriptedModel(["fine"])
    agent = Agent(parent, tools=[spawn_tools([read_file], model=parent, policy=NeverSpawn())])
    await agent.run("go")
    assert tool_names(parent.requests[0]) == ["read_file", "todo"]


async def test_agent_as_tool_runs_a_child_with_lineage() -> None:
    helper_model = ScriptedModel([reply(call("read_file", {"path": "billing.py"})), "EUR"])
    helper = Agent(helper_model, tools=[read_file], name="helper", instructions="You read files.")
    parent = ScriptedModel(
        [reply(call("ask_helper", {"task": "Which currency does billing.py use?"})), "EUR it is"]
    )
    agent = Agent(parent, tools=[helper.as_tool(name="ask_helper", description="Ask the helper")])
    events = await collect(agent, "currency?")
    journal_events = [e for e in events if not isinstance(e, ChildEvent)]
    assert finished(journal_events)[0].result.text == "EUR"
    started = next(e for e in events if isinstance(e, SpawnStarted))
    assert started.lineage.agent == "helper"
    assert {e.lineage.run_id for e in events if isinstance(e, ChildEvent)} == {
        started.lineage.run_id
    }
    assert helper_model.requests[0].instructions == "You read files."


async def test_agent_as_tool_enforces_its_depth_limit() -> None:
    def loop_turn(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return request.messages[-1].tool_results[0].text
        return reply(call("again", {"task": "recurse"}))

    inner = Agent(FunctionModel(loop_turn), name="looper")
    inner.toolset = inner.toolset  # the tool is added below, once the agent exists
    inner.tool_sources.append(
        _single(inner.as_tool(name="again", description="Recurse", max_depth=2))
    )
    result = await inner.run("start")
    texts = [e.result.text for e in result.journal if isinstance(e, ToolCallFinished)]
    assert len(texts) == 1
    assert "beyond the limit of 2" in texts[0]


def _single(t: Any) -> Any:
    from legato import Toolset

    return Toolset([t], name="extra")


async def test_the_child_is_given_deps_and_a_context_slice() -> None:
    seen: list[Any] = []

    @tool
    def whoami(ctx: RunContext[str]) -> str:
        """Report the deps."""
        seen.append(ctx.deps)
        return ctx.deps

    child = ScriptedModel([reply(call("whoami")), "done"])
    parent = ScriptedModel(
        [
            reply(call("read_file", {"path": "auth.py"})),
            reply(call("read_file", {"path": "billing.py"})),
            reply(call("spawn", {"task": "Change SESSION_TTL in auth.py", "tools": ["whoami"]})),
            "ok",
        ]
    )
    agent = Agent(parent, tools=[spawn_tools([read_file, whoami], model=child)])
    result = await agent.run("go", deps="alice")
    assert seen == ["alice"]
    first = child.requests[0]
    history_text = " ".join(getattr(p, "text", "") for m in first.messages for p in m.parts)
    assert "SESSION_TTL = 900" in history_text
    assert "CURRENCY" not in history_text
    sliced = next(e for e in result.journal if isinstance(e, ContextSliced))
    assert sliced.mode == "selective"
    assert sliced.tokens_passed < sliced.tokens_available
    assert any("auth.py" in " ".join(entry.reasons) for entry in sliced.entries)


async def test_usage_rolls_up_through_the_tree_and_journals_round_trip() -> None:
    from legato import Journal, Usage
    from legato.spawn import tree_usage

    spent = Usage(input_tokens=10, output_tokens=1)

    def child_turn(request: ModelRequest) -> Any:
        if "depth 2" in (request.instructions or ""):
            return reply("leaf", usage=spent)
        if request.messages[-1].role == "tool":
            return reply("middle", usage=spent)
        return reply(call("spawn", {"task": "deeper"}), usage=spent)

    parent = ScriptedModel(
        [
            reply(call("spawn", {"task": "go", "tools": ["spawn"]}), usage=spent),
            reply("top", usage=spent),
        ]
    )
    agent = Agent(parent, tools=[spawn_tools([], model=FunctionModel(child_turn))])
    result = await agent.run("go")
    assert result.usage.requests == 2
    total = tree_usage(result.journal)
    assert total.requests == 5  # parent 2, child 2, grandchild 1
    assert total.total_tokens == 5 * 11
    assert Journal.from_jsonl(result.journal.to_jsonl()) == result.journal


def test_spawn_events_render_in_the_cli() -> None:
    from io import StringIO

    from rich.console import Console

    from legato.cli._render import render_journal

    child = ScriptedModel(["fine"])
    parent = ScriptedModel([reply(call("spawn", {"task": "look around"})), "ok"])
    result = Agent(parent, tools=[spawn_tools([], model=child)]).run_sync("go")
    out = StringIO()
    render_journal(Console(file=out, width=200), result.journal)
    text = out.getvalue()
    assert "child" in text and "look around" in text and "[ok]" in text


async def test_a_tool_removed_from_the_parents_registry_is_a_phantom_for_the_child() -> None:
    from legato.coherence import ToolRegistry

    ran: list[str] = []

    @tool
    def deploy() -> str:
        """Deploy."""
        ran.append("deploy")
        return "deployed"

    registry = ToolRegistry([deploy])

    def child_turn(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return f"child saw: {last.tool_results[0].text}"
        registry.remove("deploy")  # retired while the child was deciding to call it
        return reply(call("deploy"))

    parent = ScriptedModel([reply(call("spawn", {"task": "deploy", "tools": ["deploy"]})), "ok"])
    result = await Agent(
        parent, tools=[spawn_tools([registry], model=FunctionModel(child_turn))]
    ).run("go")
    text = finished(list(result.journal))[0].result.text
    assert "child saw: tool 'deploy' was removed after you were shown it" in text
    assert ran == []


async def test_full_slicing_copies_the_conversation() -> None:
    child = ScriptedModel(["ok"])
    parent = ScriptedModel(
        [
            reply(call("read_file", {"path": "auth.py"})),
            reply(call("spawn", {"task": "anything"})),
            "done",
        ]
    )
    result = await Agent(parent, tools=[spawn_tools([read_file], model=child, slice="full")]).run(
        "start"
    )
    sliced = next(e for e in result.journal if isinstance(e, ContextSliced))
    assert sliced.mode == "full" and sliced.tokens_passed == sliced.tokens_available
    history = child.requests[0].messages[:-1]
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[2].tool_results[0].text == FILES["auth.py"]


async def test_wait_children_with_max_wait_reports_who_is_still_running() -> None:
    release = asyncio.Event()

    @tool
    async def block() -> str:
        """Block until released."""
        await release.wait()
        return "released"

    def child_turn(request: ModelRequest) -> Any:
        last = request.messages[-1]
        return last.tool_results[0].text if last.role == "tool" else reply(call("block"))

    def parent_turn(request: ModelRequest) -> Any:
        answers = sum(m.role == "assistant" for m in request.messages)
        if answers == 0:
            return reply(call("spawn", {"task": "t", "tools": ["block"], "wait": False}))
        if answers == 1:
            return reply(call("wait_children", {"max_wait": 0.01}))
        if answers == 2:
            release.set()
            return reply(call("wait_children"))
        return "done"

    agent = Agent(
        FunctionModel(parent_turn), tools=[spawn_tools([block], model=FunctionModel(child_turn))]
    )
    result = await agent.run("go")
    texts = [r.result.text for r in finished(list(result.journal))]
    assert texts[1].startswith("still running: ")
    assert texts[2].endswith(": released")


async def test_hooks_for_the_gate_budget_and_inherited_policies() -> None:
    from dataclasses import replace

    from legato import Toolset
    from legato.budgets import Budget
    from legato.run import RunConfig
    from legato.spawn import ChildRecord

    @tool(side_effects="irreversible")
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: Euros.
        """
        return "paid"

    class NoIrreversibleForChildren:
        """A parent policy children inherit: they may not run irreversible effects."""

        def child_config(
            self, config: RunConfig[str], *, record: ChildRecord, ctx: RunContext[Any]
        ) -> RunConfig[str]:
            class Safe:
                name = "safe"

                async def list_tools(self) -> list[Any]:
                    listed = [t for s in config.tool_sources for t in await s.list_tools()]
                    return [t for t in listed if t.side_effects != "irreversible"]

            return replace(config, tool_sources=[Safe()])

    accounts: list[str] = []

    def account(ctx: RunContext[Any]) -> Budget:
        accounts.append(ctx.run_id)
        return Budget(steps=3)

    child = ScriptedModel(["ok"])
    parent = ScriptedModel(
        [
            reply(call("spawn", {"task": "big", "max_steps": 5})),
            reply(call("spawn", {"task": "pay", "tools": ["pay", "read_file"], "max_steps": 2})),
            "done",
        ]
    )
    spawner = spawn_tools(
        [Toolset([pay, read_file])],
        model=child,
        children_budget=account,
        inherit=NoIrreversibleForChildren(),
    )
    result = await Agent(parent, tools=[spawner]).run("go")
    texts = [r.result.text for r in finished(list(result.journal))]
    assert "steps 5 > 3 remaining" in texts[0]
    assert texts[1] == "ok"
    assert accounts == [result.run_id]
    assert tool_names(child.requests[0]) == ["read_file", "todo"]


async def test_one_agent_serves_concurrent_runs_each_with_its_own_children() -> None:
    def parent_turn(request: ModelRequest) -> Any:
        user = request.messages[0].text
        if request.messages[-1].role == "tool":
            return f"{user}: {request.messages[-1].tool_results[0].text}"
        return reply(call("spawn", {"task": f"work for {user}"}))

    def child_turn(request: ModelRequest) -> Any:
        return request.messages[-1].text.upper()

    agent = Agent(
        FunctionModel(parent_turn), tools=[spawn_tools([], model=FunctionModel(child_turn))]
    )
    first, second = await asyncio.gather(agent.run("alice"), agent.run("bob"))
    assert first.output == "alice: WORK FOR ALICE"
    assert second.output == "bob: WORK FOR BOB"
    ids = {
        e.lineage.run_id: e.lineage.parent_run_id
        for r in (first, second)
        for e in r.journal
        if isinstance(e, SpawnStarted)
    }
    assert sorted(ids.values()) == sorted([first.run_id, second.run_id])
