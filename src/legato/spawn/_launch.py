"""Starting and resuming one child run of a parent's run.

`ChildLauncher` (a layer of `legato.spawn.SpawnToolset`) checks a spawn against the
limits (depth, fan-out, what the parent can grant), records the child (`ChildRecord`),
builds its first events (a selective slice of the parent's conversation and memory, its
instructions), splits its budget share from the run's pool (a resumed child's share less
what its journal shows it spent), gives it the parent's gate narrowed, and runs it as a
task of the parent's scope; the share is closed when the child ends, so the parent gets
back exactly what is unspent.

It must not decide whether to spawn (the spawn policy, `legato.spawn._runs`) or how the
model asks for it (`legato.spawn._toolset`). Runtime layer: imports nothing from the
interfaces.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from legato._effects_parts import current_switches
from legato.budgets import Budget, Spend, nested_budget
from legato.events import Journal, Lineage, RunStarted, UserPrompt
from legato.exceptions import SpawnRefused, ToolError
from legato.messages import Message
from legato.run import OutputSchema, RunConfig
from legato.run._loop import default_owner
from legato.spawn._child import (
    ChildOutcome,
    ChildStart,
    current_depth,
    execute_child,
    inherit_gate,
    prepare_child,
)
from legato.spawn._limits import BudgetShare, ChildLimits, journal_spent, narrow_limits, split_share
from legato.spawn._settings import GRANTABLE_OWN, RunChildren, SpawnSettings
from legato.spawn._slice import select_slice
from legato.spawn._store import ChildRecord
from legato.spawn._waiting import Child
from legato.tools import RunContext

__all__ = ["ChildLauncher"]


class ChildLauncher(SpawnSettings):
    """Starts and resumes a run's children (see the module)."""

    async def _start_child(
        self,
        ctx: RunContext[Any],
        run: RunChildren,
        *,
        task: str,
        tools: list[str],
        skills: list[str],
        share: BudgetShare,
        background: bool,
        call_id: str,
    ) -> Child:
        child_id = f"{ctx.run_id}-{call_id}"
        existing = run.children.get(child_id)
        if existing is not None:
            return existing
        depth = current_depth() + 1
        if depth > self.limits.max_depth:
            msg = f"a child here would be at depth {depth}, beyond the limit of {self.limits.max_depth}; do this task yourself"
            raise SpawnRefused(msg)
        if child_id not in run.known and run.started >= self.limits.max_children:
            msg = f"this run has started its limit of {self.limits.max_children} children"
            raise SpawnRefused(msg)
        pool = await self.pool()
        grantable = set(pool) | (GRANTABLE_OWN if self.offers_spawn else {"todo"})
        unknown = [t for t in tools if t not in grantable]
        if unknown:
            msg = f"you cannot grant {unknown}: they are not among your tools ({', '.join(sorted(grantable))})"
            raise SpawnRefused(msg)
        try:
            self.skills.subset(skills)
        except ToolError as exc:
            raise SpawnRefused(str(exc)) from None
        lineage = Lineage(
            run_id=child_id,
            parent_run_id=ctx.run_id,
            parent_step=ctx.step,
            parent_call_id=ctx.tool_call_id,
            agent=self._child_agent,
            depth=depth,
        )
        record = ChildRecord(
            lineage=lineage,
            task=task,
            tools=tuple(dict.fromkeys(tools)),
            skills=tuple(dict.fromkeys(skills)),
            max_steps=share.steps,
            max_tokens=share.tokens,
            background=background,
        )
        return await self._launch(ctx, run, record, start=lambda: self._fresh(ctx, record))

    def _fresh(self, ctx: RunContext[Any], record: ChildRecord) -> ChildStart:
        lineage = record.lineage
        sliced = select_slice(
            record.task,
            child_run_id=lineage.run_id,
            messages=ctx.messages,
            sources=self._context_sources,
            granted_tools=record.tools,
            token_budget=self.limits.slice_tokens,
            mode=self._slice,
        )
        return ChildStart(
            started=RunStarted(
                run_id=lineage.run_id,
                agent=lineage.agent,
                model=self.model.name,
                instructions=self._child_instructions(record),
                history=sliced.history,
                owner=default_owner(),
            ),
            prompt=UserPrompt(message=Message.user(record.task)),
            sliced=sliced.event,
        )

    def _child_instructions(self, record: ChildRecord) -> str:
        lineage = record.lineage
        parts = [self._instructions] if self._instructions else []
        parts.append(
            f"You are a sub-agent (run {lineage.run_id}, depth {lineage.depth}) started by run "
            f"{lineage.parent_run_id} for one task. Do only that task, then answer with its "
            "result: your answer goes back to the agent that started you. Context it handed "
            "over, if any, opens the conversation."
        )
        index = self.skills.subset(record.skills).index()
        if index:
            parts.append(index)
        return "\n\n".join(parts)

    async def _launch(
        self,
        ctx: RunContext[Any],
        run: RunChildren,
        record: ChildRecord,
        *,
        start: Callable[[], ChildStart] | None,
    ) -> Child:
        child_id = record.lineage.run_id
        share = BudgetShare(steps=record.max_steps, tokens=record.max_tokens)
        budget: Budget | None = None
        journals = self._journals(ctx)
        if await journals.load(child_id) is None:
            # a fresh child: its share must fit, or nothing is recorded
            budget = split_share(run.pool, share, min_output=self.limits.min_output_tokens)
        emit = ctx.scope.emit if ctx.scope is not None else _drop
        if start is None:
            start = _no_fresh_start(record)
        try:
            prepared = await prepare_child(record, store=journals, emit=emit, make_start=start)
        except BaseException:
            if budget is not None:  # nothing was started: the share goes back
                budget.close()
            raise
        child = Child(prepared=prepared)
        run.children[child_id] = child
        run.known.add(child_id)
        done = prepared.finished
        if done is not None:  # read back from its journal: count what it spent
            if child_id not in run.counted:
                run.pool.count_spent(Spend(steps=done.tree_steps, tokens=done.usage.total_tokens))
                run.counted.add(child_id)
            child.outcome = done
            return child
        if budget is None:
            budget = self._resumed_share(run, share, prepared.journal)
        limits = narrow_limits(
            self.limits.child,
            ChildLimits(max_steps=record.max_steps, settings=self.limits.child.settings),
        )
        config: RunConfig[str] = RunConfig(
            agent_name=record.lineage.agent,
            model=self.model,
            instructions=None,
            tool_sources=[self._child_toolset(record)],
            output=OutputSchema.build(str),
            settings=limits.settings,
            max_steps=limits.max_steps or 1,
            tool_timeout=limits.tool_timeout,
            deps=ctx.deps,
        )
        config = inherit_gate(config, ctx)  # the parent's policy (nested) and hooks
        if self._inherit is not None:
            config = self._inherit.child_config(config, record=record, ctx=ctx)
        # the child's tree spends from its share, so from this run's budget too (and from
        # one inherited): each of its calls is reserved there by its gate before it is made
        config = replace(config, budget=nested_budget(config.budget, budget))
        share_budget = budget
        scope = ctx.scope

        async def run_it() -> ChildOutcome:
            try:
                outcome = await execute_child(
                    prepared,
                    config=config,
                    store=journals,
                    emit=emit,
                    time_limit=limits.timeout,
                    stopping=lambda: getattr(scope, "stopping", None),
                )
            finally:
                # the parent gets back exactly what is unspent, and is charged what was spent
                share_budget.close()
                run.counted.add(child_id)
            child.outcome = outcome
            return outcome

        if scope is not None:
            child.task = scope.start_task(run_it(), name=f"child-{child_id}")
        else:
            child.task = asyncio.create_task(run_it())
        return child

    def _resumed_share(self, run: RunChildren, share: BudgetShare, journal: Journal) -> Budget:
        """A resumed child's budget: its share less what its journal shows it spent.

        Split from the run's pool again; if the pool cannot give it (a journal that lacks
        the child's start), the child runs on a share of its own.
        """
        spent = journal_spent(journal.events) if current_switches().rebuild_shares else None
        floor = self.limits.min_output_tokens
        try:
            return split_share(run.pool, share, min_output=floor, spent=spent)
        except SpawnRefused:
            own = Budget(steps=share.steps, tokens=share.tokens, min_output=floor)
            if spent is not None:
                own.count_spent(spent)
            return own


def _drop(event: object) -> None:
    """Where events go when a tool is called outside a run."""


def _no_fresh_start(record: ChildRecord) -> Callable[[], ChildStart]:
    def fail() -> ChildStart:
        msg = f"child {record.lineage.run_id} is linked but its journal is missing from the store"
        raise ToolError(msg)

    return fail
