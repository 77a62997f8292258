"""A database written before memory expiry and redaction (schema 5) opens, migrates, and works."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pydantic import TypeAdapter

from legato import Agent
from legato.events import Compacted, JournalEvent
from legato.memory import Memory, SQLiteMemory
from legato.messages import Message
from legato.store import SQLiteStore, schema_version
from legato.store._schema import APPLICATION_ID, MIGRATIONS
from legato.testing import ScriptedModel, call, reply

PREVIOUS = 5
"""The schema version of the release before expiry and `forgotten_refs`."""
SECRET = "The staging root password is tulip-0091."


def old_database(path: Path) -> tuple[str, str]:
    """A file as the previous release left it: its migrations, rows written by its SQL.

    Holds a memory item, a session whose messages and carried-over view quote it, and the
    journal of the run that recalled it. Returns (item id, run id).
    """
    journal_memory = SQLiteMemory(":memory:")  # only to produce a real run's events
    journal_memory.remember(SECRET)
    model = ScriptedModel([reply(call("recall", {"query": "staging root password"})), "Found."])
    result = Agent(model, memory=Memory(store=journal_memory)).run_sync("staging password?")
    recalled = next(m for m in result.messages if m.tool_results).tool_results[0].text
    item_id = recalled.split("]")[0].rsplit(" ", 1)[-1]
    assert SECRET in recalled

    events = TypeAdapter(JournalEvent)
    messages = TypeAdapter(Message)
    context = Compacted(
        strategy="summarize",
        reason="threshold",
        upto=len(result.messages),
        messages=(Message.user(f"[legato: summary of 3 earlier messages]\nEarlier: {SECRET}"),),
        sources=(-1,),
        removed=tuple(range(len(result.messages))),
        summary=f"Earlier: {SECRET}",
    )

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for step in MIGRATIONS[:PREVIOUS]:
        step(conn)
    conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version={PREVIOUS}")
    conn.execute(
        "INSERT INTO memory_items(id, kind, text, scope, run_id, event_seq, tool_call_id, "
        "message_index, source, created_at, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (item_id, "fact", SECRET, "", None, None, None, None, "agent", 1.0, None),
    )
    conn.execute(
        "INSERT INTO runs(run_id, session, agent, model, created_at, status) "
        "VALUES (?, 'ops', 'agent', 'test:scripted', 2.0, 'finished')",
        (result.run_id,),
    )
    conn.executemany(
        "INSERT INTO events(run_id, seq, kind, data) VALUES (?, ?, ?, ?)",
        [
            (result.run_id, i, e.kind, events.dump_json(e).decode())
            for i, e in enumerate(result.journal)
        ],
    )
    conn.execute(
        "INSERT INTO sessions(name, created_at, updated_at, context) VALUES ('ops', 2.0, 2.0, ?)",
        (events.dump_json(context).decode(),),
    )
    conn.executemany(
        "INSERT INTO session_messages(session, position, turn, run_id, message) "
        "VALUES ('ops', ?, 0, ?, ?)",
        [(i, result.run_id, messages.dump_json(m).decode()) for i, m in enumerate(result.messages)],
    )
    conn.execute("COMMIT")
    conn.close()
    return item_id, result.run_id


def test_a_previous_schema_database_is_migrated_and_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "legato.db"
    item_id, run_id = old_database(path)

    store = SQLiteStore(path)
    assert store.db.version == schema_version() > PREVIOUS
    memory = SQLiteMemory(db=store.db)
    [found] = memory.recall("staging root password")
    assert found.item.id == item_id and found.item.expires_at is None  # old items never expire
    assert len(store.load_session("ops")) == 4
    assert store.session_context("ops") is not None
    assert len(store.load_run(run_id)) > 0

    forgotten = memory.forget(item_id)  # the new redaction works on old rows
    assert forgotten.contexts == ("ops",) and forgotten.runs == (run_id,)
    assert store.session_context("ops") is None
    assert all("tulip" not in m.text for m in store.load_session("ops"))
    results = [r.text for m in store.load_session("ops") for r in m.tool_results]
    assert any("[forgotten]" in r for r in results)
    assert len(store.load_run(run_id)) > 0  # the journal still loads

    brief = memory.remember("A short-lived note.", ttl=60)  # and the new column is there
    assert brief.expires_at is not None
    store.close()

    reopened = SQLiteStore(path)  # opening again migrates nothing
    assert reopened.db.version == schema_version()
    conn = sqlite3.connect(path)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(memory_items)")]
    assert "expires_at" in columns
    conn.close()
