"""What a budget counts and limits: amounts (`Spend`), prices and limits, as values.

`Spend` is an amount of each resource (used, reserved, remaining or requested), with
arithmetic; `Prices` turn tokens into dollars; `BudgetLimits` are a run's limits (None:
unlimited) and how calls are reserved against them. The helpers here are pure functions
of these values.

This module owns no live state, takes no lock and calls no model: reserving, settling and
drawing from a parent is `legato.budgets.Budget`; pricing one model call is
`legato._budget_calls`. Policy layer: imports only the foundation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Literal, TypeAlias, TypedDict

from legato.exceptions import ConfigurationError

__all__ = [
    "ALL",
    "OUTPUT_BOUND",
    "RESOURCES",
    "ZERO",
    "BudgetLimits",
    "LimitOptions",
    "Prices",
    "Resource",
    "Spend",
    "call_spend",
    "limit_of",
    "only",
    "priced_like",
]

Resource: TypeAlias = Literal[
    "input_tokens", "output_tokens", "tokens", "dollars", "model_calls", "tool_calls", "steps"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Spend:
    """Amounts of each resource (used, reserved, remaining or requested)."""

    input_tokens: float = 0
    output_tokens: float = 0
    tokens: float = 0
    """Input and output tokens together (what `BudgetLimits.tokens` limits)."""
    dollars: float = 0.0
    model_calls: float = 0
    tool_calls: float = 0
    steps: float = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            tokens=self.tokens + other.tokens,
            dollars=self.dollars + other.dollars,
            model_calls=self.model_calls + other.model_calls,
            tool_calls=self.tool_calls + other.tool_calls,
            steps=self.steps + other.steps,
        )

    def __neg__(self) -> Spend:
        return Spend(
            input_tokens=-self.input_tokens,
            output_tokens=-self.output_tokens,
            tokens=-self.tokens,
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
    tokens: int | None = None
    """Input and output tokens together."""
    dollars: float | None = None
    """US dollars; priced by `prices`, else `call_estimate`, else the model's price table."""
    model_calls: int | None = None
    tool_calls: int | None = None
    steps: int | None = None
    wall_time: float | None = None
    """Seconds from the budget's first use."""
    prices: Prices | None = None
    """Prices used to reserve (and, when the provider reports no cost, charge) dollars;
    None: the model's own price table (`PriceUnknown` when it has none)."""
    call_estimate: float | None = None
    """Dollars to reserve per model call when no prices are known."""
    output_reserve: int = 4096
    """Output tokens to reserve for a call that sets no `max_tokens` (and whose model's
    profile names no `max_output_tokens`); the request is then sent with this cap."""
    input_margin: float = 1.25
    """Factor on the estimated input tokens when reserving (token counts are estimates)."""
    min_output: int | None = None
    """Fit calls to what is left: a call whose output cap does not fit in the tokens (or
    output tokens) left is sent with its cap lowered to what fits, if at least this many
    tokens of output fit (fewer if the call asks for fewer); None: such a call is refused.
    A sub-agent's share (`legato.spawn`) is a budget of this kind."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
                msg = f"budget {f.name} must not be negative"
                raise ConfigurationError(msg)


class LimitOptions(TypedDict, total=False):
    """The keyword form of `BudgetLimits` (see its fields)."""

    input_tokens: int | None
    output_tokens: int | None
    tokens: int | None
    dollars: float | None
    model_calls: int | None
    tool_calls: int | None
    steps: int | None
    wall_time: float | None
    prices: Prices | None
    call_estimate: float | None
    output_reserve: int
    input_margin: float
    min_output: int | None


def limit_of(limits: BudgetLimits, resource: Resource) -> float:
    """The limit on `resource` (infinite when it is not limited)."""
    value = getattr(limits, resource)
    return math.inf if value is None else float(value)


def call_spend(
    input_tokens: float, output_tokens: float, dollars: float, *, calls: float = 1, steps: float = 1
) -> Spend:
    """What model calls spend: their tokens (input, output and both), dollars, calls, steps."""
    return Spend(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tokens=input_tokens + output_tokens,
        dollars=dollars,
        model_calls=calls,
        steps=steps,
    )


ZERO = Spend()
RESOURCES: tuple[Resource, ...] = (
    "input_tokens",
    "output_tokens",
    "tokens",
    "dollars",
    "model_calls",
    "tool_calls",
    "steps",
)
ALL: frozenset[Resource] = frozenset(RESOURCES)
OUTPUT_BOUND: tuple[Resource, ...] = ("output_tokens", "tokens", "dollars")
"""Limits that an uncapped output could overshoot."""


def priced_like(limits: BudgetLimits, parent: BudgetLimits) -> BudgetLimits:
    """`limits` with the parent's prices where it has none, and the larger reserves.

    A budget that draws from another reserves one worst case in both, so it must price
    calls (the parent's dollars) and reserve output at least as the parent would.
    """
    return replace(
        limits,
        prices=limits.prices if limits.prices is not None else parent.prices,
        call_estimate=(
            limits.call_estimate if limits.call_estimate is not None else parent.call_estimate
        ),
        output_reserve=max(limits.output_reserve, parent.output_reserve),
        input_margin=max(limits.input_margin, parent.input_margin),
    )


def only(amounts: Spend, resources: frozenset[Resource]) -> Spend:
    """`amounts` of `resources` alone (the others zero)."""
    return Spend(**{r: getattr(amounts, r) for r in resources})
