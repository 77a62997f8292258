"""What one model call may cost, and what finished calls did: tokens and dollars.

Pure functions of a budget's `BudgetLimits`: a call's worst case before it is sent (its
input estimate with a margin plus its output cap, priced by the limits' prices, else the
per-call estimate, else the model's own price table), what a finished call used (the
provider's cost, else priced), what a run's journal shows it spent, and the rough input
token estimate reservations start from.

This module must not hold or settle anything (`legato.budgets.Budget` does, atomically),
nor decide whether a call fits. Policy layer: imports only models and below.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from legato._budget_amounts import BudgetLimits, Spend, call_spend
from legato.exceptions import PriceUnknown
from legato.messages import Usage
from legato.models import Model, ModelRequest, price_of

__all__ = ["call_actual", "call_worst_case", "estimate_tokens", "journal_spend"]


def call_worst_case(
    limits: BudgetLimits,
    *,
    input_tokens: int,
    max_tokens: int | None,
    model: Model | None,
    dollars_limited: bool,
) -> Spend:
    """What one model call may use at most: its input, `max_tokens` of output, priced.

    Priced by `limits.prices`, else `limits.call_estimate`, else `model`'s own price
    table; `PriceUnknown` when none is known and `dollars_limited`.
    """
    output = max_tokens if max_tokens is not None else limits.output_reserve
    input_tokens = math.ceil(input_tokens * limits.input_margin)
    prices = limits.prices
    if prices is not None:
        dollars = prices.cost(input_tokens, output)
    elif limits.call_estimate is not None:
        dollars = limits.call_estimate
    else:
        priced = _model_price(model, input_tokens, output)
        if priced is None and dollars_limited:
            raise PriceUnknown(model.name if model is not None else "(no model given)")
        dollars = priced or 0.0
    return call_spend(input_tokens, output, dollars)


def call_actual(limits: BudgetLimits, usage: Usage, cost: float | None) -> Spend:
    """What a finished model call used (cost from the provider, else from prices)."""
    if cost is None:
        prices = limits.prices
        if prices is not None:
            cost = prices.cost(usage.input_tokens, usage.output_tokens)
        else:
            cost = limits.call_estimate or 0.0
    return call_spend(usage.input_tokens, usage.output_tokens, cost)


def journal_spend(limits: BudgetLimits, events: Iterable[object]) -> Spend:
    """What a run's journal shows it spent, priced as a budget with `limits` prices calls.

    See `legato.budgets.Budget.spent_in`.
    """
    from legato.events import ModelResponded, SpawnFinished, ToolCallAdmitted, ToolCallRefused

    total = Spend()
    children: dict[str, SpawnFinished] = {}  # a child resumed after a park ends twice
    for event in events:
        if isinstance(event, SpawnFinished):
            children[event.lineage.run_id] = event  # its last report covers all of it
        elif isinstance(event, ModelResponded):
            total = total + call_actual(limits, event.response.usage, event.response.cost)
        elif isinstance(event, ToolCallAdmitted) or (
            isinstance(event, ToolCallRefused) and event.reason not in ("held", "cancelled")
        ):
            total = total + Spend(tool_calls=1)
    prices = limits.prices
    for child in children.values():
        usage = child.usage
        total = total + call_spend(
            usage.input_tokens,
            usage.output_tokens,
            prices.cost(usage.input_tokens, usage.output_tokens) if prices else 0,
            calls=usage.requests,
            steps=child.tree_steps if child.tree_steps is not None else child.steps,
        )
    return total


def _model_price(model: Model | None, input_tokens: int, output_tokens: int) -> float | None:
    """The model's own price for that many tokens; None when it cannot price calls."""
    if model is None:
        return None
    return price_of(model, Usage(input_tokens=input_tokens, output_tokens=output_tokens))


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
