"""Budgets: limits on tokens, dollars, calls, steps and wall time, with reservation.

A naive budget check (`if spent < limit: call()`) overshoots under parallel fan-out: every
concurrent call passes the check before any of them has spent anything. A `Budget` instead
*reserves* each model call's worst case before the call starts (its input estimate plus
`max_tokens` of output, priced) and settles the actual usage after, atomically, so
concurrent calls cannot cross a limit together.

```python
budget = Budget(dollars=0.50, model_calls=20, prices=Prices(input=3.0, output=15.0))
result = await agent.run("...", budget=budget)
budget.used.dollars, budget.remaining().dollars
child = budget.split(dollars=0.10)   # moves $0.10 to a sub-agent; child.close() returns the rest
```

A `Budget` may be shared by several runs (pass the same object) or moved in part to a
child run (`split`). `BudgetLimits` given to an agent make a fresh `Budget` per run.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, fields, replace
from typing import Literal, TypeAlias, TypedDict

from typing_extensions import Unpack

from legato.exceptions import BudgetExceeded, ConfigurationError
from legato.messages import Usage
from legato.models import ModelRequest

__all__ = ["Budget", "BudgetLimits", "Prices", "Reservation", "Spend", "estimate_tokens"]

Resource: TypeAlias = Literal[
    "input_tokens", "output_tokens", "dollars", "model_calls", "tool_calls", "steps"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Spend:
    """Amounts of each resource (used, reserved, remaining or requested)."""

    input_tokens: float = 0
    output_tokens: float = 0
    dollars: float = 0.0
    model_calls: float = 0
    tool_calls: float = 0
    steps: float = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            dollars=self.dollars + other.dollars,
            model_calls=self.model_calls + other.model_calls,
            tool_calls=self.tool_calls + other.tool_calls,
            steps=self.steps + other.steps,
        )

    def __neg__(self) -> Spend:
        return Spend(
            input_tokens=-self.input_tokens,
            output_tokens=-self.output_tokens,
            dollars=-self.dollars,
            model_calls=-self.model_calls,
            tool_calls=-self.tool_calls,
            steps=-self.steps,
        )

    def __sub__(self, other: Spend) -> Spend:
        return self + -other


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """US dollars per million tokens."""

    input: float
    output: float

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        """Dollars for that many tokens."""
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetLimits:
    """Per-run limits; None means unlimited. An agent given these makes a `Budget` per run."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    dollars: float | None = None
    model_calls: int | None = None
    tool_calls: int | None = None
    steps: int | None = None
    wall_time: float | None = None
    """Seconds from the budget's first use."""
    prices: Prices | None = None
    """Prices used to reserve (and, when the provider reports no cost, charge) dollars."""
    call_estimate: float | None = None
    """Dollars to reserve per model call when no prices are known."""
    output_reserve: int = 4096
    """Output tokens to reserve for a call that sets no `max_tokens`."""
    input_margin: float = 1.25
    """Factor on the estimated input tokens when reserving (token counts are estimates)."""

    def __post_init__(self) -> None:
        if self.dollars is not None and self.prices is None and self.call_estimate is None:
            msg = "a dollar budget needs prices= or call_estimate= to reserve a call's worst case"
            raise ConfigurationError(msg)
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
                msg = f"budget {f.name} must not be negative"
                raise ConfigurationError(msg)


class LimitOptions(TypedDict, total=False):
    """The keyword form of `BudgetLimits` (see its fields)."""

    input_tokens: int | None
    output_tokens: int | None
    dollars: float | None
    model_calls: int | None
    tool_calls: int | None
    steps: int | None
    wall_time: float | None
    prices: Prices | None
    call_estimate: float | None
    output_reserve: int
    input_margin: float


def _limit_of(limits: BudgetLimits, resource: Resource) -> float:
    value = getattr(limits, resource)
    return math.inf if value is None else float(value)


@dataclass(slots=True, kw_only=True)
class Reservation:
    """Amounts held for one call in flight; settle it with the actual usage (or release it)."""

    budget: Budget
    amounts: Spend
    shared: Reservation | None = None
    """The part held in the parent budget, for resources a child shares with it."""
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
        """A budget with `limits`, or with the limits given as keywords (`dollars=1.0, ...`)."""
        if limits is not None and kw:
            msg = "pass BudgetLimits or keyword limits, not both"
            raise ConfigurationError(msg)
        self.limits = limits if limits is not None else BudgetLimits(**kw)
        self._lock = threading.Lock()
        self._used = Spend()
        self._reserved = Spend()
        self._open = 0
        self._parent = parent
        self._parent_hold: Reservation | None = None
        self._shared: frozenset[Resource] = frozenset()
        """Resources this child draws from its parent directly (not moved to it)."""
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
        """What can still be reserved (infinite for unlimited resources)."""
        with self._lock:
            return Spend(
                **{
                    r: _limit_of(self.limits, r)
                    - getattr(self._used, r)
                    - getattr(self._reserved, r)
                    for r in _RESOURCES
                }
            )

    def elapsed(self) -> float:
        """Seconds since the budget's first use."""
        return 0.0 if self._started is None else time.monotonic() - self._started

    # -- reserving and settling ---------------------------------------------------------------------

    def reserve(self, amounts: Spend) -> Reservation:
        """Hold `amounts`, or raise `BudgetExceeded` (holding nothing) if a limit would be crossed."""
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
            for resource in _RESOURCES:
                want = getattr(amounts, resource)
                if not want:
                    continue
                limit = _limit_of(self.limits, resource)
                used = getattr(self._used, resource)
                held = getattr(self._reserved, resource)
                if used + held + want > limit + 1e-12:
                    raise BudgetExceeded(
                        resource, limit=limit, used=used, reserved=held, requested=want
                    )
            parent_hold = None
            if self._parent is not None and self._shared:
                shared = _only(amounts, self._shared)
                if shared != _ZERO:
                    parent_hold = self._parent.reserve(shared)
            self._reserved = self._reserved + amounts
            self._open += 1
        return Reservation(budget=self, amounts=amounts, shared=parent_hold)

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
        if reservation.shared is not None and self._parent is not None:
            self._parent.settle(reservation.shared, _only(actual, self._shared))

    def charge(self, amounts: Spend) -> None:
        """Reserve and settle at once (for counted things: tool calls, steps)."""
        self.settle(self.reserve(amounts), amounts)

    # -- model calls ----------------------------------------------------------------------------------

    def model_call_worst_case(self, *, input_tokens: int, max_tokens: int | None) -> Spend:
        """What one model call may use at most: its input, `max_tokens` of output, priced."""
        output = max_tokens if max_tokens is not None else self.limits.output_reserve
        input_tokens = math.ceil(input_tokens * self.limits.input_margin)
        prices = self.limits.prices
        if prices is not None:
            dollars = prices.cost(input_tokens, output)
        else:
            dollars = self.limits.call_estimate or 0.0
        return Spend(
            input_tokens=input_tokens,
            output_tokens=output,
            dollars=dollars,
            model_calls=1,
            steps=1,
        )

    def model_call_actual(self, usage: Usage, cost: float | None) -> Spend:
        """What a finished model call used (cost from the provider, else from prices)."""
        if cost is None:
            prices = self.limits.prices
            if prices is not None:
                cost = prices.cost(usage.input_tokens, usage.output_tokens)
            else:
                cost = self.limits.call_estimate or 0.0
        return Spend(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            dollars=cost,
            model_calls=1,
            steps=1,
        )

    # -- children --------------------------------------------------------------------------------------

    def split(self, **amounts: float) -> Budget:
        """Move `amounts` (e.g. `dollars=0.1, model_calls=5`) into a new child budget.

        The parent holds them as reserved until the child is closed; `close()` returns what
        the child did not use. Resources not named are shared: the child's reservations of
        them are made in the parent too. Raises `BudgetExceeded` if the parent lacks them.
        """
        unknown = set(amounts) - set(_RESOURCES) - {"wall_time"}
        if unknown:
            msg = f"unknown budget resources: {sorted(unknown)}"
            raise ConfigurationError(msg)
        wall = amounts.pop("wall_time", None)
        moved = Spend(**amounts)
        hold = self.reserve(moved)
        child_limits = replace(
            self.limits,
            wall_time=wall if wall is not None else self.limits.wall_time,
            **{r: (getattr(moved, r) if r in amounts else None) for r in _RESOURCES},
        )
        child = Budget(child_limits, parent=self)
        child._parent_hold = hold
        child._shared = frozenset(r for r in _RESOURCES if r not in amounts)
        return child

    def close(self) -> Spend:
        """Return a child's unused amounts to its parent; returns what the child used."""
        with self._lock:
            self._closed = True
            used = self._used
        hold = self._parent_hold
        if self._parent is not None and hold is not None:
            moved = frozenset(_RESOURCES) - self._shared
            self._parent.settle(hold, _only(used, moved))
        return used


_ZERO = Spend()
_RESOURCES: tuple[Resource, ...] = (
    "input_tokens",
    "output_tokens",
    "dollars",
    "model_calls",
    "tool_calls",
    "steps",
)


def estimate_tokens(request: ModelRequest) -> int:
    """A rough input-token count for reserving budget (about four characters a token)."""
    chars = len(request.instructions or "")
    for message in request.messages:
        for part in message.parts:
            chars += len(getattr(part, "text", "") or getattr(part, "raw_arguments", "") or "")
            content = getattr(part, "content", ())
            chars += sum(len(getattr(c, "text", "")) for c in content)
    for definition in request.tools:
        chars += len(definition.name) + len(definition.description)
        chars += len(json.dumps(definition.parameters, separators=(",", ":")))
    return max(1, chars // 4)


def _only(amounts: Spend, resources: frozenset[Resource]) -> Spend:
    return Spend(**{r: getattr(amounts, r) for r in resources})
