"""`agent.as_tool(...)`: another agent as a tool; each call is a child run."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from legato._requests import ParkedRun
from legato.events import Journal, Lineage, RunEvent, RunStarted, UserPrompt
from legato.exceptions import ChildFailed, RunParked, SpawnRefused
from legato.messages import Message
from legato.run import RunDriver, RunResult
from legato.run._loop import default_owner
from legato.spawn._child import (
    ChildStart,
    DeferredChild,
    child_budget,
    child_journals,
    current_depth,
    deferred_children,
    execute_child,
    inherit_gate,
    prepare_child,
)
from legato.spawn._slice import SliceMode, select_slice
from legato.spawn._store import ChildRecord, JournalStore, MemoryJournalStore
from legato.tools import RunContext, Tool

if TYPE_CHECKING:
    from legato.budgets import Budget, BudgetLimits
    from legato.run import RunConfig

__all__ = ["AGENT_ATTRIBUTE", "ChildAgent", "agent_of", "agent_tool", "resume", "resume_stream"]


class ChildAgent(Protocol):
    """What running an agent as a child takes from it; a `legato.Agent` is one.

    Declared here, on the lower side: `legato.agent` imports spawn (for `Agent.as_tool`),
    so spawn names what it needs instead of importing the agent.
    """

    @property
    def name(self) -> str:
        """The agent's name, the child's in its lineage."""
        ...

    @property
    def instructions(self) -> str | None:
        """The agent's instructions, recorded in the child's `RunStarted`."""
        ...

    @property
    def max_steps(self) -> int:
        """The child's step limit."""
        ...

    @property
    def budget(self) -> Budget | BudgetLimits | None:
        """The agent's own budget, which holds beside the caller's."""
        ...

    def run_config(self, *, deps: Any = None) -> RunConfig[Any]:
        """The configuration of a run of the agent."""
        ...


AGENT_ATTRIBUTE = "__legato_agent__"
"""The attribute of an agent tool's function that holds the agent it runs."""


def agent_of(tool: Tool) -> ChildAgent | None:
    """The agent an `agent.as_tool(...)` tool runs as a child (None for other tools)."""
    return getattr(tool.function, AGENT_ATTRIBUTE, None)


def agent_tool(
    agent: ChildAgent,
    *,
    name: str,
    description: str,
    max_depth: int = 3,
    timeout: float | None = None,
    store: JournalStore | None = None,
    slice: SliceMode | None = "selective",
    slice_tokens: int = 2000,
    own_policy: bool = False,
) -> Tool:
    """A tool that runs `agent` as a child run on the task the caller gives.

    The child has the agent's own tools and instructions; it receives the slice of the
    caller's conversation relevant to the task (`slice=None`: the task only). Its events
    stream through the caller's run with their lineage; its failure is a tool error. It
    spends from the caller's run budget (and from the agent's own budget, if it has one):
    each of its calls is reserved in both before it is made.
    """
    memory = MemoryJournalStore()  # used when neither `store` nor the caller's run has one

    async def run_agent(ctx: RunContext[Any], task: str) -> Any:
        """Run the agent on a task.

        Args:
            ctx: The calling run.
            task: What the agent must do and deliver.
        """
        depth = current_depth() + 1
        if depth > max_depth:
            msg = f"{name}: a child here would be at depth {depth}, beyond the limit of {max_depth}"
            raise SpawnRefused(msg)
        lineage = Lineage(
            run_id=f"{ctx.run_id}-{ctx.tool_call_id or ctx.step}",
            parent_run_id=ctx.run_id,
            parent_step=ctx.step,
            parent_call_id=ctx.tool_call_id,
            agent=agent.name,
            depth=depth,
        )
        record = ChildRecord(lineage=lineage, task=task, max_steps=agent.max_steps)
        config = inherit_gate(agent.run_config(deps=ctx.deps), ctx, own_policy=own_policy)
        # the child spends from the caller's budget too; the agent's own budget also holds
        config = replace(config, budget=child_budget(agent.budget, ctx))
        journals = child_journals(store, ctx, memory)

        def start() -> ChildStart:
            sliced = (
                None
                if slice is None
                else select_slice(
                    task,
                    child_run_id=lineage.run_id,
                    messages=ctx.messages,
                    token_budget=slice_tokens,
                    mode=slice,
                )
            )
            return ChildStart(
                started=RunStarted(
                    run_id=lineage.run_id,
                    agent=agent.name,
                    model=config.model.name,
                    instructions=agent.instructions,
                    history=sliced.history if sliced else (),
                    owner=default_owner(),
                ),
                prompt=UserPrompt(message=Message.user(task)),
                sliced=sliced.event if sliced else None,
            )

        emit = ctx.scope.emit if ctx.scope is not None else _drop
        prepared = await prepare_child(record, store=journals, emit=emit, make_start=start)
        deferred = deferred_children()
        if deferred is not None and prepared.finished is None:
            deferred.append(DeferredChild(lineage=lineage, agent=agent, share=_share(config)))
            raise RunParked(
                ParkedRun(run_id=lineage.run_id, journal=prepared.journal, requests=()),
                f"child run {lineage.run_id} runs elsewhere; the call waits for its end",
            )
        outcome = await execute_child(
            prepared,
            config=config,
            store=journals,
            emit=emit,
            time_limit=timeout,
            stopping=lambda: getattr(ctx.scope, "stopping", None),
        )
        if not outcome.ok:
            raise ChildFailed(lineage.run_id, outcome.error or outcome.outcome)
        return outcome.output

    run_agent.__dict__[AGENT_ATTRIBUTE] = agent  # the child agent, for a durable engine
    return Tool.from_function(
        run_agent,
        name=name,
        description=description,
        timeout=None if timeout is None else timeout + 5.0,
        metadata={"legato.spawns_children": True},
    )


def _share(config: Any) -> tuple[tuple[str, float], ...]:
    """The finite amounts a child's budget has left (its parent's included)."""
    budget = config.budget
    if budget is None:
        return ()
    left = budget.remaining()
    amounts = {f: getattr(left, f) for f in _SHARED}
    return tuple((f, max(v, 0.0)) for f, v in amounts.items() if math.isfinite(v))


_SHARED = (
    "input_tokens",
    "output_tokens",
    "tokens",
    "dollars",
    "model_calls",
    "tool_calls",
    "steps",
)


def _drop(event: RunEvent) -> None:
    """Where a child's events go when the tool is called outside a run."""


async def resume_stream(
    agent: ChildAgent, journal: Journal, *, deps: Any = None
) -> AsyncIterator[RunEvent]:
    """Continue an interrupted run of `agent` from its journal, yielding the new events.

    Finished tool calls and model calls are not repeated; a `spawn` call that was running
    finds its child in the spawn toolset's store and resumes it (a finished child's answer
    is read from its journal).
    """
    driver = RunDriver(agent.run_config(deps=deps), journal=Journal(journal.events))
    seen = len(journal)
    index = 0
    async for event in driver.events():
        index += 1
        if index > seen:
            yield event


async def resume(agent: ChildAgent, journal: Journal, *, deps: Any = None) -> RunResult[Any]:
    """Continue an interrupted run from its journal to its result."""
    driver = RunDriver(agent.run_config(deps=deps), journal=Journal(journal.events))
    async for _ in driver.events():
        pass
    return driver.result()
