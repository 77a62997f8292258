"""A NUL character: refused in names, kept in payloads, the same on SQLite and PostgreSQL.

PostgreSQL text cannot hold NUL while SQLite stores it; the store refuses a name holding one
with `StoreNameInvalid` before anything is written, and keeps it inside events, messages and
approval payloads (JSON text, where it is escaped), which read back intact.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from legato import Agent, tool
from legato.exceptions import StoreError, StoreNameInvalid
from legato.messages import Message
from legato.store import PostgresStore, SQLiteStore
from legato.testing import ScriptedModel, call, reply
from pg_cluster import AnyStore

BAD = "a\x00b"


@tool
def echo(key: str) -> str:
    """Echo a key back, with a NUL inside.

    Args:
        key: The key.
    """
    return f"out\x00{key}"


def _unchecked(*names: tuple[str, str | None]) -> None:
    """The check switched off: the old code path."""


def _snapshot(store: AnyStore) -> tuple[object, ...]:
    return (
        [(s.name, s.messages) for s in store.list_sessions()],
        [(r.run_id, r.events) for r in store.list_runs()],
        [(a.request_id, a.state) for a in store.approvals()],
    )


CALLS: dict[str, Callable[[AnyStore], object]] = {
    "load_session": lambda s: s.load_session(BAD, create=True),
    "append_turn": lambda s: s.append_turn(BAD, [Message.user("hi")], run_id=None),
    "append_turn run id": lambda s: s.append_turn("ok", [Message.user("hi")], run_id=BAD),
    "fork_session": lambda s: s.fork_session("base", BAD),
    "rename_session": lambda s: s.rename_session("base", BAD),
    "delete_session": lambda s: s.delete_session(BAD),
    "undo_turn": lambda s: s.undo_turn(BAD),
    "session_info": lambda s: s.session_info(BAD),
    "session_context": lambda s: s.session_context(BAD),
    "list_runs": lambda s: s.list_runs(session=BAD),
    "load_run": lambda s: s.load_run(BAD),
    "run_info": lambda s: s.run_info(BAD),
    "park_approval": lambda s: s.park_approval(BAD, run_id="r", payload={}),
    "park_approval run id": lambda s: s.park_approval("q", run_id=BAD, payload={}),
    "decide_approval": lambda s: s.decide_approval(BAD, {"approved": True}),
    "claim_approval": lambda s: s.claim_approval(BAD),
    "approval": lambda s: s.approval(BAD),
    "approvals": lambda s: s.approvals(run_id=BAD),
}


@pytest.mark.parametrize("entry", sorted(CALLS))
def test_a_name_with_nul_is_refused_and_nothing_is_written(store: AnyStore, entry: str) -> None:
    store.append_turn("base", [Message.user("kept")], run_id=None)
    before = _snapshot(store)
    with pytest.raises(StoreNameInvalid) as caught:
        CALLS[entry](store)
    assert caught.value.value == BAD
    assert "NUL" in str(caught.value)
    assert _snapshot(store) == before


@pytest.mark.parametrize("option", ["session", "run_id"])
def test_a_run_with_a_nul_name_fails_before_the_model_is_called(
    store: AnyStore, option: str
) -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model, store=store)
    with pytest.raises(StoreNameInvalid):
        if option == "session":
            agent.run_sync("hi", session=BAD)
        else:
            agent.run_sync("hi", run_id=BAD)
    assert model.requests == []
    assert _snapshot(store) == ([], [], [])


def test_an_agent_name_with_nul_is_refused(store: AnyStore) -> None:
    model = ScriptedModel(["never"])
    with pytest.raises(StoreNameInvalid) as caught:
        Agent(model, store=store, name=BAD).run_sync("hi")
    assert caught.value.what == "agent name"
    assert _snapshot(store) == ([], [], [])


def test_nul_in_payloads_round_trips(store: AnyStore) -> None:
    model = ScriptedModel([reply(call("echo", {"key": "k\x00ey"})), "done\x00!"])
    agent = Agent(model, tools=[echo], store=store)
    result = agent.run_sync("go\x00on", session="chat")
    assert store.load_run(result.run_id) == result.journal
    texts = [m.text for m in store.load_session("chat")]
    assert texts[0] == "go\x00on" and texts[-1] == "done\x00!"
    [output] = [r.text for m in store.load_session("chat") for r in m.tool_results]
    assert output == "out\x00k\x00ey"
    [sent] = [c.arguments for m in store.load_session("chat") for c in m.tool_calls]
    assert sent == {"key": "k\x00ey"}
    store.park_approval("q", run_id=result.run_id, payload={"why": "a\x00b"})
    assert store.decide_approval("q", {"note": "c\x00d"}) is False  # the run has finished
    record = store.approval("q")
    assert record is not None and record.payload == {"why": "a\x00b"}


def test_twin_without_the_check_the_backends_disagree(
    store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("legato.store._core.check_names", _unchecked)
    if isinstance(store, SQLiteStore):
        store.append_turn(BAD, [Message.user("hi")], run_id=None)  # SQLite keeps it
        assert [s.name for s in store.list_sessions()] == [BAD]
    else:
        assert isinstance(store, PostgresStore)
        with pytest.raises(StoreError) as caught:  # PostgreSQL refuses it, untyped
            store.append_turn(BAD, [Message.user("hi")], run_id=None)
        assert not isinstance(caught.value, StoreNameInvalid)
        assert "NUL" in str(caught.value)


def test_twin_without_the_check_at_the_start_the_model_is_called_first(
    store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for where in ("legato.store.check_names", "legato.store._core.check_names"):
        monkeypatch.setattr(where, _unchecked)
    model = ScriptedModel(["answered"])
    agent = Agent(model, store=store)
    if isinstance(store, SQLiteStore):
        agent.run_sync("hi", run_id=BAD)  # SQLite keeps the run under a NUL id
        assert [r.run_id for r in store.list_runs()] == [BAD]
    else:
        with pytest.raises(StoreError) as caught:  # PostgreSQL: after the model's answer
            agent.run_sync("hi", run_id=BAD)
        assert not isinstance(caught.value, StoreNameInvalid)
    assert len(model.requests) == 1
