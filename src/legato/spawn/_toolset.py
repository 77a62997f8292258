"""`spawn_tools`: the parent's tools plus `spawn`, `wait_children`, `todo` and skill tools.

The toolset *is* the parent's grantable set: a child can be granted any of its tools (by
name) and nothing else. Everything per run (children, children pool, todo list, policy
state) is kept under the run's id, so one agent serves concurrent runs; it is dropped
when the run ends (a task owned by the run's scope notices).

This module is the face the model and the agent see: the tools listed for a step, the
`spawn`, `wait_children` and `todo` tools, the parent's tools wrapped so the spawn policy
observes each call, and the toolset a child gets (its granted tools read live from the
parent's pool). `SpawnToolset` is built in layers, each a module read in one sitting:

- `legato.spawn._settings`: what the toolset is made with, the parent's grantable pool;
- `legato.spawn._launch`: starting and resuming one child (limits, slice, budget share,
  the parent's gate narrowed);
- `legato.spawn._runs`: what is kept per run of the parent, and the spawn policy's turn;
- this module: the tools.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from legato.budgets import Budget
from legato.exceptions import ChildFailed, ToolError
from legato.messages import TextPart
from legato.models import Model
from legato.spawn._limits import SpawnLimits
from legato.spawn._policy import NeverSpawn, SpawnPolicy
from legato.spawn._runs import RunTracker
from legato.spawn._settings import (
    GRANTABLE_OWN,
    NO_TIMEOUT,
    SPAWNS_CHILDREN,
    Inheritance,
)
from legato.spawn._skills import SkillSet
from legato.spawn._slice import ContextSource, SliceMode
from legato.spawn._store import ChildRecord, JournalStore
from legato.spawn._waiting import WaitMode, collect, wait_for
from legato.tools import RunContext, Tool, ToolSource, to_content

__all__ = ["Inheritance", "SpawnToolset", "spawn_tools"]


class SpawnToolset(RunTracker):
    """A `ToolSource` for a parent that may spawn children (see `spawn_tools`)."""

    # -- the tools -------------------------------------------------------------------------------

    def _own_tools(self) -> tuple[Tool, ...]:
        return (self._todo_tool(), self._spawn_tool(), self._wait_tool(), *self.skills.tools())

    async def list_tools(self) -> Sequence[Tool]:
        """The pool tools (observed for the spawn policy) and this toolset's own tools."""
        pool = await self.pool()
        listed = [self._observed(t) for t in pool.values()]
        todo, spawn, wait, *skill_tools = self._own
        listed.append(todo)
        if self.offers_spawn:
            grantable = ", ".join([*pool, "spawn", "todo"])
            note = f"\n\nTools you can grant: {grantable}."
            if len(self.skills):
                note += f" Skills you can grant: {', '.join(self.skills.names)}."
            listed += [spawn.replace(description=spawn.description + note), wait]
        listed += skill_tools
        return listed

    def _observed(self, tool: Tool) -> Tool:
        async def observed(ctx: RunContext[Any], /, **kwargs: Any) -> Any:
            try:
                value = await tool.invoke(kwargs, ctx)
            except Exception:
                await self._observe(ctx, failed=True)
                raise
            hint = await self._observe(ctx, failed=False)
            if hint is None:
                return value
            if isinstance(value, str):
                return f"{value}\n\n{hint}"
            return (*to_content(value), TextPart(text=hint))

        return replace(tool, function=observed, context_parameter="ctx", context_positional=True)

    def _todo_tool(self) -> Tool:
        async def todo(
            ctx: RunContext[Any], add: list[str] | None = None, done: list[int] | None = None
        ) -> str:
            """Keep a todo list of the subtasks of your task; returns the list.

            Args:
                ctx: The calling run.
                add: New items to append.
                done: Numbers of items you have completed.
            """
            run = await self._run(ctx)
            run.todos.add(add or [])
            unknown = run.todos.complete(done or [], step=ctx.step)
            hint = await self._observe(ctx)
            text = run.todos.render()
            if unknown:
                text += f"\n(no items numbered {unknown})"
            return f"{text}\n\n{hint}" if hint else text

        return Tool.from_function(todo)

    def _spawn_tool(self) -> Tool:
        async def spawn(
            ctx: RunContext[Any],
            task: str,
            tools: list[str] | None = None,
            skills: list[str] | None = None,
            max_steps: int | None = None,
            max_tokens: int | None = None,
            wait: bool = True,
        ) -> str:
            """Start a sub-agent (a child run) on one self-contained part of your work.

            The child sees only the parts of this conversation relevant to its task, and can
            use only the tools and skills you grant it.

            Args:
                ctx: The calling run.
                task: What the child must do and deliver; name the files, ids and facts it needs.
                tools: Names of your tools the child may use (none if omitted).
                skills: Names of your skills the child may open.
                max_steps: The child's step allowance, taken from your remaining budget.
                max_tokens: The child's token allowance, taken from your remaining budget.
                wait: true: wait and get the child's answer; false: run it in the background
                    and collect it later with wait_children.
            """
            run = await self._run(ctx)
            child = await self._start_child(
                ctx,
                run,
                task=task,
                tools=tools or [],
                skills=skills or [],
                share=self._share(run, max_steps, max_tokens),
                background=not wait,
                call_id=ctx.tool_call_id or f"s{ctx.step}-{run.started}",
            )
            child_id = child.prepared.lineage.run_id
            if not wait:
                return f"Started child {child_id} in the background; collect its answer with wait_children."
            outcome = await collect(child)
            if not outcome.ok:
                raise ChildFailed(child_id, outcome.error or outcome.outcome)
            return outcome.text

        return Tool.from_function(
            spawn, timeout=NO_TIMEOUT, max_retries=3, metadata={SPAWNS_CHILDREN: True}
        )

    def _wait_tool(self) -> Tool:
        async def wait_children(
            ctx: RunContext[Any],
            ids: list[str] | None = None,
            mode: WaitMode = "all",
            max_wait: float | None = None,
        ) -> str:
            """Wait for children started in the background and get their answers.

            Args:
                ctx: The calling run.
                ids: The children to wait for (all of yours if omitted).
                mode: all: every child; first: the first to end; any: the first to succeed.
                max_wait: Seconds to wait at most; children still running keep running.
            """
            run = await self._run(ctx)
            targets = (
                [await self._find(ctx, run, i) for i in ids] if ids else list(run.children.values())
            )
            if not targets:
                msg = "you have no children to wait for"
                raise ToolError(msg)
            return await wait_for(targets, mode, max_wait)

        return Tool.from_function(wait_children, timeout=NO_TIMEOUT, max_retries=3)

    # -- a child's tools ---------------------------------------------------------------------

    def _child_toolset(self, record: ChildRecord) -> SpawnToolset:
        granted = set(record.tools)
        pool = _Granted(self, granted - GRANTABLE_OWN)
        return SpawnToolset(
            [pool],
            model=self.model,
            instructions=self._instructions,
            skills=self.skills.subset(record.skills),
            limits=self.limits,
            policy=self.policy if "spawn" in granted else NeverSpawn(name="spawn-not-granted"),
            slice=self._slice,
            sources=self._context_sources,
            store=self._explicit_store,
            inherit=self._inherit,
            name=self._name,
            child_run=True,
        )


class _Granted:
    """The granted part of a parent's pool, read live (a tool the parent loses, the child loses)."""

    __slots__ = ("_names", "_parent")

    def __init__(self, parent: SpawnToolset, names: set[str]) -> None:
        self._parent = parent
        self._names = names

    @property
    def name(self) -> str:
        """The source's name."""
        return "granted"

    async def list_tools(self) -> Sequence[Tool]:
        """The granted tools the parent still has."""
        return [t for n, t in (await self._parent.pool()).items() if n in self._names]


def spawn_tools(
    tools: Sequence[Tool | ToolSource | Callable[..., Any]] = (),
    *,
    model: Model | str,
    instructions: str | None = None,
    skills: SkillSet | None = None,
    limits: SpawnLimits | None = None,
    policy: SpawnPolicy | None = None,
    slice: SliceMode = "selective",
    sources: Sequence[ContextSource] = (),
    store: JournalStore | None = None,
    auto_grant: Sequence[str] = (),
    children_budget: Callable[[RunContext[Any]], Budget] | None = None,
    inherit: Inheritance | None = None,
) -> SpawnToolset:
    """A parent's tools plus the tools to spawn children and wait for them.

    Args:
        tools: The parent's own tools; a child can be granted any of them and nothing else.
        model: The model children run on.
        instructions: Instructions every child starts with (its task framing is added).
        skills: Skills the parent may open and hand to children.
        limits: Depth, fan-out, per-child ceilings, the children's shared budget.
        policy: The adaptive spawn policy (`NeverSpawn()` for a static agent).
        slice: `selective` (default) or `full` context transfer to children.
        sources: Memory items and state keys that may be sliced to children.
        store: Where child journals are kept (in memory by default).
        auto_grant: Tools granted to children the policy starts on its own.
        children_budget: The budget a root run's children split their shares from, per
            run (default: a `Budget` of `limits.budget` drawing from the run's budget).
        inherit: The hook that passes the parent's gate, approvals and sandbox to each
            child, narrowed.
    """
    return SpawnToolset(
        tools,
        model=model,
        instructions=instructions,
        skills=skills,
        limits=limits,
        policy=policy,
        slice=slice,
        sources=sources,
        store=store,
        auto_grant=auto_grant,
        children_budget=children_budget,
        inherit=inherit,
    )
