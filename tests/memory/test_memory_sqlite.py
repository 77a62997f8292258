"""Long-term memory: provenance, FTS5 search, embeddings, forgetting, tools, auto recall."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from legato import Agent
from legato.exceptions import ConfigurationError, MemoryItemNotFound
from legato.memory import Embedder, Memory, MemoryStore, Provenance, SQLiteMemory, recall_block
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply


@pytest.fixture
def memory(tmp_path: Path) -> SQLiteMemory:
    return SQLiteMemory(tmp_path / "legato.db")


def test_memory_implements_the_protocol(memory: SQLiteMemory) -> None:
    assert isinstance(memory, MemoryStore)


def test_items_keep_their_provenance(memory: SQLiteMemory) -> None:
    prov = Provenance(source="tool", run_id="run1", event_seq=7, tool_call_id="call_3")
    item = memory.remember("The deploy key rotates every 90 days.", provenance=prov)
    loaded = memory.get(item.id)
    assert loaded.provenance == prov
    assert loaded.kind == "fact"
    with pytest.raises(MemoryItemNotFound):
        memory.get("nope")
    with pytest.raises(ConfigurationError):
        memory.remember("   ")


def test_bm25_search_ranks_the_matching_item_first(memory: SQLiteMemory) -> None:
    memory.remember("The user's favourite colour is green.", kind="preference")
    memory.remember("The build server runs Debian bookworm.")
    memory.remember("Green tea is served at 3pm in the office.", kind="episode")
    found = memory.recall("what colour does the user like as favourite")
    assert found[0].item.text == "The user's favourite colour is green."
    assert found[0].score >= found[-1].score
    only = memory.recall("green", kinds=["episode"])
    assert [r.item.kind for r in only] == ["episode"]
    assert memory.recall("") == []
    assert memory.recall('"; DROP TABLE memory_items; --') == []  # query text is never SQL


def test_scopes_separate_namespaces(memory: SQLiteMemory) -> None:
    memory.remember("Alice likes tea.", scope="alice")
    memory.remember("Bob likes tea.", scope="bob")
    assert [r.item.text for r in memory.recall("tea", scope="alice")] == ["Alice likes tea."]
    assert len(memory.items()) == 2


def test_forget_follows_provenance_to_every_derived_item(memory: SQLiteMemory) -> None:
    canary = memory.remember(
        "CANARY-7781 the vault password is swordfish",
        provenance=Provenance(source="tool", run_id="r1", tool_call_id="call_9"),
    )
    summary = memory.remember(
        "Episode summary: a vault password (CANARY-7781) was read.",
        kind="episode",
        derived_from=[canary.id],
    )
    digest = memory.remember("Weekly digest mentions CANARY-7781.", derived_from=[summary.id])
    unrelated = memory.remember("The office closes at 6pm.")
    removed = memory.forget(tool_call_id="call_9")
    assert set(removed.items) == {canary.id, summary.id, digest.id}
    assert memory.recall("CANARY-7781") == []
    assert all("CANARY" not in i.text for i in memory.items())
    assert [i.id for i in memory.items()] == [unrelated.id]
    with pytest.raises(MemoryItemNotFound):
        memory.forget("gone")
    with pytest.raises(ConfigurationError):
        memory.forget()


def test_forget_without_following_derivations_would_leak(memory: SQLiteMemory) -> None:
    """What the provenance walk prevents: deleting only the source leaves the derived copy."""
    canary = memory.remember("CANARY-1234 secret")
    memory.remember("derived note about CANARY-1234", derived_from=[canary.id])
    with memory.db.write() as conn:  # a naive forget: the one row only
        conn.execute("DELETE FROM memory_items WHERE id = ?", (canary.id,))
    assert memory.recall("CANARY-1234")  # still recallable through the derived item


def test_forget_by_run(memory: SQLiteMemory) -> None:
    memory.remember("a", provenance=Provenance(run_id="r1"))
    memory.remember("b", provenance=Provenance(run_id="r1"))
    memory.remember("c", provenance=Provenance(run_id="r2"))
    assert len(memory.forget(run_id="r1").items) == 2
    assert [i.text for i in memory.items()] == ["c"]


def test_derived_from_must_exist(memory: SQLiteMemory) -> None:
    with pytest.raises(MemoryItemNotFound):
        memory.remember("x", derived_from=["missing"])
    assert memory.items() == []


class HashEmbedder:
    """A deterministic bag-of-words embedder with synonyms, enough to show fusion."""

    SYNONYMS: ClassVar[dict[str, str]] = {"automobile": "car", "vehicle": "car", "auto": "car"}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for text in texts:
            vec = [0.0] * 64
            for word in text.lower().split():
                word = self.SYNONYMS.get(word.strip(".,?"), word.strip(".,?"))
                vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
            out.append(vec)
        return out


def test_embeddings_find_what_words_alone_miss(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    assert isinstance(embedder, Embedder)
    memory = SQLiteMemory(tmp_path / "m.db", embedder=embedder)
    memory.remember("The car is parked on level 3.")
    memory.remember("Lunch is at noon.")
    plain = SQLiteMemory(db=memory.db)
    assert plain.recall("automobile") == []
    found = memory.recall("automobile")
    assert found[0].item.text == "The car is parked on level 3."


def test_memory_tools_record_provenance_and_forget(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "legato.db")
    memory = SQLiteMemory(db=store.db)  # one file for sessions and memory
    model = ScriptedModel(
        [
            reply(
                call("remember", {"text": "The user prefers metric units.", "kind": "preference"})
            ),
            "Noted.",
        ]
    )
    agent = Agent(model, memory=Memory(store=memory), store=store)
    result = agent.run_sync("Please always use metric units.", session="u")
    [item] = memory.items()
    assert item.kind == "preference"
    assert item.provenance.source == "model"
    assert item.provenance.run_id == result.run_id
    assert item.provenance.tool_call_id == result.messages[1].tool_calls[0].id
    assert item.provenance.message_index == 0
    again = ScriptedModel(
        [
            reply(
                call("remember", {"text": "The user prefers metric units.", "kind": "preference"})
            ),
            "ok",
        ]
    )
    Agent(again, memory=Memory(store=memory)).run_sync("metric, remember?")
    assert f"Already remembered as {item.id}" in again.requests[1].messages[-1].tool_results[0].text
    assert len(memory.items()) == 1

    # the next run recalls it into the instructions automatically
    follow = ScriptedModel(
        [
            reply(call("recall", {"query": "units"})),
            reply(call("forget", {"item_id": item.id})),
            "ok",
        ]
    )
    agent = Agent(follow, instructions="Be brief.", memory=Memory(store=memory), store=store)
    agent.run_sync("Which units should you use?", session="u")
    first = follow.requests[0].instructions or ""
    assert first.startswith("Be brief.")
    assert "The user prefers metric units." in first
    recalled = follow.requests[1].messages[-1].tool_results[0].text
    assert "metric units" in recalled
    assert "Forgot 1 item" in follow.requests[2].messages[-1].tool_results[0].text
    assert memory.items() == []


def test_recall_block_is_bounded_by_tokens(memory: SQLiteMemory) -> None:
    for i in range(30):
        memory.remember(f"Fact {i} about the billing system: invoices are numbered B-{i:04}.")
    block = recall_block(memory, "billing invoices", max_tokens=60)
    assert block is not None
    assert len(block) / 4 <= 60
    assert block.count("\n- ") >= 1
    assert recall_block(memory, "billing", max_tokens=0) is None
    assert recall_block(memory, "zebra", max_tokens=100) is None
