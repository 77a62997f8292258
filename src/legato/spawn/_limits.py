"""Budgets and limits a child inherits: narrowed, never widened.

A parent hands each child a *share* of what it has left. `BudgetAccount` is the hook the
effect gate's budget plugs into (it can split itself and move a share to a child);
`StepTokenBudget` is the in-memory account used until then, enforced through the child's
`max_steps` and the token usage its model calls report.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from legato.exceptions import ConfigurationError, SpawnRefused
from legato.models import ModelSettings

__all__ = [
    "BudgetAccount",
    "BudgetShare",
    "ChildLimits",
    "SpawnLimits",
    "StepTokenBudget",
    "narrow_limits",
    "narrow_settings",
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

    def exceeds(self, other: BudgetShare) -> list[str]:
        """What in this share is larger than `other` allows, one line per dimension."""
        problems: list[str] = []
        if other.steps is not None and (self.steps is None or self.steps > other.steps):
            problems.append(
                f"steps {self.steps if self.steps is not None else 'unlimited'} > {other.steps} remaining"
            )
        if other.tokens is not None and (self.tokens is None or self.tokens > other.tokens):
            problems.append(
                f"tokens {self.tokens if self.tokens is not None else 'unlimited'} > {other.tokens} remaining"
            )
        return problems


@runtime_checkable
class BudgetAccount(Protocol):
    """What a run may still spend, and the moving of shares to children.

    The effect gate's budget implements this to take over; until then `StepTokenBudget`
    does. A share moved to a child is no longer the parent's; what the child leaves
    unspent returns to the parent when the child's account is closed.
    """

    def remaining(self) -> BudgetShare:
        """What is left to spend or to hand out."""
        ...

    def split(self, share: BudgetShare) -> BudgetAccount:
        """Move `share` into a new child account; raise `SpawnRefused` if it does not fit."""
        ...

    def charge(self, *, steps: int = 0, tokens: int = 0) -> None:
        """Record work done against this account."""
        ...

    def close(self) -> None:
        """Give what is unspent back to the account this one was split from."""
        ...


class StepTokenBudget:
    """An in-memory `BudgetAccount` over steps and tokens."""

    __slots__ = ("_closed", "_parent", "_share", "_spent_steps", "_spent_tokens")

    def __init__(self, share: BudgetShare, *, parent: StepTokenBudget | None = None) -> None:
        self._share = share
        self._parent = parent
        self._spent_steps = 0
        self._spent_tokens = 0
        self._closed = False

    def remaining(self) -> BudgetShare:
        """What is left."""
        steps = None if self._share.steps is None else max(0, self._share.steps - self._spent_steps)
        tokens = (
            None if self._share.tokens is None else max(0, self._share.tokens - self._spent_tokens)
        )
        return BudgetShare(steps=steps, tokens=tokens)

    def split(self, share: BudgetShare) -> StepTokenBudget:
        """Move a share to a child account."""
        problems = share.exceeds(self.remaining())
        if problems:
            msg = "the budget share is larger than what remains: " + "; ".join(problems)
            raise SpawnRefused(msg)
        self.charge(steps=share.steps or 0, tokens=share.tokens or 0)
        return StepTokenBudget(share, parent=self)

    def charge(self, *, steps: int = 0, tokens: int = 0) -> None:
        """Count work against the account."""
        self._spent_steps += steps
        self._spent_tokens += tokens

    def close(self) -> None:
        """Return the unspent part of the share to the parent account (once)."""
        if self._closed or self._parent is None:
            return
        self._closed = True
        left = self.remaining()
        self._parent._refund(left.steps or 0, left.tokens or 0)

    def _refund(self, steps: int, tokens: int) -> None:
        """Take back what a child left unspent; a closed account passes it further up."""
        if self._closed and self._parent is not None:
            self._parent._refund(steps, tokens)
        else:
            self.charge(steps=-steps, tokens=-tokens)


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
    """What all children of one run may use together (each spawn takes a share)."""
    slice_tokens: int = 2000
    """Token budget of the context slice each child receives."""

    def __post_init__(self) -> None:
        if self.max_depth < 1:
            msg = "max_depth must be at least 1"
            raise ConfigurationError(msg)
        if self.max_children < 0:
            msg = "max_children cannot be negative"
            raise ConfigurationError(msg)
