"""`spawn_tools`: the parent's tools plus `spawn`, `wait_children`, `todo` and skill tools.

The toolset *is* the parent's grantable set: a child can be granted any of its tools (by
name) and nothing else. Everything per run (children, children pool, todo list, policy
state) is kept under the run's id, so one agent serves concurrent runs; it is dropped
when the run ends (a task owned by the run's scope notices).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from legato._effects_parts import current_switches
from legato.budgets import Budget, Spend, nested_budget
from legato.events import Journal, Lineage, RunStarted, SpawnDecided, UserPrompt
from legato.exceptions import ChildFailed, SpawnRefused, ToolDefinitionError, ToolError
from legato.messages import Message, TextPart
from legato.models import Model, infer_model
from legato.run import OutputSchema, RunConfig
from legato.run._loop import default_owner
from legato.spawn._child import (
    ChildOutcome,
    ChildStart,
    child_budget,
    child_journals,
    current_depth,
    execute_child,
    inherit_gate,
    prepare_child,
)
from legato.spawn._limits import (
    BudgetShare,
    ChildLimits,
    SpawnLimits,
    children_pool,
    finished_children,
    journal_spent,
    narrow_limits,
    split_share,
)
from legato.spawn._policy import NeverSpawn, SpawnPolicy, ThresholdPolicy, TodoList, measure
from legato.spawn._skills import SkillSet
from legato.spawn._slice import ContextSource, SliceMode, select_slice
from legato.spawn._store import ChildRecord, JournalStore, MemoryJournalStore
from legato.spawn._waiting import Child, WaitMode, collect, wait_for
from legato.tools import RunContext, Tool, ToolSource, as_tool, to_content

__all__ = ["Inheritance", "SpawnToolset", "spawn_tools"]

SPAWNS_CHILDREN = "legato.spawns_children"
"""Tool metadata key: the tool runs child runs (whose tools the run's policy may name)."""

_OWN_TOOLS = frozenset({"spawn", "wait_children", "todo", "open_skill", "read_skill_file"})
_NO_TIMEOUT = 10.0**9


@dataclass(kw_only=True)
class _Run:
    run_id: str
    pool: Budget
    """The budget the run's children split their shares from."""
    children: dict[str, Child] = field(default_factory=lambda: {})
    known: set[str] = field(default_factory=lambda: set())
    """Every child the run started (before a resume too): what `max_children` counts."""
    counted: set[str] = field(default_factory=lambda: set())
    """The children whose spending `pool` counts already (they ended)."""
    todos: TodoList = field(default_factory=TodoList)
    decided_step: int = -1
    last_spawn: bool = False

    @property
    def started(self) -> int:
        return len(self.known)


@runtime_checkable
class Inheritance(Protocol):
    """The hook where the effect gate, approval policy and sandbox pass to a child, narrowed.

    Called with the child's run configuration as spawning builds it (granted tools, narrowed
    limits, the parent's deps); return it with whatever the parent's policies add. What it
    adds may only be narrower than the parent's: a child never gets more than its parent.
    """

    def child_config(
        self, config: RunConfig[str], *, record: ChildRecord, ctx: RunContext[Any]
    ) -> RunConfig[str]:
        """The child's configuration with the inherited policies applied."""
        ...


class SpawnToolset:
    """A `ToolSource` for a parent that may spawn children (see `spawn_tools`)."""

    def __init__(
        self,
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
        name: str = "spawn",
        child_run: bool = False,
    ) -> None:
        loose = [t for t in tools if isinstance(t, Tool) or not isinstance(t, ToolSource)]
        self._sources: list[ToolSource] = [
            s for s in tools if isinstance(s, ToolSource) and not isinstance(s, Tool)
        ]
        self._loose = {t.name: t for t in (as_tool(x) for x in loose)}
        clash = _OWN_TOOLS & set(self._loose)
        if clash:
            msg = f"tools named {sorted(clash)} clash with the spawn toolset's own tools"
            raise ToolDefinitionError(msg)
        self._model_spec = model
        self._model: Model | None = None if isinstance(model, str) else model
        self._instructions = instructions
        self.skills = skills or SkillSet()
        self.limits = limits or SpawnLimits()
        self.policy: SpawnPolicy = policy or ThresholdPolicy()
        self._slice: SliceMode = slice
        self._context_sources = list(sources)
        self._explicit_store = store
        self.store: JournalStore = store or MemoryJournalStore()
        """Where child journals go when the parent run has no store (or the one given)."""
        self._auto_grant = tuple(auto_grant)
        self._name = name
        self._children_budget = children_budget
        self._inherit = inherit
        self._child_run = child_run
        """A child's toolset: its children split their shares from the child's own budget."""
        self._runs: dict[str, _Run] = {}
        self._own = (self._todo_tool(), self._spawn_tool(), self._wait_tool(), *self.skills.tools())

    @property
    def name(self) -> str:
        """The toolset's name."""
        return self._name

    @property
    def model(self) -> Model:
        """The model children run on."""
        if self._model is None:
            self._model = infer_model(self._model_spec)
        return self._model

    @property
    def offers_spawn(self) -> bool:
        """Whether `spawn` is offered: not under the static policy, not at the depth limit."""
        static = isinstance(self.policy, NeverSpawn)
        return not static and current_depth() < self.limits.max_depth

    # -- the tools -------------------------------------------------------------------------------

    async def pool(self) -> dict[str, Tool]:
        """The parent's own tools (what can be granted), by name, as they are now."""
        tools = dict(self._loose)
        for source in self._sources:
            for t in await source.list_tools():
                if t.name in tools or t.name in _OWN_TOOLS:
                    msg = f"two tools are named {t.name!r} (the second comes from {source.name!r})"
                    raise ToolDefinitionError(msg)
                tools[t.name] = t
        return tools

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
            spawn, timeout=_NO_TIMEOUT, max_retries=3, metadata={SPAWNS_CHILDREN: True}
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

        return Tool.from_function(wait_children, timeout=_NO_TIMEOUT, max_retries=3)

    # -- per run ---------------------------------------------------------------------------------

    @property
    def _child_agent(self) -> str:
        """The agent name of the children this toolset starts (how its journal knows them)."""
        return f"{self._name}-child"

    async def _run(self, ctx: RunContext[Any]) -> _Run:
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
        run = self._runs[ctx.run_id] = _Run(
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

    async def _resume_background(self, ctx: RunContext[Any], run: _Run) -> None:
        """Resume the run's unfinished background children found in the store."""
        for record in await self._journals(ctx).children(ctx.run_id):
            if record.background and record.lineage.run_id not in run.children:
                await self._launch(ctx, run, record, start=None)

    def _share(self, run: _Run, steps: int | None, tokens: int | None) -> BudgetShare:
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

    async def _find(self, ctx: RunContext[Any], run: _Run, child_id: str) -> Child:
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

    async def _auto_spawn(self, ctx: RunContext[Any], run: _Run) -> tuple[list[str], str | None]:
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

    # -- starting children -----------------------------------------------------------------------

    async def _start_child(
        self,
        ctx: RunContext[Any],
        run: _Run,
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
        grantable = set(pool) | (
            {"spawn", "wait_children", "todo"} if self.offers_spawn else {"todo"}
        )
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
            agent=f"{self._name}-child",
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
        run: _Run,
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

    def _journals(self, ctx: RunContext[Any]) -> JournalStore:
        """Where this run's children keep their journals: the parent run's store by default."""
        return child_journals(self._explicit_store, ctx, self.store)

    def _resumed_share(self, run: _Run, share: BudgetShare, journal: Journal) -> Budget:
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

    def _child_toolset(self, record: ChildRecord) -> SpawnToolset:
        granted = set(record.tools)
        pool = _Granted(self, granted - {"spawn", "wait_children", "todo"})
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


def _drop(event: object) -> None:
    """Where events go when a tool is called outside a run."""


def _no_fresh_start(record: ChildRecord) -> Callable[[], ChildStart]:
    def fail() -> ChildStart:
        msg = f"child {record.lineage.run_id} is linked but its journal is missing from the store"
        raise ToolError(msg)

    return fail


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
