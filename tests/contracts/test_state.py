"""The verified state on its own: typed keys, versions, snapshots, drafts, history."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from legato.contracts import Change, Draft, State
from legato.events import Journal, StateCommitted, StateLoaded
from legato.exceptions import (
    ContractViolation,
    StateError,
    StateValidationError,
    UndeclaredStateKey,
)


class Bank(BaseModel):
    user: str | None = None
    balances: dict[str, int] = Field(default_factory=dict)
    limit: int = Field(default=100, ge=0)


def bank() -> State[Bank]:
    return State(Bank(balances={"ann": 100, "bob": 20}))


def test_declared_by_instance_type_values_or_typed_keys() -> None:
    assert bank()["balances"] == {"ann": 100, "bob": 20}
    assert State(Bank)["limit"] == 100
    assert State(Bank, {"user": "ann"})["user"] == "ann"
    typed = State.typed(count=(int, 0), name=(str | None, None))
    assert typed.keys == ("count", "name")
    assert typed["count"] == 0
    assert bank().keys == ("user", "balances", "limit")
    assert bank().version == 0


def test_loading_invalid_values_names_the_key_and_value() -> None:
    with pytest.raises(StateValidationError) as info:
        State(Bank, {"limit": -5})
    assert info.value.key == "limit"
    assert info.value.value == -5
    assert "limit" in str(info.value)
    with pytest.raises(UndeclaredStateKey) as undeclared:
        State(Bank, {"owner": "ann"})
    assert undeclared.value.key == "owner"
    assert "user, balances, limit" in str(undeclared.value)
    with pytest.raises(StateError):
        State(dict)  # type: ignore[type-var] # not a pydantic model
    with pytest.raises(StateError):
        State(Bank(), {"user": "x"})


def test_commit_validates_and_versions_all_or_nothing() -> None:
    state = bank()
    commit = state.commit(user="ann", reason="login by the web app")
    assert (commit.version, commit.tool, commit.reason) == (1, None, "login by the web app")
    assert commit.changes == (Change("user", None, "ann"),)
    with pytest.raises(StateValidationError) as info:
        state.commit(user="bob", limit="lots")
    assert (info.value.key, info.value.value) == ("limit", "lots")
    # nothing of the failed commit landed, not even the valid part
    assert state["user"] == "ann"
    assert state.version == 1
    with pytest.raises(UndeclaredStateKey):
        state.commit(owner="x")
    # strict: no silent coercion of a wrong type
    with pytest.raises(StateValidationError):
        state.commit(limit="5")
    # a commit that changes nothing makes no version
    assert state.commit(user="ann").changes == ()
    assert state.version == 1


def test_snapshots_never_change_and_reads_are_private_copies() -> None:
    state = bank()
    before = state.snapshot()
    balances = before["balances"]
    balances["ann"] = 1_000_000  # a reader scribbling on what it read
    assert state["balances"]["ann"] == 100
    state.commit(balances={"ann": 1, "bob": 2})
    assert before["balances"] == {"ann": 100, "bob": 20}
    assert before.version == 0
    assert state.snapshot().version == 1
    with pytest.raises(ContractViolation):
        before["user"] = "mallory"
    with pytest.raises(UndeclaredStateKey):
        before["owner"]
    assert before.get("user", "nobody") == "nobody"
    assert state.snapshot().get("user") is None
    typed = state.as_model()
    assert isinstance(typed, Bank)
    typed.balances["ann"] = 99
    assert state["balances"]["ann"] == 1


def test_at_diff_and_history_answer_who_when_from_what() -> None:
    state = bank()
    state.commit(user="ann")
    state._apply({"balances": {"ann": 70, "bob": 50}}, tool="transfer", call_id="c1")
    state._apply({"balances": {"ann": 60, "bob": 60}}, tool="transfer", call_id="c2")
    assert state.version == 3
    assert state.at(0)["user"] is None
    assert state.at(2)["balances"] == {"ann": 70, "bob": 50}
    assert state.at(3) == state.snapshot()
    assert state.diff(0, 2) == [
        Change("user", None, "ann"),
        Change("balances", {"ann": 100, "bob": 20}, {"ann": 70, "bob": 50}),
    ]
    assert state.diff(2, 2) == []
    history = state.history("balances")
    assert [(c.version, c.tool, c.call_id) for c in history] == [
        (2, "transfer", "c1"),
        (3, "transfer", "c2"),
    ]
    assert history[1].changes[0].old == {"ann": 70, "bob": 50}
    with pytest.raises(StateError):
        state.at(4)
    with pytest.raises(UndeclaredStateKey):
        state.history("owner")
    assert state.changed_since(1) == {"balances"}
    assert state.changed_since(3) == set()


def test_history_values_cannot_be_corrupted_by_readers() -> None:
    state = bank()
    state.commit(balances={"ann": 1})
    change = state.history("balances")[0].changes[0]
    change.new["ann"] = 999
    assert state["balances"] == {"ann": 1}


def test_fork_is_independent() -> None:
    state = bank()
    fork = state.fork()
    fork.commit(user="ann")
    assert state["user"] is None
    assert state.version == 0
    assert fork.version == 1


def test_draft_writes_are_validated_and_limited_to_declared_writes() -> None:
    state = bank()
    draft: Draft[Bank] = Draft(state.snapshot(), writes=frozenset({"balances"}), tool="transfer")
    with pytest.raises(StateValidationError) as wrong:
        draft["balances"] = {"ann": "a lot"}
    assert wrong.value.tool == "transfer"
    assert wrong.value.key == "balances"
    assert "transfer" in str(wrong.value)
    with pytest.raises(ContractViolation) as outside:
        draft["user"] = "mallory"
    assert (outside.value.tool, outside.value.key, outside.value.value) == (
        "transfer",
        "user",
        "mallory",
    )
    with pytest.raises(UndeclaredStateKey):
        draft["owner"] = 1
    draft["balances"]["ann"] -= 30  # in place, on the draft's own copy
    assert draft.changes() == {"balances": {"ann": 70, "bob": 20}}
    assert state["balances"]["ann"] == 100  # the state is untouched until a commit


def test_draft_in_place_change_of_a_key_it_may_not_write_is_refused() -> None:
    state = bank()
    draft: Draft[Bank] = Draft(state.snapshot(), writes=frozenset({"user"}), tool="login")
    draft["balances"]["ann"] = 0
    with pytest.raises(ContractViolation) as info:
        draft.changes()
    assert info.value.key == "balances"


def test_draft_in_place_change_to_a_wrong_type_is_refused() -> None:
    state = bank()
    draft: Draft[Bank] = Draft(state.snapshot(), writes=frozenset({"balances"}), tool="t")
    draft["balances"]["ann"] = "lots"
    with pytest.raises(StateValidationError):
        draft.changes()


def test_draft_reads_limited_to_declared_reads() -> None:
    state = bank()
    draft: Draft[Bank] = Draft(
        state.snapshot(), writes=frozenset({"user"}), reads=frozenset(), tool="t"
    )
    assert draft["user"] is None  # writable keys are readable
    with pytest.raises(ContractViolation):
        draft["balances"]


def test_from_journal_rebuilds_values_versions_and_history() -> None:
    state = bank()
    state.commit(user="ann")
    state._apply({"balances": {"ann": 70}}, tool="transfer", call_id="c1", checks=("funds",))
    events = [state.fork().loaded_event()]
    start = State(Bank(balances={"ann": 100, "bob": 20}))
    loaded = start.loaded_event()
    commits = [state.commit_event(c) for c in state.commits]
    journal = Journal([loaded, *commits])
    again = Journal.from_jsonl(journal.to_jsonl())
    first, *rest = again.events
    assert isinstance(first, StateLoaded)
    rebuilt = State.from_journal(first, [e for e in rest if isinstance(e, StateCommitted)], Bank)
    assert len(rest) == 2
    assert rebuilt.snapshot() == state.snapshot()
    assert rebuilt.commits == state.commits
    untyped: State[Any] = State.from_journal(loaded, commits)
    assert untyped["balances"] == {"ann": 70}
    assert events[0].version == 2


def test_from_journal_refuses_a_gap() -> None:
    state = bank()
    state.commit(user="ann")
    state.commit(user="bob")
    loaded = bank().loaded_event()
    with pytest.raises(StateError):
        State.from_journal(loaded, [state.commit_event(state.commits[1])], Bank)
