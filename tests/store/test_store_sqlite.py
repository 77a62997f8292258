"""The SQLite store: journals, sessions, approvals, bad files, transactions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from legato import Agent, tool
from legato.events import RunFailed, RunStarted, UserPrompt
from legato.exceptions import (
    JournalError,
    SchemaTooNew,
    SessionExists,
    SessionNotFound,
    StoreCorrupted,
    StoreError,
    ToolRetriesExceeded,
)
from legato.messages import Message
from legato.store import Database, SQLiteStore, Store, schema_version
from legato.store._schema import APPLICATION_ID
from legato.testing import ScriptedModel, call, reply


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "legato.db")


def test_store_implements_the_protocols(store: SQLiteStore) -> None:
    assert isinstance(store, Store)


def test_file_is_created_in_wal_mode_with_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "folder" / "legato.db"
    store = SQLiteStore(path)
    assert path.exists()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    assert store.db.version == schema_version()


def test_default_path_is_dot_legato_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    agent = Agent(ScriptedModel(["hi"]))
    agent.run_sync("hello", session="s")
    assert (tmp_path / ".legato" / "legato.db").exists()


def test_journal_of_a_run_is_stored_and_loads_back_equal(store: SQLiteStore) -> None:
    model = ScriptedModel([reply(call("lookup", {"key": "a"})), "done"])
    result = Agent(model, tools=[lookup], store=store).run_sync("go")
    loaded = store.load_run(result.run_id)
    assert loaded == result.journal
    [info] = store.list_runs()
    assert info.run_id == result.run_id
    assert info.status == "finished"
    assert info.events == len(result.journal)


def test_a_session_continues_across_runs(store: SQLiteStore) -> None:
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


def test_session_with_tool_calls_round_trips_exactly(store: SQLiteStore) -> None:
    model = ScriptedModel([reply("Looking.", call("lookup", {"key": "k"})), "It is 'value of k'."])
    result = Agent(model, tools=[lookup], store=store).run_sync("k?", session="t")
    assert store.load_session("t") == result.messages


def test_a_failed_run_leaves_the_session_unchanged_but_keeps_its_journal(
    store: SQLiteStore,
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


def test_undo_removes_the_last_turn(store: SQLiteStore) -> None:
    agent = Agent(ScriptedModel(["a1", "a2", "a2 again"]), store=store)
    agent.run_sync("q1", session="s")
    agent.run_sync("q2", session="s")
    removed = store.undo_turn("s")
    assert [m.text for m in removed] == ["q2", "a2"]
    assert [m.text for m in store.load_session("s")] == ["q1", "a1"]
    agent.run_sync("q2 rephrased", session="s")
    assert [m.text for m in store.load_session("s")] == ["q1", "a1", "q2 rephrased", "a2 again"]


def test_fork_at_any_message_rename_and_delete(store: SQLiteStore) -> None:
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


def test_unknown_session_names_are_typed_errors(store: SQLiteStore) -> None:
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


def test_unknown_run_is_a_journal_error(store: SQLiteStore) -> None:
    with pytest.raises(JournalError, match="no stored run"):
        store.load_run("missing")


def test_appending_over_stored_events_writes_nothing(store: SQLiteStore) -> None:
    start = RunStarted(run_id="r", agent="a", model="m")
    store.append_events("r", [start, UserPrompt(message=Message.user("1"))], start=0)
    with pytest.raises(StoreError, match="already stored"):
        store.append_events(
            "r",
            [UserPrompt(message=Message.user("2")), UserPrompt(message=Message.user("3"))],
            start=1,
        )
    assert len(store.load_run("r")) == 2
    with pytest.raises(JournalError, match="must be RunStarted"):
        store.append_events("r2", [UserPrompt(message=Message.user("x"))], start=0)


def test_a_write_that_fails_midway_is_rolled_back(store: SQLiteStore) -> None:
    store.append_turn("s", [Message.user("kept")], run_id=None)

    def crash() -> None:
        with store.db.write() as conn:
            conn.execute(
                "INSERT INTO session_messages(session, position, turn, run_id, message) "
                "VALUES ('s', 1, 1, NULL, '{}')"
            )
            raise RuntimeError("crash in the middle of a write")

    with pytest.raises(RuntimeError):
        crash()
    assert [m.text for m in store.load_session("s")] == ["kept"]


def test_random_bytes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreCorrupted, match="not a SQLite database"):
        SQLiteStore(path)
    assert path.read_bytes().startswith(b"this is not")  # untouched


def test_a_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices(id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreCorrupted, match="another program"):
        SQLiteStore(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id=1234")
    conn.commit()
    conn.close()
    with pytest.raises(StoreCorrupted, match="not a legato database"):
        SQLiteStore(path)
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("invoices",)]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={schema_version() + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNew) as info:
        SQLiteStore(path)
    assert info.value.found == schema_version() + 1
    assert info.value.supported == schema_version()


def test_a_damaged_database_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    store = SQLiteStore(path)
    for i in range(200):
        store.append_turn("s", [Message.user(f"message {i} " + "x" * 500)], run_id=None)
    store.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(page * 2, len(data), page):  # wreck every page after the schema
        data[offset : offset + 100] = b"\xff" * 100
    path.write_bytes(bytes(data))

    def reopen_and_read() -> None:
        SQLiteStore(path).load_session("s")

    with pytest.raises(StoreCorrupted, match="damaged"):
        reopen_and_read()


def test_migrations_are_applied_once_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    Database(path).close()
    Database(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version()
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_approvals_are_claimed_exactly_once(store: SQLiteStore) -> None:
    store.park_approval("req-1", run_id="r", payload={"tool": "delete", "args": {"path": "/x"}})
    assert store.decide_approval("req-1", {"approved": True}) is True
    assert store.decide_approval("req-1", {"approved": False}) is False
    [record] = store.approvals(run_id="r")
    assert record.state == "decided"
    assert record.decision == {"approved": True}
    assert record.payload == {"tool": "delete", "args": {"path": "/x"}}
    with pytest.raises(StoreError, match="already parked"):
        store.park_approval("req-1", run_id="r", payload=None)


def test_streaming_runs_store_their_session_too(store: SQLiteStore) -> None:
    agent = Agent(ScriptedModel(["streamed answer"]), store=store)
    kinds = [e.kind for e in agent.stream_sync("stream please", session="live")]
    assert kinds[-1] == "run_finished"
    assert [m.text for m in store.load_session("live")] == ["stream please", "streamed answer"]
    [run] = store.list_runs(session="live")
    assert run.status == "finished"
    assert run.events == len([k for k in kinds if not k.endswith("_delta")])


async def test_async_runs_inside_a_running_loop_share_one_store(store: SQLiteStore) -> None:
    import asyncio

    agents = [Agent(ScriptedModel([f"answer {i}"]), store=store) for i in range(5)]
    await asyncio.gather(*(a.run(f"question {i}", session=f"s{i}") for i, a in enumerate(agents)))
    assert sorted(s.name for s in store.list_sessions()) == [f"s{i}" for i in range(5)]
