"""Adaptive spawning: measured metrics, policies, journaled decisions, what a yes does."""

from __future__ import annotations

from typing import Any

import pytest

from legato import Agent, ToolError, tool
from legato.budgets import Budget, Spend
from legato.events import ComplexityMetrics, SpawnDecided, SpawnStarted, ToolCallFinished
from legato.exceptions import ConfigurationError, SpawnRefused
from legato.messages import Message, ToolCallPart, ToolResultPart
from legato.models import ModelProfile, ModelRequest, ModelSettings
from legato.spawn import (
    BudgetShare,
    ChildLimits,
    NeverSpawn,
    SpawnLimits,
    ThresholdPolicy,
    TodoList,
    measure,
    narrow_limits,
    narrow_settings,
    spawn_tools,
)
from legato.spawn._limits import split_share
from legato.testing import FunctionModel, ScriptedModel, call, reply


def failing_history(n: int) -> list[Message]:
    messages = [Message.user("go")]
    for i in range(n):
        c = ToolCallPart.from_arguments(id=f"c{i}", name="edit", arguments={"path": f"f{i}.py"})
        messages.append(Message(role="assistant", parts=(c,)))
        messages.append(
            Message(
                role="tool",
                parts=(
                    ToolResultPart.text_result(
                        call_id=c.id, name="edit", text="boom", is_error=True
                    ),
                ),
            )
        )
    return messages


def test_metrics_are_measured_from_the_conversation_and_todo_list() -> None:
    todos = TodoList()
    todos.add(["a", "b", "c"])
    todos.complete([1], step=2)
    metrics = measure(failing_history(4), step=7, todos=todos, context_window=100)
    assert metrics.consecutive_failures == 4
    assert metrics.resources_touched == 4
    assert metrics.pending_todos == 2
    assert metrics.steps_without_progress == 5
    assert metrics.context_fill is not None and 0 < metrics.context_fill < 1


def test_threshold_policy_names_every_threshold_reached() -> None:
    policy = ThresholdPolicy(consecutive_failures=3, pending_todos=2)
    quiet = policy.decide(ComplexityMetrics(step=1))
    assert not quiet.spawn
    busy = policy.decide(ComplexityMetrics(step=3, consecutive_failures=3, pending_todos=2))
    assert busy.spawn
    assert "consecutive tool failures 3 >= 3" in busy.reason
    assert "pending todos 2 >= 2" in busy.reason
    full = ThresholdPolicy(context_fill=0.5).decide(
        ComplexityMetrics(context_tokens=60, context_window=100)
    )
    assert full.spawn and "context 60% full" in full.reason
    assert not NeverSpawn().decide(ComplexityMetrics(consecutive_failures=99)).spawn


async def test_decisions_are_journaled_and_a_yes_reaches_the_model_as_a_hint() -> None:
    parent = ScriptedModel(
        [
            reply(call("todo", {"add": ["part one"]})),
            reply(call("todo", {"add": ["part two", "part three"]})),
            "fine",
        ]
    )
    agent = Agent(
        parent, tools=[spawn_tools([], model=parent, policy=ThresholdPolicy(pending_todos=3))]
    )
    result = await agent.run("a big job")
    decisions = [e for e in result.journal if isinstance(e, SpawnDecided)]
    assert [d.spawn for d in decisions] == [False, True]
    assert decisions[1].metrics.pending_todos == 3
    assert decisions[1].policy == "threshold"
    texts = [e.result.text for e in result.journal if isinstance(e, ToolCallFinished)]
    assert "[spawn policy: pending todos 3 >= 3]" in texts[1]
    assert "spawn tool" in texts[1]
    assert "[spawn policy" not in texts[0]


async def test_an_auto_spawning_policy_starts_children_for_pending_todo_items() -> None:
    def child_turn(request: ModelRequest) -> Any:
        task = request.messages[-1].text
        return f"did {task}"

    parent = ScriptedModel(
        [
            reply(call("todo", {"add": ["part one", "part two"]})),
            reply(call("wait_children")),
            "all parts done",
        ]
    )
    policy = ThresholdPolicy(pending_todos=2, auto_spawn=True)
    agent = Agent(parent, tools=[spawn_tools([], model=FunctionModel(child_turn), policy=policy)])
    result = await agent.run("two parts")
    started = [e for e in result.journal if isinstance(e, SpawnStarted)]
    assert [e.task for e in started] == ["part one", "part two"]
    assert all(e.background for e in started)
    texts = [e.result.text for e in result.journal if isinstance(e, ToolCallFinished)]
    assert "Started children" in texts[0]
    assert "-> child" in texts[0]
    assert "did part one" in texts[1] and "did part two" in texts[1]


async def test_the_static_baseline_never_spawns_whatever_the_metrics() -> None:
    @tool
    def edit(path: str) -> str:
        """Edit a file.

        Args:
            path: The file.
        """
        raise ToolError("conflict")

    turns = [reply(call("edit", {"path": f"f{i}.py"})) for i in range(3)]
    parent = ScriptedModel([*turns, "gave up"])
    edit_tool = edit.replace(max_retries=5)
    agent = Agent(parent, tools=[spawn_tools([edit_tool], model=parent, policy=NeverSpawn())])
    result = await agent.run("go")
    decisions = [e for e in result.journal if isinstance(e, SpawnDecided)]
    assert decisions and not any(d.spawn for d in decisions)
    assert decisions[-1].metrics.consecutive_failures == 3
    # the same run under a threshold policy says yes at the third failure
    parent2 = ScriptedModel([*turns, "gave up"])
    agent2 = Agent(
        parent2,
        tools=[
            spawn_tools([edit_tool], model=parent2, policy=ThresholdPolicy(consecutive_failures=3))
        ],
    )
    result2 = await agent2.run("go")
    assert [d.spawn for d in result2.journal if isinstance(d, SpawnDecided)] == [False, False, True]


def test_limits_only_narrow() -> None:
    parent = ChildLimits(
        max_steps=10,
        tool_timeout=30,
        timeout=60,
        settings=ModelSettings(max_tokens=1000, temperature=0.2, parallel_tool_calls=False),
    )
    wider = ChildLimits(
        max_steps=50,
        tool_timeout=None,
        timeout=600,
        settings=ModelSettings(max_tokens=5000, temperature=1.0, parallel_tool_calls=True),
    )
    narrowed = narrow_limits(parent, wider)
    assert narrowed.max_steps == 10 and narrowed.tool_timeout == 30 and narrowed.timeout == 60
    assert narrowed.settings.max_tokens == 1000
    assert narrowed.settings.temperature == 0.2
    assert narrowed.settings.parallel_tool_calls is False
    tighter = narrow_limits(
        parent, ChildLimits(max_steps=3, timeout=5, settings=ModelSettings(max_tokens=10))
    )
    assert (tighter.max_steps, tighter.timeout, tighter.settings.max_tokens) == (3, 5, 10)
    assert narrow_settings(ModelSettings(), ModelSettings(timeout=4)).timeout == 4


def left(budget: Budget) -> tuple[float, float]:
    remaining = budget.remaining()
    return remaining.steps, remaining.tokens


def test_budget_shares_are_splits_that_return_what_is_unspent() -> None:
    root = Budget(steps=10, tokens=1000)
    child = split_share(root, BudgetShare(steps=4, tokens=400), min_output=128)
    assert left(root) == (6, 600)
    grandchild = split_share(child, BudgetShare(steps=2, tokens=100), min_output=128)
    grandchild.charge(Spend(steps=1, tokens=50))
    grandchild.close()
    child.charge(Spend(steps=1, tokens=10))
    assert left(child) == (2, 340)
    child.close()
    child.close()  # once only
    assert left(root) == (8, 940)
    assert root.reserved == Spend()
    with pytest.raises(SpawnRefused, match="steps 9 > 8 remaining"):
        split_share(root, BudgetShare(steps=9), min_output=128)
    with pytest.raises(SpawnRefused, match="tokens 941 > 940 remaining"):
        split_share(root, BudgetShare(steps=1, tokens=941), min_output=128)
    with pytest.raises(ConfigurationError):
        BudgetShare(steps=-1)
    with pytest.raises(ConfigurationError):
        SpawnLimits(max_depth=0)


async def test_fan_out_limit_is_enforced() -> None:
    child = ScriptedModel(["a", "b"])
    parent = ScriptedModel(
        [
            reply(
                call("spawn", {"task": "1"}),
                call("spawn", {"task": "2"}),
                call("spawn", {"task": "3"}),
            ),
            "ok",
        ]
    )
    agent = Agent(parent, tools=[spawn_tools([], model=child, limits=SpawnLimits(max_children=2))])
    result = await agent.run("go")
    texts = [e.result.text for e in result.journal if isinstance(e, ToolCallFinished)]
    assert "limit of 2 children" in texts[2]


async def test_the_context_window_comes_from_the_model_profile() -> None:
    parent = ScriptedModel(
        [reply(call("todo", {"add": ["x" * 400]})), "ok"], profile=ModelProfile(context_window=150)
    )
    agent = Agent(
        parent, tools=[spawn_tools([], model=parent, policy=ThresholdPolicy(context_fill=0.5))]
    )
    result = await agent.run("go")
    decision = next(e for e in result.journal if isinstance(e, SpawnDecided))
    assert decision.metrics.context_window == 150
    assert decision.spawn and "full" in decision.reason


async def test_the_parents_fill_is_measured_against_the_parents_window() -> None:
    # the children run on a model with a window 1,000 times larger: measured against it, the
    # parent's nearly full context would look empty and the policy would never fire
    parent = ScriptedModel(
        [reply(call("todo", {"add": ["x" * 400]})), "ok"], profile=ModelProfile(context_window=150)
    )
    child = ScriptedModel([], profile=ModelProfile(context_window=150_000))
    agent = Agent(
        parent, tools=[spawn_tools([], model=child, policy=ThresholdPolicy(context_fill=0.5))]
    )
    result = await agent.run("go")
    decision = next(e for e in result.journal if isinstance(e, SpawnDecided))
    assert decision.metrics.context_window == 150
    assert decision.spawn and "full" in decision.reason


@pytest.mark.parametrize("seed", range(3))
def test_budget_shares_always_roll_up_to_the_root(seed: int) -> None:
    import random

    rng = random.Random(seed)
    root = Budget(steps=100, tokens=10_000)
    open_budgets: list[Budget] = [root]
    charged = 0
    for _ in range(300):
        budget = rng.choice(open_budgets)
        action = rng.random()
        steps_left, tokens_left = (int(x) for x in left(budget))
        if action < 0.4 and steps_left:
            share = BudgetShare(
                steps=rng.randint(1, steps_left), tokens=rng.randint(0, tokens_left)
            )
            open_budgets.append(split_share(budget, share, min_output=1))
        elif action < 0.7 and steps_left:
            steps = rng.randint(0, steps_left)
            budget.charge(Spend(steps=steps))
            charged += steps
        elif budget is not root:
            budget.close()
            open_budgets.remove(budget)
        with pytest.raises(SpawnRefused):
            split_share(root, BudgetShare(steps=int(left(root)[0]) + 1, tokens=0), min_output=1)
    for budget in reversed(open_budgets[1:]):
        budget.close()
    # every step charged anywhere in the tree is spent at the root; nothing else is
    assert left(root)[0] == 100 - charged
    assert root.reserved == Spend()


async def test_auto_spawn_that_cannot_start_says_why() -> None:
    parent = ScriptedModel([reply(call("todo", {"add": ["a", "b"]})), "ok"])
    policy = ThresholdPolicy(pending_todos=2, auto_spawn=True)
    spawner = spawn_tools([], model=parent, policy=policy, auto_grant=["shell"])
    result = await Agent(parent, tools=[spawner]).run("go")
    text = next(e.result.text for e in result.journal if isinstance(e, ToolCallFinished))
    assert "No child could be started: you cannot grant ['shell']" in text
