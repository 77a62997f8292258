"""Property tests: no interleaving of reservations and settlements crosses a limit."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legato.budgets import Budget, Reservation, Spend
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
