"""Budgets: limits on tokens, dollars, calls, steps and wall time, with reservation.

A naive budget check (`if spent < limit: call()`) overshoots under parallel fan-out: every
concurrent call passes the check before any of them has spent anything. A `Budget` instead
*reserves* each model call's worst case before the call starts (its input estimate plus
`max_tokens` of output, priced) and settles the actual usage after, atomically, so
concurrent calls cannot cross a limit together. A request that sets no `max_tokens` is
sent with the output cap that was reserved for it, so the provider cannot generate past
what the budget holds (when the budget limits output, total tokens or dollars).

```python
budget = Budget(dollars=0.50, model_calls=20)   # priced from legato's price table
budget = Budget(dollars=0.50, prices=Prices(input=3.0, output=15.0))   # or your own prices
budget = Budget(tokens=200_000)                  # input and output tokens together
result = await agent.run("...", budget=budget)
budget.used.dollars, budget.remaining().dollars
child = budget.split(dollars=0.10)   # moves $0.10 to a sub-agent; child.close() returns the rest
```

Without `prices=` or `call_estimate=`, a dollar budget prices each call with the model's
own price table (`PricedModel.price`, which every provider module has); a model it does
not know stops the run with `PriceUnknown` before the call is sent.

A `Budget` may be shared by several runs (pass the same object) or moved in part to a
child run (`split`). `BudgetLimits` given to an agent make a fresh `Budget` per run.

A budget may also *draw from* another: `Budget(limits, parent=run_budget)` reserves every
call in both, so both limits hold (the tighter wins). Sub-agents run this way: a child run
(`legato.spawn`, `agent.as_tool`) draws from its parent run's budget (`nested_budget`), so
the whole tree of runs spends from one budget, reserved before each call. A spawned
child's step and token share is a `split` of its parent's budget that fits each call's
output to what is left (`BudgetLimits.min_output`).

This module owns the live `Budget` (what was used, what calls in flight hold, reserving
and settling atomically, drawing from a parent, moving a share to a child and back) and
is the one import path for the budget names. Its parts: `legato._budget_amounts` (the
values: `Spend`, `Prices`, `BudgetLimits`) and `legato._budget_calls` (pricing one model
call and reading what a journal spent). A budget decides whether a call fits; it never
makes a call (the run's loop and the effect gate do, after reserving here).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, replace

from typing_extensions import Unpack

from legato._budget_amounts import (
    ALL,
    OUTPUT_BOUND,
    RESOURCES,
    ZERO,
    BudgetLimits,
    LimitOptions,
    Prices,
    Resource,
    Spend,
    limit_of,
    only,
    priced_like,
)
from legato._budget_calls import call_actual, call_worst_case, estimate_tokens, journal_spend
from legato._effects_parts import current_switches
from legato.exceptions import BudgetExceeded, ConfigurationError
from legato.messages import Usage
from legato.models import (
    Model,
    ModelProfile,
    ModelRequest,
    ModelStreamEvent,
    ResponseCompleted,
    price_of,
)

__all__ = [
    "Budget",
    "BudgetLimits",
    "Prices",
    "Reservation",
    "Spend",
    "estimate_tokens",
    "nested_budget",
]


@dataclass(slots=True, kw_only=True)
class Reservation:
    """Amounts held for one call in flight; settle it with the actual usage (or release it)."""

    budget: Budget
    amounts: Spend
    upstream: tuple[Reservation, ...] = ()
    """The parts held in the budgets this one draws from (a parent it shares resources with)."""
    open: bool = True

    def settle(self, actual: Spend) -> None:
        """Replace the held amounts by what the call actually used."""
        self.budget.settle(self, actual)

    def release(self) -> None:
        """Give the held amounts back (the call did not happen)."""
        self.budget.settle(self, Spend())


class Budget:
    """A live budget: what was used, what calls in flight hold, and the limits.

    Every operation is atomic (a lock, no awaits), so concurrent runs and threads can share
    one budget. `reserve` raises `BudgetExceeded` before anything is spent.
    """

    def __init__(
        self,
        limits: BudgetLimits | None = None,
        *,
        parent: Budget | None = None,
        **kw: Unpack[LimitOptions],
    ) -> None:
        """A budget with `limits`, or with the limits given as keywords (`dollars=1.0, ...`).

        With `parent`, the budget draws from the parent: every reservation is made in the
        parent too (it fails if either lacks room) and is settled in both, so both limits
        hold. Prices (and the per-call estimate) it does not set are the parent's; of the
        two `output_reserve`s and `input_margin`s, the larger is used.
        """
        if limits is not None and kw:
            msg = "pass BudgetLimits or keyword limits, not both"
            raise ConfigurationError(msg)
        own = limits if limits is not None else BudgetLimits(**kw)
        self.limits = own if parent is None else priced_like(own, parent.limits)
        self._lock = threading.Lock()
        self._used = Spend()
        self._reserved = Spend()
        self._open = 0
        self._parent = parent
        self._parent_hold: Reservation | None = None
        """What a `split` moved here, held in the parent until `close`."""
        self._links: tuple[tuple[Budget, frozenset[Resource]], ...] = (
            () if parent is None else ((parent, ALL),)
        )
        """The budgets this one draws from, and the resources it draws from each."""
        self._started: float | None = None
        self._closed = False

    # -- reading ---------------------------------------------------------------------------------

    @property
    def used(self) -> Spend:
        """What was spent so far."""
        return self._used

    @property
    def reserved(self) -> Spend:
        """What calls in flight hold right now."""
        return self._reserved

    def remaining(self) -> Spend:
        """What can still be reserved (infinite for unlimited resources).

        For a budget that draws from others, what they have left counts too.
        """
        with self._lock:
            left = {
                r: limit_of(self.limits, r) - getattr(self._used, r) - getattr(self._reserved, r)
                for r in RESOURCES
            }
            for source, resources in self._links:
                theirs = source.remaining()
                for r in resources:
                    left[r] = min(left[r], getattr(theirs, r))
        return Spend(**left)

    def elapsed(self) -> float:
        """Seconds since the budget's first use."""
        return 0.0 if self._started is None else time.monotonic() - self._started

    def draws_from(self, other: Budget) -> bool:
        """Whether this budget is `other`, or spends from it (directly or further up)."""
        return self is other or any(source.draws_from(other) for source, _ in self._links)

    # -- reserving and settling ---------------------------------------------------------------------

    def reserve(self, amounts: Spend) -> Reservation:
        """Hold `amounts`, or raise `BudgetExceeded` (holding nothing) if a limit would be crossed.

        A budget that draws from others holds the amounts in them too, in the same step:
        if any of them lacks room, nothing is held anywhere.
        """
        with self._lock:
            if self._closed:
                msg = "this budget was closed (its remainder went back to its parent)"
                raise ConfigurationError(msg)
            now = time.monotonic()
            if self._started is None:
                self._started = now
            wall = self.limits.wall_time
            if wall is not None and now - self._started > wall:
                resource = "wall_time"
                raise BudgetExceeded(
                    resource, limit=wall, used=now - self._started, reserved=0, requested=0
                )
            for resource in RESOURCES:
                want = getattr(amounts, resource)
                if not want:
                    continue
                limit = limit_of(self.limits, resource)
                used = getattr(self._used, resource)
                held = getattr(self._reserved, resource)
                if used + held + want > limit + 1e-12 and (
                    current_switches().reserve_worst_case or used >= limit
                ):
                    raise BudgetExceeded(
                        resource, limit=limit, used=used, reserved=held, requested=want
                    )
            holds: list[Reservation] = []
            try:
                for source, resources in self._links:
                    part = only(amounts, resources)
                    if part != ZERO:
                        holds.append(source.reserve(part))
            except BaseException:
                for hold in holds:
                    hold.release()
                raise
            self._reserved = self._reserved + amounts
            self._open += 1
        return Reservation(budget=self, amounts=amounts, upstream=tuple(holds))

    def settle(self, reservation: Reservation, actual: Spend) -> None:
        """Turn a reservation into actual use (anything unused is freed)."""
        with self._lock:
            if not reservation.open:
                return
            reservation.open = False
            self._open -= 1
            # with nothing in flight, hold exactly nothing (no floating-point residue)
            self._reserved = self._reserved - reservation.amounts if self._open else Spend()
            self._used = self._used + actual
            last = self._closed and not self._open
        for hold in reservation.upstream:
            hold.settle(only(actual, self._resources_in(hold.budget)))
        if last:  # closed while this was held: what it moved here goes back now
            self._return_to_parent()

    def charge(self, amounts: Spend) -> None:
        """Reserve and settle at once (for counted things: tool calls, steps)."""
        self.settle(self.reserve(amounts), amounts)

    def count_spent(self, amounts: Spend) -> None:
        """Count what was spent before this budget existed (a resumed run's journal).

        Nothing is reserved or checked, since it already happened; what it used is simply no
        longer there to spend. Budgets this one draws from are not touched.
        """
        with self._lock:
            self._used = self._used + amounts

    def spent_in(self, events: Iterable[object]) -> Spend:
        """What a run's journal shows it spent, priced as this budget prices calls.

        Counted: each model response (tokens, dollars, one call, one step); each tool call
        the effect gate admitted or refused by its rules (`held` and `cancelled` refusals
        were not spent: a parked call is counted when it is admitted later); and the
        subtree usage each sub-agent reported last (its tokens, model calls and steps;
        dollars when priced). A sub-agent's tool calls are not in its parent's journal.
        """
        return journal_spend(self.limits, events)

    def joint(self, other: Budget) -> Budget:
        """A budget with no limits of its own that draws from this one and from `other`."""
        joint = Budget(BudgetLimits(), parent=self)
        joint.limits = priced_like(joint.limits, other.limits)
        joint._links = (*joint._links, (other, ALL))
        return joint

    def _resources_in(self, source: Budget) -> frozenset[Resource]:
        """The resources this budget draws from `source`."""
        for linked, resources in self._links:
            if linked is source:
                return resources
        return frozenset()

    # -- model calls ----------------------------------------------------------------------------------

    def reserve_model_call(
        self, request: ModelRequest, model: Model | None = None
    ) -> tuple[ModelRequest, Reservation]:
        """Reserve one model call's worst case; return the request to send, and the hold.

        The output reserved is the request's `max_tokens`, else the model profile's
        `max_output_tokens`, else `output_reserve` (plus the request's `thinking_budget`:
        reasoning tokens are output tokens). When the request sets no `max_tokens`
        and this budget (or one it draws from) limits output, total tokens or dollars,
        the returned request carries the reserved cap, so the provider cannot generate
        more than was reserved.

        Raises:
            BudgetExceeded: the worst case does not fit (nothing is held).
            PriceUnknown: dollars are limited and the call cannot be priced.
        """
        settings = request.settings
        profile_cap = model.profile.max_output_tokens if model is not None else None
        # reasoning counts as output (and a provider may need room beyond the thinking budget)
        reserve = self.limits.output_reserve + (settings.thinking_budget or 0)
        cap = settings.max_tokens or profile_cap or reserve
        estimate = estimate_tokens(request)
        fitted = self._fitted_cap(estimate, cap)
        worst = self.model_call_worst_case(input_tokens=estimate, max_tokens=fitted, model=model)
        reservation = self.reserve(worst)
        if fitted != settings.max_tokens and (
            fitted < cap
            or (
                settings.max_tokens is None
                and self._limits_any(OUTPUT_BOUND)
                and current_switches().cap_output
            )
        ):
            request = replace(request, settings=replace(settings, max_tokens=fitted))
        return request, reservation

    def _fitted_cap(self, input_tokens: int, cap: int) -> int:
        """`cap`, lowered to the output that fits in what is left (see `min_output`).

        Unchanged when no budget in the chain fits calls, or when the floor does not fit
        either (then reserving the call raises `BudgetExceeded`).
        """
        floor = self._min_output()
        if floor is None or not current_switches().reserve_worst_case:
            return cap
        left = self.remaining()
        room = min(
            left.tokens - math.ceil(input_tokens * self.limits.input_margin), left.output_tokens
        )
        if room >= cap or room < min(floor, cap):
            return cap
        return int(room)

    def _min_output(self) -> int | None:
        """The `min_output` of this budget, else of the first budget it draws from that sets one."""
        if self.limits.min_output is not None:
            return self.limits.min_output
        for source, _ in self._links:
            found = source._min_output()
            if found is not None:
                return found
        return None

    def model_call_worst_case(
        self, *, input_tokens: int, max_tokens: int | None, model: Model | None = None
    ) -> Spend:
        """What one model call may use at most: its input, `max_tokens` of output, priced.

        Priced by `prices`, else `call_estimate`, else `model`'s own price table.

        Raises:
            PriceUnknown: no price is known and this budget (or one it draws from) limits
                dollars.
        """
        return call_worst_case(
            self.limits,
            input_tokens=input_tokens,
            max_tokens=max_tokens,
            model=model,
            dollars_limited=self._limits_any(("dollars",)),
        )

    def model_call_actual(self, usage: Usage, cost: float | None) -> Spend:
        """What a finished model call used (cost from the provider, else from prices)."""
        return call_actual(self.limits, usage, cost)

    def metered(self, model: Model) -> Model:
        """`model` with every call reserved in this budget first (and capped like the run's).

        For model calls a run makes outside its loop, such as a compaction summary:
        they spend from the same budget, and one that does not fit is never sent.
        """
        if not current_switches().meter_side_calls:  # test twin: the call is not counted
            return model
        return _Metered(model, self)

    def _limits_any(self, resources: tuple[Resource, ...]) -> bool:
        """Whether this budget, or one it draws them from, limits any of `resources`."""
        if any(getattr(self.limits, r) is not None for r in resources):
            return True
        return any(
            source._limits_any(tuple(r for r in resources if r in drawn))
            for source, drawn in self._links
        )

    # -- children --------------------------------------------------------------------------------------

    def split(self, **amounts: float) -> Budget:
        """Move `amounts` (e.g. `dollars=0.1, model_calls=5`) into a new child budget.

        The parent holds them as reserved until the child is closed; `close()` returns what
        the child did not use. Resources not named are shared: the child's reservations of
        them are made in the parent too. Raises `BudgetExceeded` if the parent lacks them.
        """
        unknown = set(amounts) - set(RESOURCES) - {"wall_time"}
        if unknown:
            msg = f"unknown budget resources: {sorted(unknown)}"
            raise ConfigurationError(msg)
        wall = amounts.pop("wall_time", None)
        moved = Spend(**amounts)
        hold = self.reserve(moved)
        child_limits = replace(
            self.limits,
            wall_time=wall if wall is not None else self.limits.wall_time,
            **{r: (getattr(moved, r) if r in amounts else None) for r in RESOURCES},
        )
        child = Budget(child_limits, parent=self)
        child._parent_hold = hold
        child._links = ((self, frozenset(r for r in RESOURCES if r not in amounts)),)
        return child

    def close(self) -> Spend:
        """Return a child's unused amounts to its parent; returns what the child used.

        What its reservations still hold (calls in flight, shares split from it) is settled
        with the parent when the last of them is: the parent is charged exactly what the
        child spent, and gets back the rest.
        """
        with self._lock:
            self._closed = True
            used = self._used
            idle = self._open == 0
        if idle:
            self._return_to_parent()
        return used

    def _return_to_parent(self) -> None:
        """Settle what a `split` moved here with the parent: what was used is spent there."""
        hold = self._parent_hold
        if self._parent is not None and hold is not None and hold.open:
            moved = ALL - self._resources_in(self._parent)
            self._parent.settle(hold, only(self._used, moved))


class _Metered:
    """A model whose calls reserve in a budget before they are sent (see `Budget.metered`)."""

    def __init__(self, model: Model, budget: Budget) -> None:
        self.model = model
        self.budget = budget

    @property
    def name(self) -> str:
        """The wrapped model's name."""
        return self.model.name

    @property
    def profile(self) -> ModelProfile:
        """The wrapped model's profile."""
        return self.model.profile

    def price(self, usage: Usage) -> float | None:
        """The wrapped model's price."""
        return price_of(self.model, usage)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Reserve, stream, settle with the reported usage (a failed call gives it back)."""
        request, reservation = self.budget.reserve_model_call(request, self.model)
        try:
            async for event in self.model.stream(request):
                if isinstance(event, ResponseCompleted):
                    response = event.response
                    reservation.settle(self.budget.model_call_actual(response.usage, response.cost))
                yield event
        finally:
            reservation.release()  # no-op once settled


def nested_budget(own: Budget | BudgetLimits | None, parent: Budget | None) -> Budget | None:
    """The budget of a run started by another run (a sub-agent), drawing from the parent's.

    - no parent budget: the run's own (a fresh `Budget` for `BudgetLimits`), or None;
    - no budget of its own: the parent's, which the child then spends from directly;
    - both: a budget with the child's own limits that draws from the parent's (every
      reservation is made in both), so both limits hold and the tighter wins. A `Budget`
      object of its own (one shared by several runs) is not changed: the child gets a
      budget drawing from it and from the parent's. One that already draws from the
      parent's (a `split` of it) is used as it is.
    """
    if parent is None:
        return Budget(own) if isinstance(own, BudgetLimits) else own
    if own is None:
        return parent
    if isinstance(own, BudgetLimits):
        return Budget(own, parent=parent)
    if own.draws_from(parent):
        return own
    if parent.draws_from(own):
        return parent
    return own.joint(parent)
