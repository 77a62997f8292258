"""Property tests: no interleaving of reservations and settlements crosses a limit."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legato.budgets import Budget, BudgetLimits, Reservation, Spend, nested_budget
from legato.exceptions import BudgetExceeded

amounts = st.builds(
    Spend,
    output_tokens=st.integers(0, 400),
    dollars=st.floats(0, 0.3, allow_nan=False),
    model_calls=st.integers(0, 2),
)


@dataclass(frozen=True)
class Op:
    """Reserve `amount`, or settle (at `fraction`) / release the `index`-th open reservation."""

    kind: str
    amount: Spend = Spend()
    index: int = 0
    fraction: float = 1.0


operations = st.lists(
    st.one_of(
        st.builds(Op, kind=st.just("reserve"), amount=amounts),
        st.builds(Op, kind=st.just("settle"), index=st.integers(0, 20), fraction=st.floats(0, 1)),
        st.builds(Op, kind=st.just("release"), index=st.integers(0, 20)),
    ),
    max_size=60,
)


def _scaled(amount: Spend, fraction: float) -> Spend:
    return Spend(
        output_tokens=amount.output_tokens * fraction,
        dollars=amount.dollars * fraction,
        model_calls=amount.model_calls,
    )


@settings(max_examples=300, deadline=None)
@given(operations)
def test_used_plus_reserved_never_crosses_a_limit(ops: list[Op]) -> None:
    budget = Budget(output_tokens=1000, dollars=1.0, model_calls=6, call_estimate=0.1)
    open_: list[Reservation] = []
    for op in ops:
        if op.kind == "reserve":
            before = budget.used + budget.reserved
            refused: BudgetExceeded | None = None
            try:
                open_.append(budget.reserve(op.amount))
            except BudgetExceeded as exc:
                refused = exc
            if refused is not None:
                # refused only when it really would not fit, and nothing was held
                assert budget.used + budget.reserved == before
                assert refused.used + refused.reserved + refused.requested > refused.limit
        elif open_:
            reservation = open_.pop(op.index % len(open_))
            if op.kind == "settle":
                reservation.settle(_scaled(reservation.amounts, op.fraction))
            else:
                reservation.release()
        total = budget.used + budget.reserved
        assert total.output_tokens <= 1000
        assert total.dollars <= 1.0 + 1e-9
        assert total.model_calls <= 6
    for reservation in open_:
        reservation.release()
    assert budget.reserved == Spend()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 0.2, allow_nan=False), min_size=1, max_size=12))
def test_a_child_can_never_spend_more_than_was_moved_to_it(costs: list[float]) -> None:
    parent = Budget(dollars=1.0, call_estimate=0.1)
    child = parent.split(dollars=0.5)
    spent = 0.0
    for cost in costs:
        try:
            child.charge(Spend(dollars=cost))
            spent += cost
        except BudgetExceeded:
            pass
    assert spent <= 0.5 + 1e-9
    assert child.close().dollars == pytest.approx(spent)
    assert parent.used.dollars == pytest.approx(spent)
    assert parent.reserved == Spend()


tree_operations = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(["reserve", "settle", "release"]), amounts),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(tree_operations, st.floats(0, 1))
def test_children_drawing_from_a_parent_never_cross_either_limit(
    ops: list[tuple[int, str, Spend]], fraction: float
) -> None:
    """Sub-agents' budgets: whatever they do, the parent's used + reserved is exactly theirs
    added up, and no budget of the tree crosses its limits."""
    parent = Budget(output_tokens=1000, dollars=1.0, model_calls=6, call_estimate=0.1)
    shared = Budget(model_calls=4, call_estimate=0.1)
    children = [
        nested_budget(BudgetLimits(output_tokens=700, call_estimate=0.1), parent),
        nested_budget(None, parent),  # the parent's own budget, spent from directly
        nested_budget(shared, parent),  # a budget of its own shared by other runs, and the parent's
    ]
    open_: list[list[Reservation]] = [[], [], []]
    direct = Spend()  # what the second child settled in the parent
    for who, kind, amount in ops:
        child = children[who]
        assert child is not None
        if kind == "reserve":
            with contextlib.suppress(BudgetExceeded):
                open_[who].append(child.reserve(amount))
        elif open_[who]:
            reservation = open_[who].pop(0)
            if kind == "settle":
                actual = _scaled(reservation.amounts, fraction)
                reservation.settle(actual)
                direct = direct + actual if who == 1 else direct
            else:
                reservation.release()
        total = parent.used + parent.reserved
        assert total.output_tokens <= 1000 and total.model_calls <= 6
        assert total.dollars <= 1.0 + 1e-9
        first, third = children[0], children[2]
        assert first is not None and third is not None
        assert (first.used + first.reserved).output_tokens <= 700
        assert (shared.used + shared.reserved).model_calls <= 4
        # the parent holds exactly what its children hold (the second one *is* the parent)
        drawn = first.used + first.reserved + third.used + third.reserved + direct
        for held in open_[1]:
            drawn = drawn + held.amounts
        assert (parent.used + parent.reserved).model_calls == drawn.model_calls
        assert (parent.used + parent.reserved).output_tokens == pytest.approx(drawn.output_tokens)
    for reservations in open_:
        for reservation in reservations:
            reservation.release()
    assert parent.reserved == Spend() and shared.reserved == Spend()
