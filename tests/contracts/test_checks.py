"""Contracts and the helper checks, evaluated directly against snapshots."""

from __future__ import annotations

from typing import Any, cast

import pytest
from pydantic import BaseModel, Field

from legato.contracts import (
    Allow,
    Halt,
    Reject,
    Snapshot,
    State,
    arg,
    at_least,
    at_most,
    check,
    contract,
    decreased_by,
    equals,
    greater,
    has,
    increased_by,
    less,
    unchanged_except,
)
from legato.contracts._state import schema_of
from legato.exceptions import ContractViolation, UndeclaredStateKey


class Bank(BaseModel):
    user: str | None = None
    balances: dict[str, int] = Field(default_factory=dict)
    note: str = ""


def snap(**values: Any) -> Snapshot[Bank]:
    return State(Bank, values).snapshot()


BASE = {"user": "ann", "balances": {"ann": 100, "bob": 20}}


def pre(check_: Any, args: dict[str, Any], **values: Any) -> Any:
    return check_(snap(**values), args)


def post(check_: Any, old: dict[str, Any], new: dict[str, Any], args: dict[str, Any]) -> Any:
    return check_(snap(**old), snap(**new), args, None)


def test_has_and_equals() -> None:
    assert pre(has("user"), {}, **BASE) is True
    rejected = pre(has("user"), {}, balances={})
    assert isinstance(rejected, Reject)
    assert "user is not set" in rejected.message
    missing = pre(has(("balances", arg("who"))), {"who": "zed"}, **BASE)
    assert isinstance(missing, Reject)
    assert "balances.zed does not exist" in missing.message
    assert pre(equals("user", arg("name")), {"name": "ann"}, **BASE) is True
    wrong = pre(equals("user", "bob"), {}, **BASE)
    assert isinstance(wrong, Reject)
    assert "'ann', not 'bob'" in wrong.message


@pytest.mark.parametrize(
    ("made", "passes"),
    [
        (at_least(("balances", "ann"), 100), True),
        (at_least(("balances", "ann"), 101), False),
        (at_most(("balances", "bob"), 20), True),
        (at_most(("balances", "bob"), 19), False),
        (greater(("balances", "ann"), arg("amount")), True),
        (less(("balances", "ann"), arg("amount")), False),
        (at_least("user", 5), False),  # incomparable types reject, never crash
    ],
)
def test_comparisons(made: Any, passes: bool) -> None:
    out = pre(made, {"amount": 50}, **BASE)
    assert (out is True) is passes
    if not passes:
        assert isinstance(out, Reject)
        assert "needs" in out.message


def test_exact_changes_and_unchanged_except() -> None:
    args = {"source": "ann", "target": "bob", "amount": 30}
    old = BASE
    good = {"user": "ann", "balances": {"ann": 70, "bob": 50}}
    fee = {"user": "ann", "balances": {"ann": 69, "bob": 50}}
    sneaky = {"user": "ann", "balances": {"ann": 70, "bob": 50, "eve": 1}}
    renamed = {"user": "eve", "balances": {"ann": 70, "bob": 50}}
    down = decreased_by(("balances", arg("source")), arg("amount"))
    up = increased_by(("balances", arg("target")), arg("amount"))
    rest = unchanged_except(("balances", arg("source")), ("balances", arg("target")))
    for made in (down, up, rest):
        assert post(made, old, good, args) is True
    taken = post(down, old, fee, args)
    assert isinstance(taken, Reject)
    assert "went from 100 to 69" in taken.message
    assert isinstance(post(rest, old, sneaky, args), Reject)
    changed = post(rest, old, renamed, args)
    assert isinstance(changed, Reject)
    assert "user changed" in changed.message
    assert post(unchanged_except("user", "balances"), old, renamed, args) is True


def test_check_names_plain_predicates_and_checks_arity() -> None:
    positive = check(lambda state, args: args["n"] > 0, name="positive", message="n must be > 0")
    assert positive(snap(), {"n": 1}) is True
    assert positive(snap(), {"n": 0}) == Reject("n must be > 0")
    after = check(lambda old, new, args, result: result == "ok", name="ok result")
    assert after(snap(), snap(), {}, "ok") is True

    def one(state: Any) -> bool:
        return True

    with pytest.raises(ContractViolation):
        check(cast(Any, one))  # one parameter: neither kind
    with pytest.raises(ContractViolation):
        after(snap(), {})  # a postcondition used as a precondition


def test_contract_evaluation_outcomes_and_evidence() -> None:
    made = contract(
        requires=[has("user"), lambda state, args: Halt("frozen") if args["frozen"] else Allow()],
        reads=["user"],
    )
    ok = made.precondition(snap(**BASE), {"frozen": False}, tool="t")
    assert ok.allowed
    assert ok.passed == ("has user", "pre#2")
    halted = made.precondition(snap(**BASE), {"frozen": True}, tool="t")
    assert halted.outcome == Halt("frozen")
    assert halted.predicate == "pre#2"
    refused = made.precondition(snap(balances={}), {"frozen": False}, tool="t")
    assert isinstance(refused.outcome, Reject)
    assert refused.evidence == {"user": None, "args.frozen": False}


def test_broken_predicates_are_typed_errors_naming_the_tool() -> None:
    def boom(state: Any, args: Any) -> bool:
        raise RuntimeError("kaput")

    with pytest.raises(ContractViolation) as raised:
        contract(requires=boom).precondition(snap(), {}, tool="transfer")
    assert "transfer" in str(raised.value)
    assert "boom" in str(raised.value)
    assert "kaput" in str(raised.value)
    with pytest.raises(ContractViolation) as returned:
        contract(requires=lambda s, a: None).precondition(snap(), {}, tool="t")
    assert "returned None" in str(returned.value)


def test_bind_refuses_undeclared_keys_and_misplaced_checks() -> None:
    schema = schema_of(Bank)
    with pytest.raises(UndeclaredStateKey) as helper_key:
        contract(requires=has("owner")).bind(schema, tool="t")
    assert (helper_key.value.key, helper_key.value.tool) == ("owner", "t")
    with pytest.raises(UndeclaredStateKey):
        contract(writes=["owner"], unchecked_writes=True).bind(schema, tool="t")
    with pytest.raises(ContractViolation):
        contract(requires=unchanged_except("user")).bind(schema, tool="t")
    with pytest.raises(ContractViolation) as unread:
        contract(requires=has("balances"), reads=["user"]).bind(schema, tool="t")
    assert unread.value.key == "balances"
    contract(requires=has("user"), ensures=unchanged_except("user"), writes=["user"]).bind(
        schema, tool="t"
    )


def test_a_check_naming_a_missing_argument_is_a_contract_error() -> None:
    made = contract(requires=at_least("note", arg("nope")))
    with pytest.raises(ContractViolation, match="argument 'nope'"):
        made.precondition(snap(**BASE), {"amount": 1}, tool="t")


def test_malformed_paths_and_options_are_refused_up_front() -> None:
    from legato.contracts import StateOptions
    from legato.exceptions import StateError

    with pytest.raises(ContractViolation):
        has(())
    with pytest.raises(ContractViolation):
        decreased_by((arg("x"), "y"), 1)
    with pytest.raises(StateError):
        StateOptions(max_rejections=-1)
    with pytest.raises(ContractViolation, match="not callable"):
        contract(requires=[42])  # type: ignore[list-item] # not a predicate
