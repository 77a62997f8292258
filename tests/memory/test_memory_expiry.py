"""Items that expire: never recalled or listed once expired; purged like forgotten ones.

Time is an injected clock: no sleeps, no timed assertions.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from legato import Agent
from legato.exceptions import ConfigurationError, MemoryItemNotFound
from legato.memory import Memory, MemoryStore, SQLiteMemory, recall_block
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def memory(tmp_path: Path, clock: Clock) -> SQLiteMemory:
    return SQLiteMemory(tmp_path / "legato.db", clock=clock)


def test_an_item_with_a_ttl_is_recalled_until_it_expires(
    memory: SQLiteMemory, clock: Clock
) -> None:
    assert isinstance(memory, MemoryStore)
    brief = memory.remember("The user is in a meeting until 3pm.", ttl=3600)
    lasting = memory.remember("The user works in the Berlin office.")
    assert brief.created_at == clock.now
    assert brief.expires_at == clock.now + 3600
    assert lasting.expires_at is None
    assert memory.get(brief.id).expires_at == brief.expires_at

    clock.now += 3599
    assert [r.item.id for r in memory.recall("meeting")] == [brief.id]
    assert {i.id for i in memory.items()} == {brief.id, lasting.id}

    clock.now += 1  # the expiry instant: expired
    assert memory.recall("meeting") == []
    assert [i.id for i in memory.items()] == [lasting.id]
    assert recall_block(memory, "meeting", max_tokens=200) is None
    with pytest.raises(MemoryItemNotFound):
        memory.get(brief.id)
    with pytest.raises(MemoryItemNotFound):  # nothing new can be derived from it
        memory.remember("Meetings end at 3pm.", derived_from=[brief.id])


def test_expires_at_is_an_absolute_time(memory: SQLiteMemory, clock: Clock) -> None:
    item = memory.remember("Sprint 12 ends on Friday.", expires_at=clock.now + 10)
    assert item.expires_at == clock.now + 10
    clock.now += 10
    assert memory.recall("sprint") == []


@pytest.mark.parametrize(
    ("ttl", "expires_at"), [(0, None), (-5, None), (None, 1_000_000.0), (10, 2e6)]
)
def test_an_expiry_that_makes_no_sense_is_refused(
    memory: SQLiteMemory, ttl: float | None, expires_at: float | None
) -> None:
    with pytest.raises(ConfigurationError):  # not positive, already past, or both given
        memory.remember("x", ttl=ttl, expires_at=expires_at)
    assert memory.items() == []


def test_a_derived_item_expires_with_its_source(memory: SQLiteMemory, clock: Clock) -> None:
    source = memory.remember("The on-call engineer this week is Lin.", ttl=100)
    digest = memory.remember("Digest: Lin is on call.", kind="episode", derived_from=[source.id])
    longer = memory.remember("Lin on call (kept a year).", derived_from=[source.id], ttl=3e7)
    assert digest.expires_at == source.expires_at  # no later than its source
    assert longer.expires_at == source.expires_at
    clock.now += 100
    assert memory.recall("Lin on call") == []


def test_purge_deletes_expired_items_and_what_was_derived_from_them(
    memory: SQLiteMemory, clock: Clock
) -> None:
    assert memory.purge_expired().items == ()  # nothing to do
    old = memory.remember("Deploys are frozen this week.", ttl=60)
    derived = memory.remember("Freeze noted.", derived_from=[old.id])
    kept = memory.remember("Deploys need two reviews.")
    assert memory.purge_expired().items == ()  # not expired yet
    clock.now += 61
    purged = memory.purge_expired()
    assert set(purged.items) == {old.id, derived.id}
    assert [i.id for i in memory.items()] == [kept.id]
    with sqlite3.connect(memory.db.path) as conn:  # gone from the file, not only hidden
        assert conn.execute("SELECT count(*) FROM memory_items").fetchone()[0] == 1
    assert memory.purge_expired().items == ()


def test_forget_reaches_an_expired_item(memory: SQLiteMemory, clock: Clock) -> None:
    item = memory.remember("Temporary password: hunter2.", ttl=5)
    clock.now += 5
    assert memory.forget(item.id).items == (item.id,)


def test_purging_redacts_the_session_that_recalled_an_expired_item(
    tmp_path: Path, clock: Clock
) -> None:
    store = SQLiteStore(tmp_path / "legato.db")
    memory = SQLiteMemory(db=store.db, clock=clock)
    memory.remember("The guest wifi password is plum-7731.", ttl=86_400)
    model = ScriptedModel([reply(call("recall", {"query": "wifi password"})), "Found it."])
    Agent(model, memory=Memory(store=memory, recall_tokens=0), store=store).run_sync(
        "What is the wifi password?", session="front-desk"
    )
    clock.now += 86_400
    purged = memory.purge_expired()
    assert purged.sessions == ("front-desk",) and purged.messages == 1
    stored = "\n".join(
        m.text + "".join(r.text for r in m.tool_results) for m in store.load_session("front-desk")
    )
    assert "plum-7731" not in stored
    assert "[forgotten]" in stored


def test_the_remember_tool_does_not_see_an_expired_duplicate(tmp_path: Path, clock: Clock) -> None:
    memory = SQLiteMemory(tmp_path / "legato.db", clock=clock)
    memory.remember("The user prefers metric units.", kind="preference", ttl=10)
    clock.now += 10
    model = ScriptedModel(
        [
            reply(
                call("remember", {"text": "The user prefers metric units.", "kind": "preference"})
            ),
            "ok",
        ]
    )
    Agent(model, memory=Memory(store=memory)).run_sync("Use metric.")
    assert "Remembered as" in model.requests[1].messages[-1].tool_results[0].text
    [item] = memory.items()
    assert item.expires_at is None
