"""Budgets and limits a child inherits: narrowed, never widened.

A parent hands each child a *share* of what it has left, and the share is a `Budget`: a
`split` of the parent's budget (`split_share`), held in the parent while the child runs,
its unspent part returned when the child ends. Each of the child's model calls reserves
its worst case in it through the effect gate, like every model call, so the share holds
before anything is spent. A root run's children split their shares from its children
pool (`children_pool`), which draws from the run's own budget. A resumed run rebuilds its
pool and its children's shares from the journals (`finished_children`, `journal_spent`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from legato.budgets import Budget, BudgetLimits, Spend
from legato.events import JournalEvent, SpawnFinished, SpawnOutcome, SpawnStarted
from legato.exceptions import BudgetExceeded, ConfigurationError, SpawnRefused
from legato.models import ModelSettings

__all__ = [
    "BudgetShare",
    "ChildLimits",
    "SpawnLimits",
    "children_pool",
    "finished_children",
    "journal_spent",
    "narrow_limits",
    "narrow_settings",
    "split_share",
]


def _min(a: float | None, b: float | None) -> float | None:
    """The tighter of two limits, where None means unlimited."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _min_int(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetShare:
    """An amount of work: model steps and tokens (None: not limited)."""

    steps: int | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        for name, value in (("steps", self.steps), ("tokens", self.tokens)):
            if value is not None and value < 0:
                msg = f"a budget share cannot have negative {name} ({value})"
                raise ConfigurationError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildLimits:
    """The limits a child run runs under; see `narrow_limits`."""

    max_steps: int | None = None
    tool_timeout: float | None = None
    """Seconds each tool call may take."""
    timeout: float | None = None
    """Seconds the whole child run may take."""
    settings: ModelSettings = field(default_factory=ModelSettings)


def narrow_settings(parent: ModelSettings, requested: ModelSettings) -> ModelSettings:
    """The parent's settings with limit fields tightened by `requested`, never loosened.

    `max_tokens`, `timeout` and `thinking_budget` take the smaller value; parallel tool
    calls stay off if the parent turned them off. Other fields are the parent's.
    """
    parallel = parent.parallel_tool_calls
    if parallel is not False and requested.parallel_tool_calls is not None:
        parallel = requested.parallel_tool_calls
    return replace(
        parent,
        max_tokens=_min_int(parent.max_tokens, requested.max_tokens),
        timeout=_min(parent.timeout, requested.timeout),
        thinking_budget=_min_int(parent.thinking_budget, requested.thinking_budget),
        parallel_tool_calls=parallel,
    )


def narrow_limits(parent: ChildLimits, requested: ChildLimits) -> ChildLimits:
    """Each of `requested`'s limits, capped by the parent's: a child can only narrow."""
    return ChildLimits(
        max_steps=_min_int(parent.max_steps, requested.max_steps),
        tool_timeout=_min(parent.tool_timeout, requested.tool_timeout),
        timeout=_min(parent.timeout, requested.timeout),
        settings=narrow_settings(parent.settings, requested.settings),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnLimits:
    """How far a run may go in spawning children."""

    max_depth: int = 2
    """Children of children of ... down to this depth (1: children only)."""
    max_children: int = 8
    """Children one run may start in total."""
    child: ChildLimits = field(
        default_factory=lambda: ChildLimits(max_steps=20, tool_timeout=300.0, timeout=600.0)
    )
    """The ceiling for every child; a spawn request can only narrow it."""
    budget: BudgetShare = field(default_factory=lambda: BudgetShare(steps=100))
    """What all children of a root run may use together: its children pool, a `Budget` of
    these limits drawing from the run's budget, which each spawn splits a share from (a
    child's children split theirs from the child's share)."""
    slice_tokens: int = 2000
    """Token budget of the context slice each child receives."""
    min_output_tokens: int = 128
    """A child with a token share makes a model call only if the share leaves at least this
    many tokens of output after the call's estimated input (fewer if the call asks for
    fewer); each call's `max_tokens` is capped to what the share leaves (the share's
    `BudgetLimits.min_output`)."""

    def __post_init__(self) -> None:
        if self.max_depth < 1:
            msg = "max_depth must be at least 1"
            raise ConfigurationError(msg)
        if self.max_children < 0:
            msg = "max_children cannot be negative"
            raise ConfigurationError(msg)
        if self.min_output_tokens < 1:
            msg = "min_output_tokens must be at least 1"
            raise ConfigurationError(msg)


def children_pool(limits: BudgetShare, parent: Budget | None) -> Budget:
    """The budget a root run's children take their shares from.

    `limits` (`SpawnLimits.budget`: what all its children may use together), drawing from
    the run's own budget when it has one, so every share is held there too.
    """
    own = BudgetLimits(steps=limits.steps, tokens=limits.tokens)
    return Budget(own, parent=parent)


def split_share(
    pool: Budget, share: BudgetShare, *, min_output: int, spent: Spend | None = None
) -> Budget:
    """A child's budget: `share` split from `pool`, held there until the child's is closed.

    The child's steps and tokens are limited to its share (moved out of `pool`, whose
    remainder returns when the budget is closed); everything else it reserves in `pool`
    too. Its calls are fitted to what the share has left (`BudgetLimits.min_output`).
    `spent`: what a resumed child spent before (its journal, `journal_spent`): counted in
    `pool` as spent, and only the rest of the share is split.

    Raises:
        SpawnRefused: `pool` does not have the share left.
    """
    amounts: dict[str, float] = {}
    before = spent or Spend()
    if share.steps is not None:
        amounts["steps"] = max(0, share.steps - before.steps)
    if share.tokens is not None:
        amounts["tokens"] = max(0, share.tokens - before.tokens)
    try:
        child = pool.split(**amounts)
    except BudgetExceeded as exc:
        left = max(0.0, exc.limit - exc.used - exc.reserved)
        msg = (
            f"the budget share is larger than what remains: {exc.resource} "
            f"{exc.requested:g} > {left:g} remaining"
        )
        raise SpawnRefused(msg) from None
    if spent is not None:
        pool.count_spent(Spend(steps=before.steps, tokens=before.tokens))
    child.limits = replace(child.limits, min_output=min_output)
    return child


_STOPPED: tuple[SpawnOutcome, ...] = ("cancelled", "parked")
"""Outcomes of a child that stopped with its parent and is resumed with it."""


def journal_spent(events: Iterable[JournalEvent]) -> Spend:
    """The steps and tokens a run's journal shows it spent, its children's subtrees included.

    A child whose last record says it was `cancelled` (its parent stopped) or `parked` is
    left out: it is resumed with its parent, and its share is then rebuilt from its own
    journal.
    """
    kept = [e for e in events if not (isinstance(e, SpawnFinished) and e.outcome in _STOPPED)]
    spent = Budget().spent_in(kept)
    return Spend(steps=spent.steps, tokens=spent.tokens)


def finished_children(
    events: Iterable[JournalEvent], *, run_id: str, agent: str
) -> tuple[set[str], dict[str, Spend]]:
    """The children a run started (by run id), and what each one that ended spent.

    What the run's children pool counts again when the run resumes: a child that ended
    (not `cancelled` because the run stopped, nor `parked`) spent its subtree's steps and tokens.
    """
    started: set[str] = set()
    ended: dict[str, Spend] = {}
    for event in events:
        if not isinstance(event, SpawnStarted | SpawnFinished):
            continue
        lineage = event.lineage
        if lineage.parent_run_id != run_id or lineage.agent != agent:
            continue
        started.add(lineage.run_id)
        if isinstance(event, SpawnFinished):
            if event.outcome in _STOPPED:
                ended.pop(lineage.run_id, None)
            else:
                steps = event.tree_steps if event.tree_steps is not None else event.steps
                ended[lineage.run_id] = Spend(steps=steps, tokens=event.usage.total_tokens)
    return started, ended
