"""What a spawn toolset keeps for each run of its parent, and the spawn policy's turn.

`RunTracker` (a layer of `legato.spawn.SpawnToolset`) keeps one `RunChildren` per run id,
so one agent serves concurrent runs: made on the run's first use of the toolset (a
resumed run learns from its journal which children it started and what the finished ones
spent, and resumes its unfinished background children), dropped when the run ends (a
task owned by the run's scope). It also owns the budget side of a run (the pool its
children split from, the share a new child gets), finding a child by id, and the spawn
policy's turn: once per step it measures the run, records `SpawnDecided`, and on a
decision that turns positive hints the model or starts children for pending todo items.

It must not build the tools the model sees (`legato.spawn._toolset`) nor start a child
other than through `ChildLauncher`. Runtime layer: imports nothing from the interfaces.
"""

from __future__ import annotations

import asyncio
from typing import Any

from legato._effects_parts import current_switches
from legato.budgets import Budget, Spend
from legato.events import SpawnDecided
from legato.exceptions import SpawnRefused, ToolError
from legato.spawn._child import child_budget
from legato.spawn._launch import ChildLauncher
from legato.spawn._limits import BudgetShare, children_pool, finished_children
from legato.spawn._policy import measure
from legato.spawn._settings import RunChildren
from legato.spawn._waiting import Child
from legato.tools import RunContext

__all__ = ["RunTracker"]


class RunTracker(ChildLauncher):
    """Per-run children, budget shares and the spawn policy's decisions (see the module)."""

    async def _run(self, ctx: RunContext[Any]) -> RunChildren:
        run = self._runs.get(ctx.run_id)
        if run is not None:
            return run
        started: set[str] = set()
        ended: dict[str, Spend] = {}
        if ctx.journal is not None and current_switches().rebuild_shares:
            # a resumed run: what its children spent before is not its to give again
            started, ended = finished_children(
                ctx.journal.events, run_id=ctx.run_id, agent=self._child_agent
            )
        pool = self._pool(ctx)
        if not (self._child_run and pool is ctx.budget):
            # (a child's own budget was rebuilt from its whole journal when it was launched)
            for spent in ended.values():
                pool.count_spent(spent)
        run = self._runs[ctx.run_id] = RunChildren(
            run_id=ctx.run_id, pool=pool, known=started, counted=set(ended)
        )
        if ctx.scope is not None:
            ctx.scope.start_task(self._hold(ctx.run_id), name=f"spawn-owner-{ctx.run_id}")
        await self._resume_background(ctx, run)
        return run

    def _pool(self, ctx: RunContext[Any]) -> Budget:
        """The budget the calling run's children split their shares from.

        A child run's own budget (its share); for a root run, what `children_budget`
        returns, else `SpawnLimits.budget` drawing from the run's budget.
        """
        if self._children_budget is not None:
            return self._children_budget(ctx)
        if self._child_run and isinstance(ctx.budget, Budget):
            return ctx.budget
        return children_pool(self.limits.budget, child_budget(None, ctx))

    async def _hold(self, run_id: str) -> None:
        """Lives as long as the run; forgets the run's children when the run ends."""
        try:
            await asyncio.Event().wait()
        finally:
            self._runs.pop(run_id, None)

    async def _resume_background(self, ctx: RunContext[Any], run: RunChildren) -> None:
        """Resume the run's unfinished background children found in the store."""
        for record in await self._journals(ctx).children(ctx.run_id):
            if record.background and record.lineage.run_id not in run.children:
                await self._launch(ctx, run, record, start=None)

    def _share(self, run: RunChildren, steps: int | None, tokens: int | None) -> BudgetShare:
        ceiling = self.limits.child.max_steps
        remaining = run.pool.remaining()
        left = None if remaining.steps == float("inf") else int(remaining.steps)
        left_tokens = None if remaining.tokens == float("inf") else int(remaining.tokens)
        if steps is None:
            candidates = [c for c in (ceiling, None if left is None else max(1, left // 2)) if c]
            steps = min(candidates) if candidates else None
        elif ceiling is not None:
            steps = min(steps, ceiling)
        if steps is not None and steps < 1:
            msg = "max_steps must be at least 1"
            raise SpawnRefused(msg)
        if tokens is None and left_tokens is not None:
            tokens = max(1, left_tokens // 2)  # like steps: half of what is left
        if tokens is not None and tokens < 1:
            msg = "max_tokens must be at least 1"
            raise SpawnRefused(msg)
        return BudgetShare(steps=steps, tokens=tokens)

    async def _find(self, ctx: RunContext[Any], run: RunChildren, child_id: str) -> Child:
        child = run.children.get(child_id)
        if child is not None:
            return child
        for record in await self._journals(ctx).children(run.run_id):
            if record.lineage.run_id == child_id:  # started before a resume: continue or read back
                return await self._launch(ctx, run, record, start=None)
        known = ", ".join(run.children) or "none"
        msg = f"no child {child_id!r} of this run; your children: {known}"
        raise ToolError(msg)

    # -- the spawn policy ------------------------------------------------------------------------

    async def _observe(self, ctx: RunContext[Any], *, failed: bool | None = None) -> str | None:
        """Measure the run, let the policy decide (once per step), act on a positive decision.

        Returns a hint for the model when the decision turned positive: the result of the
        tool call that triggered it carries the hint. With an auto-spawning policy, children
        are also started in the background for the pending todo items.
        """
        run = await self._run(ctx)
        if run.decided_step == ctx.step:
            return None
        run.decided_step = ctx.step
        # the parent's conversation fills the parent's window, not the children's model's
        window = ctx.model.profile.context_window if ctx.model is not None else None
        metrics = measure(
            ctx.messages,
            step=ctx.step,
            todos=run.todos,
            context_window=window,
            current_failed=failed,
        )
        decision = self.policy.decide(metrics)
        if ctx.scope is not None:
            ctx.scope.emit(
                SpawnDecided(
                    policy=self.policy.name,
                    spawn=decision.spawn,
                    reason=decision.reason,
                    metrics=metrics,
                )
            )
        turned_on = decision.spawn and not run.last_spawn
        run.last_spawn = decision.spawn
        if not turned_on or not self.offers_spawn:
            return None
        if self.policy.auto_spawn:
            started, refused = await self._auto_spawn(ctx, run)
            if started:
                return (
                    f"[spawn policy: {decision.reason}] Started children {', '.join(started)} "
                    "for pending todo items; collect their answers with wait_children."
                    + (f" Not started for the others: {refused}" if refused else "")
                )
            if refused:
                return f"[spawn policy: {decision.reason}] No child could be started: {refused}"
        return (
            f"[spawn policy: {decision.reason}] Consider handing self-contained parts of the "
            "work to sub-agents with the spawn tool."
        )

    async def _auto_spawn(
        self, ctx: RunContext[Any], run: RunChildren
    ) -> tuple[list[str], str | None]:
        """Start background children for pending todo items.

        Returns their ids, and why the rest could not start (budget, fan-out, an
        `auto_grant` tool the parent lacks).
        """
        started: list[str] = []
        for item in run.todos.pending:
            try:
                child = await self._start_child(
                    ctx,
                    run,
                    task=item.text,
                    tools=list(self._auto_grant),
                    skills=[],
                    share=self._share(run, None, None),
                    background=True,
                    call_id=f"auto{ctx.step}-{item.number}",
                )
            except SpawnRefused as refusal:
                return started, str(refusal)
            item.child = child.prepared.lineage.run_id
            started.append(item.child)
        return started, None
