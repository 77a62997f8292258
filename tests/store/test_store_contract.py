"""The store protocols, run against every backend: SQLite, and PostgreSQL on a real server.

The `store` fixture (tests/store/conftest.py) is each backend in turn.
"""

from __future__ import annotations

import pytest

from legato import Agent, tool
from legato.events import RunFailed, RunStarted, UserPrompt
from legato.exceptions import (
    JournalConflict,
    JournalError,
    SessionExists,
    SessionNotFound,
    StoreError,
    ToolRetriesExceeded,
)
from legato.messages import Message
from legato.store import PostgresStore, Store
from legato.testing import ScriptedModel, call, reply
from pg_cluster import AnyStore


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


def test_store_implements_the_protocols(store: AnyStore) -> None:
    assert isinstance(store, Store)


def test_journal_of_a_run_is_stored_and_loads_back_equal(store: AnyStore) -> None:
    model = ScriptedModel([reply(call("lookup", {"key": "a"})), "done"])
    result = Agent(model, tools=[lookup], store=store).run_sync("go")
    loaded = store.load_run(result.run_id)
    assert loaded == result.journal
    [info] = store.list_runs()
    assert info.run_id == result.run_id
    assert info.status == "finished"
    assert info.events == len(result.journal)


def test_a_session_continues_across_runs(store: AnyStore) -> None:
    model = ScriptedModel(["Nice to meet you, Ada.", "Your name is Ada."])
    agent = Agent(model, store=store)
    agent.run_sync("My name is Ada.", session="chat")
    second = agent.run_sync("What is my name?", session="chat")
    sent = model.requests[1].messages
    assert [m.text for m in sent] == [
        "My name is Ada.",
        "Nice to meet you, Ada.",
        "What is my name?",
    ]
    assert second.new_message_index == 2
    assert [m.text for m in store.load_session("chat")] == [m.text for m in second.messages]
    [info] = store.list_sessions()
    assert (info.name, info.messages, info.turns) == ("chat", 4, 2)
    assert {r.session for r in store.list_runs()} == {"chat"}


def test_session_with_tool_calls_round_trips_exactly(store: AnyStore) -> None:
    model = ScriptedModel([reply("Looking.", call("lookup", {"key": "k"})), "It is 'value of k'."])
    result = Agent(model, tools=[lookup], store=store).run_sync("k?", session="t")
    assert store.load_session("t") == result.messages


def test_a_failed_run_leaves_the_session_unchanged_but_keeps_its_journal(
    store: AnyStore,
) -> None:
    ok = Agent(ScriptedModel(["first answer"]), store=store)
    ok.run_sync("one", session="s")

    @tool(max_retries=0)
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("boom")

    failing = Agent(ScriptedModel([reply(call("broken"))]), tools=[broken], store=store)
    with pytest.raises(ToolRetriesExceeded):
        failing.run_sync("two", session="s")
    assert [m.text for m in store.load_session("s")] == ["one", "first answer"]
    failed_run = next(r for r in store.list_runs() if r.status == "failed")
    journal = store.load_run(failed_run.run_id)
    assert isinstance(journal.events[-1], RunFailed)


def test_undo_removes_the_last_turn(store: AnyStore) -> None:
    agent = Agent(ScriptedModel(["a1", "a2", "a2 again"]), store=store)
    agent.run_sync("q1", session="s")
    agent.run_sync("q2", session="s")
    removed = store.undo_turn("s")
    assert [m.text for m in removed] == ["q2", "a2"]
    assert [m.text for m in store.load_session("s")] == ["q1", "a1"]
    agent.run_sync("q2 rephrased", session="s")
    assert [m.text for m in store.load_session("s")] == ["q1", "a1", "q2 rephrased", "a2 again"]


def test_fork_at_any_message_rename_and_delete(store: AnyStore) -> None:
    agent = Agent(ScriptedModel(["a1", "a2", "b2"]), store=store)
    agent.run_sync("q1", session="main")
    agent.run_sync("q2", session="main")
    info = store.fork_session("main", "branch", at=2)
    assert info.forked_from == "main"
    assert info.messages == 2
    agent.run_sync("other q2", session="branch")
    assert [m.text for m in store.load_session("branch")] == ["q1", "a1", "other q2", "b2"]
    assert len(store.load_session("main")) == 4
    store.rename_session("branch", "experiment")
    assert {s.name for s in store.list_sessions()} == {"main", "experiment"}
    assert {r.session for r in store.list_runs(session="experiment")} == {"experiment"}
    store.delete_session("experiment")
    with pytest.raises(SessionNotFound):
        store.load_session("experiment")
    assert len(store.list_runs()) == 3  # journals outlive their session


def test_unknown_session_names_are_typed_errors(store: AnyStore) -> None:
    store.append_turn("exists", [Message.user("x")], run_id=None)
    for action in (
        lambda: store.load_session("nope"),
        lambda: store.undo_turn("nope"),
        lambda: store.fork_session("nope", "x"),
        lambda: store.rename_session("nope", "x"),
        lambda: store.delete_session("nope"),
    ):
        with pytest.raises(SessionNotFound, match="'nope'"):
            action()
    with pytest.raises(SessionExists):
        store.fork_session("exists", "exists")
    store.append_turn("other", [Message.user("y")], run_id=None)
    with pytest.raises(SessionExists):
        store.rename_session("exists", "other")
    with pytest.raises(StoreError, match="cannot fork at 5"):
        store.fork_session("exists", "new", at=5)


def test_unknown_run_is_a_journal_error(store: AnyStore) -> None:
    with pytest.raises(JournalError, match="no stored run"):
        store.load_run("missing")


def test_a_negative_limit_is_refused_alike(store: AnyStore) -> None:
    """`list_runs(limit=-1)`: SQLite read it as "no limit", PostgreSQL's server refused it;
    both stores now refuse it with the same typed error, before any SQL."""
    store.append_events("r", [RunStarted(run_id="r", agent="a", model="m")], start=0)
    with pytest.raises(StoreError, match="limit must be 0 or more, not -1"):
        store.list_runs(limit=-1)
    assert store.list_runs(limit=0) == []


def test_twin_without_the_limit_check_the_backends_disagree(
    store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unchecked(limit: int) -> None:
        return None

    monkeypatch.setattr("legato.store._core._check_limit", unchecked)
    store.append_events("r", [RunStarted(run_id="r", agent="a", model="m")], start=0)
    if isinstance(store, PostgresStore):
        with pytest.raises(StoreError, match="LIMIT must not be negative"):
            store.list_runs(limit=-1)
    else:
        assert [i.run_id for i in store.list_runs(limit=-1)] == ["r"]


def test_appending_over_stored_events_writes_nothing(store: AnyStore) -> None:
    start = RunStarted(run_id="r", agent="a", model="m")
    store.append_events("r", [start, UserPrompt(message=Message.user("1"))], start=0)
    with pytest.raises(JournalConflict, match="written by another process"):
        store.append_events(
            "r",
            [UserPrompt(message=Message.user("2")), UserPrompt(message=Message.user("3"))],
            start=1,
        )
    assert len(store.load_run("r")) == 2
    with pytest.raises(
        JournalConflict, match="written by another process"
    ):  # the same run started twice
        store.append_events("r", [start], start=0)
    with pytest.raises(JournalError, match="no stored run to append to"):
        store.append_events("never-started", [UserPrompt(message=Message.user("x"))], start=3)
    assert len(store.load_run("r")) == 2
    with pytest.raises(JournalError, match="must be RunStarted"):
        store.append_events("r2", [UserPrompt(message=Message.user("x"))], start=0)


def test_a_write_that_fails_midway_is_rolled_back(store: AnyStore) -> None:
    store.append_turn("s", [Message.user("kept")], run_id=None)

    def crash() -> None:
        if isinstance(store, PostgresStore):
            with store.db.write() as conn:
                conn.execute(
                    "INSERT INTO legato.session_messages(session, position, turn, run_id, message) "
                    "VALUES ('s', 1, 1, NULL, '{}')"
                )
                raise RuntimeError("crash in the middle of a write")
        with store.db.write() as conn:
            conn.execute(
                "INSERT INTO session_messages(session, position, turn, run_id, message) "
                "VALUES ('s', 1, 1, NULL, '{}')"
            )
            raise RuntimeError("crash in the middle of a write")

    with pytest.raises(RuntimeError):
        crash()
    assert [m.text for m in store.load_session("s")] == ["kept"]


def test_approvals_are_claimed_exactly_once(store: AnyStore) -> None:
    store.park_approval("req-1", run_id="r", payload={"tool": "delete", "args": {"path": "/x"}})
    assert store.decide_approval("req-1", {"approved": True}) is True
    assert store.decide_approval("req-1", {"approved": False}) is False
    [record] = store.approvals(run_id="r")
    assert record.state == "decided"
    assert record.decision == {"approved": True}
    assert record.payload == {"tool": "delete", "args": {"path": "/x"}}
    with pytest.raises(StoreError, match="already parked"):
        store.park_approval("req-1", run_id="r", payload=None)


def test_streaming_runs_store_their_session_too(store: AnyStore) -> None:
    agent = Agent(ScriptedModel(["streamed answer"]), store=store)
    kinds = [e.kind for e in agent.stream_sync("stream please", session="live")]
    assert kinds[-1] == "run_finished"
    assert [m.text for m in store.load_session("live")] == ["stream please", "streamed answer"]
    [run] = store.list_runs(session="live")
    assert run.status == "finished"
    assert run.events == len([k for k in kinds if not k.endswith("_delta")])


async def test_async_runs_inside_a_running_loop_share_one_store(store: AnyStore) -> None:
    import asyncio

    agents = [Agent(ScriptedModel([f"answer {i}"]), store=store) for i in range(5)]
    await asyncio.gather(*(a.run(f"question {i}", session=f"s{i}") for i, a in enumerate(agents)))
    assert sorted(s.name for s in store.list_sessions()) == [f"s{i}" for i in range(5)]
