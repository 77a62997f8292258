"""What a spawn toolset is made with, and what a parent can grant its children.

`SpawnSettings` is the base of `legato.spawn.SpawnToolset`. It owns the settings a
toolset is made with (the parent's tools and tool sources, the children's model and
instructions, skills, limits, the spawn policy, slicing, where child journals go, the
inheritance hook), the pool of the parent's tools as they are now (`pool`: what a child
can be granted, and nothing else), whether `spawn` is offered at all, and `RunChildren`,
what the toolset keeps for one run of the parent.

It must not start, resume or wait for a child (`legato.spawn._launch`), keep per-run
state beyond declaring it (`legato.spawn._runs`), or build the tools the model sees
(`legato.spawn._toolset`). Runtime layer: it imports nothing from the interfaces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from legato.budgets import Budget
from legato.exceptions import ToolDefinitionError
from legato.models import Model, infer_model
from legato.run import RunConfig
from legato.spawn._child import child_journals, current_depth
from legato.spawn._limits import SpawnLimits
from legato.spawn._policy import NeverSpawn, SpawnPolicy, ThresholdPolicy, TodoList
from legato.spawn._skills import SkillSet
from legato.spawn._slice import ContextSource, SliceMode
from legato.spawn._store import ChildRecord, JournalStore, MemoryJournalStore
from legato.spawn._waiting import Child
from legato.tools import RunContext, Tool, ToolSource, as_tool

__all__ = [
    "NO_TIMEOUT",
    "OWN_TOOLS",
    "SPAWNS_CHILDREN",
    "Inheritance",
    "RunChildren",
    "SpawnSettings",
]

SPAWNS_CHILDREN = "legato.spawns_children"
"""Tool metadata key: the tool runs child runs (whose tools the run's policy may name)."""

OWN_TOOLS = frozenset({"spawn", "wait_children", "todo", "open_skill", "read_skill_file"})
NO_TIMEOUT = 10.0**9
GRANTABLE_OWN = frozenset({"spawn", "wait_children", "todo"})
"""The toolset's own tools a parent may grant a child (with `spawn` offered)."""


@dataclass(kw_only=True)
class RunChildren:
    """What a spawn toolset keeps for one run of its parent (`legato.spawn._runs`)."""

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
        """How many children the run started (before a resume too)."""
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


class SpawnSettings:
    """What a spawn toolset is made with; the parent's grantable pool (see the module)."""

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
        clash = OWN_TOOLS & set(self._loose)
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
        self._runs: dict[str, RunChildren] = {}
        self._own = self._own_tools()

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

    # -- what a child can be granted -------------------------------------------------------------

    async def pool(self) -> dict[str, Tool]:
        """The parent's own tools (what can be granted), by name, as they are now."""
        tools = dict(self._loose)
        for source in self._sources:
            for t in await source.list_tools():
                if t.name in tools or t.name in OWN_TOOLS:
                    msg = f"two tools are named {t.name!r} (the second comes from {source.name!r})"
                    raise ToolDefinitionError(msg)
                tools[t.name] = t
        return tools

    @property
    def _child_agent(self) -> str:
        """The agent name of the children this toolset starts (how its journal knows them)."""
        return f"{self._name}-child"

    def _journals(self, ctx: RunContext[Any]) -> JournalStore:
        """Where this run's children keep their journals: the parent run's store by default."""
        return child_journals(self._explicit_store, ctx, self.store)

    def _own_tools(self) -> tuple[Tool, ...]:
        """This toolset's own tools: todo, spawn, wait_children, then the skills' tools."""
        raise NotImplementedError

    def _child_toolset(self, record: ChildRecord) -> ToolSource:
        """The tools a child started with `record` gets (`SpawnToolset` builds them)."""
        raise NotImplementedError
