"""Budgets and limits a child inherits: narrowed, never widened.

A parent hands each child a *share* of what it has left. `BudgetAccount` is the hook the
effect gate's budget plugs into (it can split itself and move a share to a child);
`StepTokenBudget` is the in-memory account used until then. A child's share holds before
anything is spent: `ShareGuard` checks each of the child's model calls against what the
share has left (the same worst case the run-level `Budget` reserves), and the child's
runner charges what each call really used. `ShareLedger` keeps which shares a run moved to
which child, and rebuilds that from the run's journal when the run resumes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from legato._effects_parts import current_switches
from legato.budgets import BudgetLimits, estimate_tokens
from legato.events import JournalEvent, ModelResponded, SpawnFinished, SpawnStarted
from legato.exceptions import BudgetExceeded, ConfigurationError, SpawnRefused
from legato.models import ModelRequest, ModelSettings
from legato.security._hooks import ALLOW, Hook, HookContext, Modify, RequestOutcome

__all__ = [
    "BudgetAccount",
    "BudgetShare",
    "ChildLimits",
    "ShareGuard",
    "ShareLedger",
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
        """Settle with the account this one was split from.

        It gets back what is unspent (and is charged what was spent beyond the share, if
        anything was).
        """
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
        """Return the unspent part of the share to the parent account (once).

        What was spent beyond the share (a call whose input was larger than its estimate)
        is charged to the parent: the parent ends up charged exactly what the child spent.
        """
        if self._closed or self._parent is None:
            return
        self._closed = True
        steps = 0 if self._share.steps is None else self._share.steps - self._spent_steps
        tokens = 0 if self._share.tokens is None else self._share.tokens - self._spent_tokens
        self._parent._refund(steps, tokens)

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
    min_output_tokens: int = 128
    """A child with a token share makes a model call only if the share leaves at least this
    many tokens of output after the call's estimated input (fewer if the call asks for
    fewer); each call's `max_tokens` is capped to what the share leaves."""

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


class ShareGuard(Hook):
    """Holds a child run to its budget share *before* each of its model calls.

    Added as the last hook of every spawned child. Before a call: a step must be left,
    and the call's estimated input (`legato.budgets.estimate_tokens` times the run-level
    budget's `input_margin`, as a `Budget` reserves it) plus at least `min_output` tokens
    of output must fit in what the share has left; otherwise `BudgetExceeded` stops the
    child before anything is spent. When the call may produce more output than the share
    leaves after its input, its `max_tokens` is capped to that (a `HookApplied` event
    records the cap). The child's runner charges each call's actual usage afterwards.
    What the share has left already excludes the shares the child moved to its own
    children, so a subtree cannot spend more than its share either.
    """

    __slots__ = ("_account", "_input_margin", "_max_output", "_min_output", "_share")

    def __init__(
        self,
        account: BudgetAccount,
        *,
        share: BudgetShare,
        max_output: int | None = None,
        min_output: int = 128,
        input_margin: float | None = None,
    ) -> None:
        self._account = account
        self._share = share
        self._max_output = max_output
        self._min_output = min_output
        self._input_margin = (
            input_margin if input_margin is not None else BudgetLimits().input_margin
        )

    @property
    def name(self) -> str:
        """The hook's name in the journal."""
        return "budget-share"

    async def before_model_request(self, request: ModelRequest, ctx: HookContext) -> RequestOutcome:
        """Refuse the call, or cap its output, so the share is not crossed."""
        if not current_switches().share_guard:
            return ALLOW
        share, left = self._share, self._account.remaining()
        if left.steps is not None and left.steps < 1:
            limit, resource = (share.steps if share.steps is not None else 0), "steps"
            raise BudgetExceeded(
                resource, limit=limit, used=limit - left.steps, reserved=0, requested=1
            )
        if left.tokens is None:
            return ALLOW
        estimate = math.ceil(estimate_tokens(request) * self._input_margin)
        wanted = request.settings.max_tokens or self._max_output
        floor = self._min_output if wanted is None else min(self._min_output, wanted)
        room = left.tokens - estimate
        if room < floor:
            limit = share.tokens if share.tokens is not None else left.tokens
            resource = "tokens"
            raise BudgetExceeded(
                resource,
                limit=limit,
                used=limit - left.tokens,
                reserved=0,
                requested=estimate + floor,
            )
        if wanted is not None and wanted <= room:
            return ALLOW
        capped = replace(request, settings=replace(request.settings, max_tokens=room))
        return Modify(
            capped,
            reason=f"max_tokens {wanted if wanted is not None else 'unset'} capped to {room}: "
            f"what the token share has left ({left.tokens}) after about {estimate} input tokens",
        )


class ShareLedger:
    """A run's budget account, and the shares it moved to its children (by child run id).

    A share is *held* while its child runs, and *settled* when the child ends: the child's
    account is closed, so the run gets back exactly what the child left unspent. `replay`
    rebuilds the ledger from the run's journal when the run resumes: each `SpawnStarted`
    of this run's children moves the share again, each `SpawnFinished` settles it with
    what the child spent (its subtree's tokens and steps). A child that was `cancelled`
    because the run stopped keeps its share held: resuming the run resumes the child.
    """

    __slots__ = ("_agent", "_held", "_settled", "account", "run_id")

    def __init__(self, account: BudgetAccount, *, run_id: str, child_agent: str) -> None:
        self.account = account
        self.run_id = run_id
        self._agent = child_agent
        self._held: dict[str, BudgetAccount] = {}
        self._settled: set[str] = set()

    @property
    def children(self) -> set[str]:
        """The run ids of every child that took a share (running or ended)."""
        return set(self._held) | self._settled

    def settled(self, child_id: str) -> bool:
        """Whether the child's share was settled (the child ended)."""
        return child_id in self._settled

    def take(self, child_id: str, share: BudgetShare) -> BudgetAccount:
        """The child's account: the share held for it, or a new split (`SpawnRefused`)."""
        held = self._held.get(child_id)
        if held is not None:
            return held
        account = self.account.split(share)
        self._held[child_id] = account
        self._settled.discard(child_id)
        return account

    def settle(self, child_id: str, *, spent: BudgetShare | None = None) -> bool:
        """The child ended: charge `spent` (when not charged as it ran), close its account.

        False if no share was held for the child (nothing to settle).
        """
        account = self._held.pop(child_id, None)
        if account is None:
            return False
        if spent is not None:
            account.charge(steps=spent.steps or 0, tokens=spent.tokens or 0)
        account.close()
        self._settled.add(child_id)
        return True

    def replay(self, events: Iterable[JournalEvent], *, own: bool = False) -> None:
        """Apply the run's journaled spending to a fresh account.

        `own`: also charge the run's own model calls (for a child, whose account is its
        share; a root run's account is only what its children may use together).
        """
        step = 0
        for event in events:
            if isinstance(event, ModelResponded):
                if own:
                    self.account.charge(
                        steps=max(0, event.step - step), tokens=event.response.usage.total_tokens
                    )
                step = max(step, event.step)
            elif isinstance(event, SpawnStarted) and self._mine(event):
                child = event.lineage.run_id
                if child in self._held or (child in self._settled and event.resumed):
                    continue  # a share already held, or a finished child read back
                share = BudgetShare(steps=event.max_steps, tokens=event.max_tokens)
                try:
                    self.take(child, share)
                except Exception:  # the account is smaller than the one that granted the share
                    continue  # the child, if resumed, runs on a share of its own
            elif (
                isinstance(event, SpawnFinished)
                and self._mine(event)
                and event.outcome != "cancelled"
            ):
                steps = event.tree_steps if event.tree_steps is not None else event.steps
                self.settle(
                    event.lineage.run_id,
                    spent=BudgetShare(steps=steps, tokens=event.usage.total_tokens),
                )

    def _mine(self, event: SpawnStarted | SpawnFinished) -> bool:
        lineage = event.lineage
        return lineage.parent_run_id == self.run_id and lineage.agent == self._agent
